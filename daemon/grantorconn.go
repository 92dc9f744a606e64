package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// grantorConn is the sidecar's link with the grantor cluster: its grantor
// sessions, one per distinct term (a session renews as a whole, so every
// lease in it has the session's term), each with request ids that make
// retries safe; and the grantors it knows with its best guess of the
// leader, which it follows as grantors redirect it.
type grantorConn struct {
	// session is this daemon start's random id; grantor sessions are
	// named after it and their term (sessionFor).
	session string
	// clock is the daemon's (Config.Clock): what a call waits for, and
	// how long, is read on it.
	clock clockwatch.Clock

	mu       sync.Mutex
	sessions map[time.Duration]*gsession
	addrs    []string // known grantor RPC addresses
	leader   string   // best guess; "" means try addrs in turn
	next     int      // next of addrs to try when the leader is unknown
	conns    map[string]*grpc.ClientConn
	probes   map[string]*leaderProbe

	// confirmAfter is how long a request may wait at a grantor before
	// the grantor must confirm that it leads (leader.go); 0 never asks.
	confirmAfter time.Duration
	// onContact, when set, hears of every exchange that needed a leader
	// (nil error: one answered). It must not block.
	onContact func(addr string, err error)
	creds     credentials.TransportCredentials                // Config.Credentials
	dialer    func(context.Context, string) (net.Conn, error) // Config.Dialer
	// idHorizon bounds the attempts of an acquire's request id (the
	// constant idHorizon; tests shorten it). Guarded by mu.
	idHorizon time.Duration
}

func newGrantorConn(addrs []string) (*grantorConn, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	return &grantorConn{
		session:   hex.EncodeToString(b[:]),
		clock:     clockwatch.System,
		sessions:  map[time.Duration]*gsession{},
		idHorizon: idHorizon,
		addrs:     append([]string(nil), addrs...),
		conns:     map[string]*grpc.ClientConn{},
		probes:    map[string]*leaderProbe{},
	}, nil
}

func (g *grantorConn) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, cc := range g.conns {
		cc.Close()
	}
	g.conns = map[string]*grpc.ClientConn{}
}

// setGrantors replaces the known grantors (from discovery); leader, if
// not "", is the leader they report.
func (g *grantorConn) setGrantors(addrs []string, leader string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.addrs = append(g.addrs[:0], addrs...)
	if leader != "" {
		g.leader = leader
	}
}

// appendKnown appends the grantor addresses known now to dst.
func (g *grantorConn) appendKnown(dst []string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append(dst, g.addrs...)
}

// client returns a client for the grantor most likely to be leader.
func (g *grantorConn) client() (grantorpb.GrantorClient, string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	addr := g.leader
	if addr == "" {
		if len(g.addrs) == 0 {
			return nil, "", errNoGrantorKnown
		}
		addr = g.addrs[g.next%len(g.addrs)]
	}
	cc, err := g.connLocked(addr)
	if err != nil {
		return nil, "", err
	}
	return grantorpb.NewGrantorClient(cc), addr, nil
}

// connLocked returns the connection to the grantor at addr, made on first
// use. It never goes idle (gRPC would close an idle one after 30 minutes,
// and the next exchange would pay a TLS handshake). g.mu is held.
func (g *grantorConn) connLocked(addr string) (*grpc.ClientConn, error) {
	if cc := g.conns[addr]; cc != nil {
		return cc, nil
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(g.creds), grpc.WithIdleTimeout(0)}
	if g.dialer != nil {
		opts = append(opts, grpc.WithContextDialer(g.dialer))
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("grantor %s: %w", addr, err)
	}
	g.conns[addr] = cc
	return cc, nil
}

// warm keeps a connection open to every known grantor, not only to the
// one that leads (issue 25 item 2): when the leader dies, every exchange
// after it goes to a grantor this sidecar is connected to already, so the
// new leader takes no TLS handshake from any host at the moment it has
// the most to do. A connection that broke goes idle, and warm connects it
// again; one that is up (or connecting) is left alone, since Connect
// costs a trip through gRPC's serializer even then (issue 25: 8% of a
// shard of 2,500 simulated hosts, every second). It costs each grantor a
// connection from every host, which the leader holds anyway.
func (g *grantorConn) warm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, addr := range g.addrs {
		if cc, err := g.connLocked(addr); err == nil && cc.GetState() == connectivity.Idle {
			cc.Connect()
		}
	}
}

