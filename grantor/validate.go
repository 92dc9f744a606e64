package grantor

import (
	"net"
	"slices"
	"strings"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// Limits on peer input. Everything a sidecar sends is checked against them
// at the gRPC edge, before it can reach raft.
const (
	maxLeaseName = 256
	maxSession   = 64
	maxOwner     = 256
	// maxKeepAliveLeases bounds the leases of one keepalive request.
	maxKeepAliveLeases = 65536
	// maxKeepAliveSessions bounds the sessions of one keepalive request.
	maxKeepAliveSessions = 1024
	// maxSessionEnds bounds the grants of one session a keepalive names
	// untold, and those it names owner-ended (untold.go).
	maxSessionEnds = 1024
)

// validLeaseName checks a lease name: 1..256 bytes of [A-Za-z0-9._-/],
// slash-separated segments, none empty and none "..".
func validLeaseName(field, name string) error {
	if name == "" {
		return invalid(field, "lease name is empty")
	}
	if len(name) > maxLeaseName {
		return invalid(field, "lease name is %d bytes, more than %d", len(name), maxLeaseName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '_' || c == '-' || c == '/'
		if !ok {
			return invalid(field, "lease name %q has byte %q at %d; allowed are A-Z a-z 0-9 . _ - /", name, c, i)
		}
	}
	for seg := range strings.SplitSeq(name, "/") {
		switch seg {
		case "":
			return invalid(field, "lease name %q has an empty segment (leading, trailing or double slash)", name)
		case "..":
			return invalid(field, "lease name %q has a \"..\" segment", name)
		}
	}
	return nil
}

func validSession(field, s string) error {
	if s == "" {
		return invalid(field, "session is empty")
	}
	if len(s) > maxSession {
		return invalid(field, "session is %d bytes, more than %d", len(s), maxSession)
	}
	return nil
}

func validOwner(owner string) error {
	if len(owner) > maxOwner {
		return invalid("owner", "owner is %d bytes, more than %d", len(owner), maxOwner)
	}
	return nil
}

func validRequestID(id *grantorpb.RequestID) (requestID, error) {
	if id == nil {
		return requestID{}, invalid("id", "request id is missing")
	}
	if err := validSession("id.session", id.GetSession()); err != nil {
		return requestID{}, err
	}
	if id.GetSeq() < 1 {
		return requestID{}, invalid("id.seq", "seq must be at least 1")
	}
	if id.GetFirstUnacked() > id.GetSeq() {
		return requestID{}, invalid("id.first_unacked", "first_unacked %d is above the request's own seq %d",
			id.GetFirstUnacked(), id.GetSeq())
	}
	also := id.GetAlsoReceived()
	if len(also) > maxAlsoReceived {
		// Forgetting is a permission: the rest stay remembered until
		// first_unacked passes them (or a later request lists them).
		also = also[:maxAlsoReceived]
	}
	for _, seq := range also {
		switch {
		case seq < 1:
			return requestID{}, invalid("id.also_received", "seq 0 listed")
		case seq == id.GetSeq():
			return requestID{}, invalid("id.also_received", "lists the request's own seq %d", seq)
		}
	}
	r := requestID{Session: id.GetSession(), Seq: id.GetSeq(), FirstUnacked: id.GetFirstUnacked()}
	// Only seqs a sidecar numbered shortly before this request reach the
	// entry, sorted, once each (alsoReceivedWindow, review R8-9); the
	// others stay remembered.
	for _, seq := range also {
		if seq < id.GetSeq() && id.GetSeq()-seq <= alsoReceivedWindow {
			r.AlsoReceived = append(r.AlsoReceived, seq)
		}
	}
	slices.Sort(r.AlsoReceived)
	r.AlsoReceived = slices.Compact(r.AlsoReceived)
	return r, nil
}

func (c Config) validTTL(ns int64) (time.Duration, error) {
	d := time.Duration(ns)
	if d < c.MinTTL || d > c.MaxTTL {
		return 0, invalid("ttl_ns", "ttl %v is outside [%v, %v]", d, c.MinTTL, c.MaxTTL)
	}
	return d, nil
}

// validLockDelay checks an Acquire's lock-delay: 0 to MaxLockDelay.
func (c Config) validLockDelay(ns int64) (time.Duration, error) {
	if d := time.Duration(ns); d >= 0 && d <= c.MaxLockDelay {
		return d, nil
	}
	return 0, invalid("lock_delay_ns", "lock-delay %v is outside [0, %v]", time.Duration(ns), c.MaxLockDelay)
}

func validWait(ns int64) (time.Duration, error) {
	d := time.Duration(ns)
	if d < 0 || d > MaxWait {
		return 0, invalid("wait_ns", "wait %v is outside [0, %v]", d, MaxWait)
	}
	return d, nil
}

// validAcquire checks an Acquire, or with shared an AcquireShared, which
// has no limit above 1.
func (c Config) validAcquire(req *grantorpb.AcquireRequest, shared bool) (acquireCmd, time.Duration, error) {
	id, err := validRequestID(req.GetId())
	if err != nil {
		return acquireCmd{}, 0, err
	}
	if err := validLeaseName("lease", req.GetLease()); err != nil {
		return acquireCmd{}, 0, err
	}
	if err := validOwner(req.GetOwner()); err != nil {
		return acquireCmd{}, 0, err
	}
	ttl, err := c.validTTL(req.GetTtlNs())
	if err != nil {
		return acquireCmd{}, 0, err
	}
	wait, err := validWait(req.GetWaitNs())
	if err != nil {
		return acquireCmd{}, 0, err
	}
	if l := req.GetLimit(); l > MaxHolders {
		return acquireCmd{}, 0, invalid("limit", "limit %d is more than %d", l, MaxHolders)
	}
	if l := req.GetLimit(); shared && l > 1 {
		return acquireCmd{}, 0, invalid("limit", "a shared acquire has no limit (got %d): shared grants of a name are unlimited, a semaphore is another kind of lock", l)
	}
	if err := validValue("value", req.GetValue()); err != nil {
		return acquireCmd{}, 0, err
	}
	delay, err := c.validLockDelay(req.GetLockDelayNs())
	if err != nil {
		return acquireCmd{}, 0, err
	}
	return acquireCmd{ID: id, Lease: req.GetLease(), Owner: req.GetOwner(), TTL: ttl,
		MaxHolders: int(req.GetLimit()), Value: req.GetValue(), LockDelay: delay, Shared: shared}, wait, nil
}

func validRelease(req *grantorpb.ReleaseRequest) (releaseCmd, error) {
	id, err := validRequestID(req.GetId())
	if err != nil {
		return releaseCmd{}, err
	}
	if err := validLeaseName("lease", req.GetLease()); err != nil {
		return releaseCmd{}, err
	}
	if err := validOwner(req.GetOwner()); err != nil {
		return releaseCmd{}, err
	}
	if req.GetToken() < 1 {
		return releaseCmd{}, invalid("token", "token must be at least 1")
	}
	return releaseCmd{ID: id, Lease: req.GetLease(), Owner: req.GetOwner(), Token: req.GetToken(), OwnerEnded: req.GetOwnerEnded(),
		Lapsed: req.GetLapsed() && req.GetOwnerEnded()}, nil
}

// validSessions checks a keepalive of whole sessions (version 5).
func validSessions(req *grantorpb.KeepAliveRequest) ([]sessionRenewal, error) {
	ss := req.GetSessions()
	switch {
	case len(ss) > maxKeepAliveSessions:
		return nil, invalid("sessions", "%d sessions in one keepalive, more than %d", len(ss), maxKeepAliveSessions)
	case len(req.GetLeases()) > 0:
		return nil, invalid("leases", "a keepalive names sessions or leases, not both")
	}
	out := make([]sessionRenewal, len(ss))
	var seen map[string]bool // past a few sessions; fewer are compared in turn
	if len(ss) > 8 {
		seen = make(map[string]bool, len(ss))
	}
	for i, s := range ss {
		if err := validSession("sessions.session", s.GetSession()); err != nil {
			return nil, err
		}
		// Each session once: the leader lists every grant of a session
		// whose digest differs, once for each time it is named (review
		// finding K1: one session 1,024 times made a 21 KB request's
		// answer 46 MB, built under the lessor's mutex).
		twice := false
		if seen != nil {
			twice = seen[s.GetSession()]
			seen[s.GetSession()] = true
		} else {
			twice = slices.ContainsFunc(out[:i], func(o sessionRenewal) bool { return o.Session == s.GetSession() })
		}
		if twice {
			return nil, invalid("sessions.session", "session %q named twice in one keepalive", s.GetSession())
		}
		if ttl := s.GetTtlNs(); ttl < 0 || ttl > int64(maxTTLLimit) {
			return nil, invalid("sessions.ttl_ns", "session %d has term %v", i, time.Duration(ttl))
		}
		untold, err := validEnds("sessions.untold", s.GetUntold())
		if err != nil {
			return nil, err
		}
		ended, err := validEnds("sessions.owner_ended", s.GetOwnerEnded())
		if err != nil {
			return nil, err
		}
		out[i] = sessionRenewal{Session: s.GetSession(), TTL: time.Duration(s.GetTtlNs()), Digest: s.GetLeaseSetVersion(), Untold: untold, OwnerEnded: ended}
	}
	return out, nil
}

// validEnds checks the grants a keepalive names to end (untold.go).
func validEnds(field string, refs []*grantorpb.LeaseRef) ([]grantRef, error) {
	if len(refs) > maxSessionEnds {
		return nil, invalid(field, "%d grants for one session, more than %d", len(refs), maxSessionEnds)
	}
	var out []grantRef
	for i, r := range refs {
		if err := validLeaseName(field+".lease", r.GetLease()); err != nil {
			return nil, err
		}
		if r.GetToken() < 1 {
			return nil, invalid(field+".token", "grant %d (%q) has token 0", i, r.GetLease())
		}
		out = append(out, grantRef{Lease: r.GetLease(), Token: r.GetToken()})
	}
	return out, nil
}

func validKeepAlive(req *grantorpb.KeepAliveRequest) ([]leaseRef, error) {
	if err := validSession("session", req.GetSession()); err != nil {
		return nil, err
	}
	if len(req.GetLeases()) > maxKeepAliveLeases {
		return nil, invalid("leases", "%d leases in one keepalive, more than %d", len(req.GetLeases()), maxKeepAliveLeases)
	}
	refs := make([]leaseRef, 0, len(req.GetLeases()))
	for i, l := range req.GetLeases() {
		if err := validLeaseName("leases.lease", l.GetLease()); err != nil {
			return nil, err
		}
		if l.GetToken() < 1 {
			return nil, invalid("leases.token", "lease %d (%q) has token 0", i, l.GetLease())
		}
		if ttl := l.GetTtlNs(); ttl < 0 || ttl > int64(maxTTLLimit) {
			return nil, invalid("leases.ttl_ns", "lease %d (%q) has term %v", i, l.GetLease(), time.Duration(ttl))
		}
		refs = append(refs, leaseRef{Lease: l.GetLease(), Token: l.GetToken(), TTL: time.Duration(l.GetTtlNs())})
	}
	return refs, nil
}

func validRegisterNode(req *grantorpb.RegisterNodeRequest) (registerNodeCmd, error) {
	id := req.GetNodeId()
	if id == "" || len(id) > 256 {
		return registerNodeCmd{}, invalid("node_id", "node_id must be 1 to 256 bytes")
	}
	if _, _, err := net.SplitHostPort(req.GetRpcAddr()); err != nil {
		return registerNodeCmd{}, invalid("rpc_addr", "rpc_addr %q: %v", req.GetRpcAddr(), err)
	}
	if m := req.GetMaxCommand(); m < 1 || m > 255 {
		return registerNodeCmd{}, invalid("max_command", "max_command %d is outside [1, 255]", m)
	}
	return registerNodeCmd{NodeID: id, RPCAddr: req.GetRpcAddr(), MaxCmd: cmdType(req.GetMaxCommand())}, nil
}

func validProclaim(req *grantorpb.ProclaimRequest) (proclaimCmd, error) {
	id, err := validRequestID(req.GetId())
	if err != nil {
		return proclaimCmd{}, err
	}
	if err := validLeaseName("lease", req.GetLease()); err != nil {
		return proclaimCmd{}, err
	}
	if err := validOwner(req.GetOwner()); err != nil {
		return proclaimCmd{}, err
	}
	if req.GetToken() < 1 {
		return proclaimCmd{}, invalid("token", "token must be at least 1")
	}
	if err := validValue("value", req.GetValue()); err != nil {
		return proclaimCmd{}, err
	}
	return proclaimCmd{ID: id, Lease: req.GetLease(), Owner: req.GetOwner(), Token: req.GetToken(), Value: req.GetValue()}, nil
}