// failed learns from an error of the grantor at addr: a redirect names
// the leader; anything else makes the next call try another grantor.
func (g *grantorConn) failed(addr string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.leader != addr && g.leader != "" {
		return // someone already moved on
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.FailedPrecondition {
		for _, d := range st.Details() {
			if nl, ok := d.(*grantorpb.NotLeader); ok && nl.LeaderRpcAddr != "" && nl.LeaderRpcAddr != addr {
				g.leader = nl.LeaderRpcAddr
				return
			}
		}
	}
	g.leader = ""
	g.next++
	if n := len(g.addrs); n > 1 && g.addrs[g.next%n] == addr {
		g.next++ // not the one that just failed, whatever the rotation says
	}
}

// gsession is one grantor session of this daemon: the leases of one term.
// Its fields below refused are guarded by grantorConn.mu.
type gsession struct {
	id  string
	ttl time.Duration
	// refused says a grantor refused the session as another identity's
	// (sessionRefusedLocked); guarded by Daemon.mu.
	refused bool

	seq      uint64
	inflight map[uint64]struct{}
	received []uint64 // replies in since the last request was numbered
}

// sessionFor returns the grantor session of the leases of term ttl. Its
// id is the daemon's base id, the term, and 64 random bits: a session
// belongs to the identity that uses it first, and the base is in the
// daemon's log and every used id in the grantors' audit trail, so an id
// computable from them could be opened first with another sidecar's
// certificate, and every acquire of that term refused (red team, issue
// 21). The base stays its prefix: hideSession relies on it. At most 60
// bytes (the grantors take 64).
func (g *grantorConn) sessionFor(ttl time.Duration) *gsession {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sessions[ttl]
	if s == nil {
		var r [8]byte
		rand.Read(r[:]) // never fails (crypto/rand, Go 1.24)
		id := g.session + "-" + strconv.FormatInt(ttl.Milliseconds(), 10) + "ms-" + hex.EncodeToString(r[:])
		s = &gsession{id: id, ttl: ttl, inflight: map[uint64]struct{}{}}
		g.sessions[ttl] = s
	}
	return s
}

// newID numbers a mutating request of session s. done must be called
// once its reply (or final failure) is in, so the grantor may forget its
// outcome.
//
// Besides first_unacked, each id lists the seqs above it whose replies
// came in since the previous request (also_received): a long waiting
// acquire keeps first_unacked low, and without the list the grantor would
// have to remember every outcome after it.
func (g *grantorConn) newID(s *gsession) (id *grantorpb.RequestID, done func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s.seq++
	seq := s.seq
	s.inflight[seq] = struct{}{}
	first := seq
	for q := range s.inflight {
		first = min(first, q)
	}
	var also []uint64
	for _, q := range s.received {
		if q > first {
			also = append(also, q)
		}
	}
	s.received = s.received[:0]
	return &grantorpb.RequestID{Session: s.id, Seq: seq, FirstUnacked: first, AlsoReceived: also}, func() {
		g.mu.Lock()
		delete(s.inflight, seq)
		s.received = append(s.received, seq)
		g.mu.Unlock()
	}
}

// attemptTimeout bounds one attempt of a unary call (on top of any wait
// the call asks the grantor for).
const attemptTimeout = 3 * time.Second

// errNoGrantorKnown: no address given, and none found by gossip yet.
var errNoGrantorKnown = errors.New("no grantor known")

// errGrantorUnavailable wraps failures to reach a serving grantor.
var errGrantorUnavailable = errors.New("grantor unavailable")

// callOpts say how retry runs a request.
type callOpts struct {
	// attempt bounds one attempt: a grantor that went silent
	// (partitioned, powered off: no connection reset ever comes) is
	// given up on and another is tried.
	attempt time.Duration
	// leader is set for requests only the leader answers: an attempt in
	// flight longer than the confirm timeout must be confirmed by its
	// grantor (leader.go), and an answer counts as contact with the
	// leader.
	leader bool
	// patience is until when to keep trying while no grantor is known
	// at all (none configured and none found by gossip yet); zero gives
	// up at once.
	patience clockwatch.Instant
}

// retry calls f on the likely leader, with the same request id, until it
// succeeds, fails for a reason a retry cannot mend, or ctx ends. Retrying
// with the same id is safe: the grantor applies a request once.
func retry[T any](ctx context.Context, g *grantorConn, o callOpts, f func(context.Context, grantorpb.GrantorClient) (T, error)) (T, error) {
	backoff := 50 * time.Millisecond
	for {
		api, addr, err := g.client()
		var v T
		if err == nil {
			actx, cancel := context.WithTimeout(ctx, o.attempt)
			stop := func() bool { return false }
			if o.leader {
				stop = g.confirmWhile(actx, cancel, addr, api)
			}
			v, err = f(actx, api)
			if stop() {
				err = errUnconfirmed
			}
			cancel()
			if o.leader && (err == nil || retryable(err)) {
				g.contacted(addr, err)
			}
			if err == nil || !retryable(err) {
				return v, err
			}
			g.failed(addr, err)
		} else if errors.Is(err, errNoGrantorKnown) && !g.clock.Now().Before(o.patience) {
			var zero T
			return zero, err
		}
		if !backOff(ctx, jitter(backoff)) {
			var zero T
			return zero, fmt.Errorf("%w: %w", errGrantorUnavailable, err)
		}
		backoff = min(2*backoff, time.Second)
	}
}

// backOff waits d, a backoff between attempts, and reports false if ctx
// ended first. It is a wake-up on Go's own monotonic timer, not the
// daemon's clock: no decision reads it (what a call may still wait for
// and until when it keeps trying are read on g.clock), and a daemon on a
// fake clock retries without a test moving it.
func backOff(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.FailedPrecondition, codes.DeadlineExceeded, codes.Aborted:
		return true
	}
	return false
}

// acquire relays an acquire; attempts counts every request sent. Every
// attempt asks the grantor to wait only for what is left of wait.
//
// When abandon is closed before the answer came (the owner ended, or the
// requester left), the attempt in flight is cancelled, which takes the
// acquire out of the grantor's queue, and one more attempt with the same
// request id and no wait settles what became of it: the grant, if the
// grantor had made one (a retry is answered from its record), else a
// fresh answer. The caller ends whatever it got and did not hand on.
//
// A call that gets no answer at all (every attempt failed or went
// unanswered until ctx ended) may have been granted all the same, or may
// be granted later by an attempt still on its way: it fails with an
// *unansweredError, whose settle the caller must run.
func (g *grantorConn) acquire(ctx context.Context, s *gsession, ask acquireAsk, wait time.Duration, attempts *atomic.Uint64, abandon <-chan struct{}) (*grantorpb.AcquireResponse, error) {
	ttl := s.ttl
	id, done := g.newID(s)
	handedOn := false
	defer func() {
		if !handedOn {
			done()
		}
	}()
	g.mu.Lock()
	h := g.idHorizon
	g.mu.Unlock()
	start := g.clock.Now()
	waitUntil, horizon := start.Add(wait), start.Add(h)
	ctx, hcancel := context.WithTimeout(ctx, h)
	defer hcancel()
	call := func(ctx context.Context, api grantorpb.GrantorClient, wait time.Duration) (*grantorpb.AcquireResponse, error) {
		attempts.Add(1)
		req := &grantorpb.AcquireRequest{Id: id, Lease: ask.name, Owner: ask.owner, TtlNs: int64(ttl), WaitNs: int64(max(wait, 0)),
			Limit: uint32(max(ask.limit, 0)), Value: ask.value, LockDelayNs: int64(ask.lockDelay)}
		if ask.shared {
			return api.AcquireShared(ctx, req)
		}
		return api.Acquire(ctx, req)
	}
	noWait := func(ctx context.Context, api grantorpb.GrantorClient) (*grantorpb.AcquireResponse, error) {
		return call(ctx, api, 0)
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-abandon:
			cancel()
		case <-actx.Done():
		}
	}()
	resp, err := retry(actx, g, callOpts{attempt: wait + attemptTimeout, leader: true, patience: waitUntil}, func(ctx context.Context, api grantorpb.GrantorClient) (*grantorpb.AcquireResponse, error) {
		return call(ctx, api, clockwatch.Until(g.clock, waitUntil))
	})
	select {
	case <-abandon:
		if err != nil {
			sctx, scancel := context.WithTimeout(ctx, attemptTimeout)
			defer scancel()
			resp, err = retry(sctx, g, callOpts{attempt: attemptTimeout, leader: true}, noWait)
		}
	default:
	}
	if err == nil || !errors.Is(err, errGrantorUnavailable) {
		return resp, err
	}
	handedOn = true
	return nil, &unansweredError{err: err, settle: func(ctx context.Context) (*grantorpb.AcquireResponse, error) {
		defer done()
		// What is left of the horizon, on the daemon's clock: a suspend
		// since the first attempt counts.
		ctx, cancel := context.WithTimeout(ctx, clockwatch.Until(g.clock, horizon))
		defer cancel()
		return retry(ctx, g, callOpts{attempt: attemptTimeout, leader: true, patience: horizon}, noWait)
	}}
}

// idHorizon bounds how long after an acquire's first attempt any attempt
// of its request id is sent: the call's own (its wait, at most an hour,
// and the request timeout) and settling's after it. The grantor keeps the
// record of a quiet session that remembers a grant or a release for
// SessionIdleTimeout (an hour) plus the longest wait (an hour) after it
// last saw the session, which it cannot have seen before this first
// attempt was sent (grantor/expiry.go, outcomeKeep): every attempt finds
// the outcome its request id has, and none is judged afresh, which would
// answer one id twice (chaos seed 506290559812: a grant, then "held by"
// the next holder). A settle that reaches no grantor within it gives up.
const idHorizon = 90 * time.Minute

// unansweredError is an acquire that got no answer. Settle retries its
// request id, without wait, until the grantor answers it (the grantor
// answers every call of an id with the id's one outcome, so a late
// attempt grants nothing new after that) or idHorizon after the first
// attempt, and must be called once; until it returns, the id stays
// unacknowledged, so the grantor keeps its outcome.
type unansweredError struct {
	err    error
	settle func(context.Context) (*grantorpb.AcquireResponse, error)
}

func (e *unansweredError) Error() string { return e.err.Error() }
func (e *unansweredError) Unwrap() error { return e.err }

// endKind says how a grant the daemon releases at the grantor ended.
type endKind uint8

const (
	// endReleased: its owner released it; the name is free at once.
	endReleased endKind = iota
	// endOwnerEnded: its owner ended without releasing it; the grantor
	// keeps the name for the grant's lock-delay.
	endOwnerEnded
	// endLapsed: its holder's deadline passed (it was lost); as
	// endOwnerEnded, and watchers are told it expired.
	endLapsed
)

// release releases the grant token of name, which session s holds for
// owner, ended as how says.
func (g *grantorConn) release(ctx context.Context, s *gsession, name, owner string, token uint64, how endKind) (bool, error) {
	id, done := g.newID(s)
	defer done()
	req := &grantorpb.ReleaseRequest{Id: id, Lease: name, Owner: owner, Token: token,
		OwnerEnded: how != endReleased, Lapsed: how == endLapsed}
	resp, err := retry(ctx, g, callOpts{attempt: attemptTimeout, leader: true}, func(ctx context.Context, api grantorpb.GrantorClient) (*grantorpb.ReleaseResponse, error) {
		return api.Release(ctx, req)
	})
	if err != nil {
		return false, err
	}
	return resp.Released, nil
}

// members asks a grantor (any will do) for the cluster's members.
func (g *grantorConn) members(ctx context.Context) (*grantorpb.MembersResponse, error) {
	return retry(ctx, g, callOpts{attempt: attemptTimeout}, func(ctx context.Context, api grantorpb.GrantorClient) (*grantorpb.MembersResponse, error) {
		return api.Members(ctx, &grantorpb.MembersRequest{})
	})
}

func jitter(d time.Duration) time.Duration {
	var b [1]byte
	rand.Read(b[:])
	return d/2 + time.Duration(int64(d)*int64(b[0])/512)
}
