package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// Daemon is the sidecar. Create it with New and start it with Run.
type Daemon struct {
	cfg   Config
	clock clockwatch.Clock
	log   *slog.Logger
	g     *grantorConn

	watcher     *clockwatch.Watcher
	susp        *clockwatch.SuspendDetector
	suspendedAt atomic.Int64 // BOOTTIME of the last suspend noticed

	mu     sync.Mutex
	leases map[string]*lease
	// slots indexes the semaphore slots of leases by name (semaphore.go).
	slots map[string]map[*lease]struct{}
	// hw keeps the host's holder watch stream (holderwatch.go).
	hw       *holderWatch
	watchers map[*ipc.Conn]string // connection -> lease name filter ("" for all)

	kick chan struct{} // wakes the renew loop when the table changed

	// turns serialises the requests of one owner for one name;
	// unreleased holds the releases waiting for their turn (ends.go),
	// under mu.
	turns      turns
	unreleased map[turnKey][]queuedRelease
	// ends holds the grants of each session that its keepalives name
	// for the grantor to end (ends.go), under mu.
	ends map[*gsession]*sessionEnds
	// previous tells a previous process's grants by (orphans.go); nil
	// when nothing was restored. Set before anything is served.
	previous *previousOwners
	// uids counts each local user's leases (limits.go), under mu.
	uids map[int]*perUID
	// floor is the largest timing model assumed in the daemon's life.
	floor timingFloor
	// reach is the daemon's view of the way to the grantor leader.
	reach reach

	// detached numbers detached acquires: each is an owner of its own.
	detached atomic.Uint64
	// serving ends when Run's socket server is told to stop: connections
	// that close after that were closed by the daemon, not by their
	// owners, and their leases are left to lapse.
	serving context.Context

	metrics counters
	// gTiming is the grantors' stated timing model (grantortiming.go).
	gTiming grantorTiming

	// life ends when Run returns; background work (releases after an
	// owner ended or a lease was lost) runs under it and is waited for.
	life context.Context
	stop context.CancelFunc
	bg   sync.WaitGroup

	// ps keeps the state a restart resumes (persist.go); nil without a
	// state directory.
	ps *persister
}

// New checks cfg and prepares a Daemon; it does not contact the grantor yet.
func New(cfg Config) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwatch.System
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ipc.RaiseFileLimit(cfg.Logger)
	g, err := newGrantorConn(cfg.Grantors)
	if err != nil {
		return nil, err
	}
	g.clock, g.creds, g.dialer = cfg.Clock, cfg.Credentials, cfg.Dialer
	if g.creds == nil {
		g.creds = insecure.NewCredentials()
	}
	life, stop := context.WithCancel(context.Background())
	wcfg := cfg.Watch
	wcfg.Clock, wcfg.Rho = cfg.Clock, cfg.Timing.Rho
	d := &Daemon{
		watcher:  clockwatch.NewWatcher(wcfg),
		susp:     clockwatch.NewSuspendDetector(cfg.Clock),
		life:     life,
		stop:     stop,
		cfg:      cfg,
		clock:    cfg.Clock,
		log:      cfg.Logger,
		g:        g,
		leases:   map[string]*lease{},
		uids:     map[int]*perUID{},
		watchers: map[*ipc.Conn]string{},
		kick:     make(chan struct{}, 1),
		hw:       newHolderWatch(g, cfg.Clock, cfg.Logger),
	}
	d.floor.set(cfg.Timing)
	d.reach.firstOK = make(chan struct{})
	g.confirmAfter, g.onContact = cfg.LeaderConfirmTimeout, d.contact
	if cfg.StateDir != "" {
		if err := d.openState(); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Session returns the daemon's grantor session id.
func (d *Daemon) Session() string { return d.g.session }

// Run serves the socket ln and renews leases until ctx ends. It returns nil
// when ctx is canceled. Leases still held then are not released: their
// holders were told a deadline, and the grantor keeps them until it passes.
func (d *Daemon) Run(ctx context.Context, ln *net.UnixListener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer func() {
		d.stop()
		d.bg.Wait()
		d.g.close()
		d.unlockState()
	}()

	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(4)
	go func() {
		defer wg.Done()
		d.renewLoop(ctx)
	}()
	go func() {
		defer wg.Done()
		d.hw.run(ctx)
	}()
	go func() {
		defer wg.Done()
		d.probeLoop(ctx)
	}()
	go func() {
		defer wg.Done()
		d.runWatcher(ctx)
	}()
	if d.ps != nil {
		boot, err := readBootClock()
		if err != nil {
			return err
		}
		grace := d.resumeGraceTimer()
		wg.Add(2)
		go func() {
			defer wg.Done()
			d.persistLoop(ctx, boot)
		}()
		go func() {
			defer wg.Done()
			d.awaitResumes(ctx, grace)
		}()
	}
	if d.cfg.Gossip != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.followGossip(ctx, d.cfg.Gossip)
		}()
	}
	srv := &ipc.Server{Handler: d, Logger: d.log, MinTTL: d.cfg.MinTTL, MaxTTL: d.cfg.MaxTTL, Limits: d.cfg.Limits}
	d.serving = ctx
	err := srv.Serve(ctx, ln)
	cancel()
	d.mu.Lock()
	for _, l := range d.leases {
		l.stopWatch()
	}
	d.mu.Unlock()
	return err
}

// Handle implements ipc.Handler. No reply to a caller other than root or
// the daemon's own uid names a grantor session (hideSession): whoever
// knows a session id could act under it wherever the identity that owns
// it is not checked, and the ids are the daemon's business.
func (d *Daemon) Handle(ctx context.Context, c *ipc.Conn, req *ipc.Request) *ipc.Response {
	resp := d.handle(ctx, c, req)
	switch req.Op {
	case ipc.OpAcquire, ipc.OpElect, ipc.OpProclaim, ipc.OpRelease, ipc.OpResign:
		if resp.Error == nil {
			d.persisted(ctx) // persist.go: a restart keeps what was told
		}
	}
	if c.Cred.UID != 0 && c.Cred.UID != os.Geteuid() {
		resp = d.hideSession(resp)
	}
	return resp
}

// hideSession returns resp without the daemon's grantor session ids: no
// session in hello, and every session id in the texts that may carry a
// grantor's words (an error's message: a grantor's refusal may name the
// session it refused; status's last grantor error) replaced by a
// placeholder. Every session id of the daemon starts with g.session.
func (d *Daemon) hideSession(resp *ipc.Response) *ipc.Response {
	named := func(s string) bool { return strings.Contains(s, d.g.session) }
	if resp.Hello == nil && (resp.Error == nil || !named(resp.Error.Message)) && (resp.Grantor == nil || !named(resp.Grantor.Error)) {
		return resp
	}
	hide := func(s string) string { return strings.ReplaceAll(s, d.g.session, "(this sidecar's session)") }
	out := *resp
	if resp.Hello != nil {
		h := *resp.Hello
		h.Session = ""
		out.Hello = &h
	}
	if resp.Error != nil {
		e := *resp.Error
		e.Message = hide(e.Message)
		out.Error = &e
	}
	if resp.Grantor != nil {
		g := *resp.Grantor
		g.Error = hide(g.Error)
		out.Grantor = &g
	}
	return &out
}

// handle answers one request for Handle.
func (d *Daemon) handle(ctx context.Context, c *ipc.Conn, req *ipc.Request) *ipc.Response {
	if req.Lease != "" {
		if err := d.cfg.ACL.allow(c.Cred, req.Lease); err != nil {
			return &ipc.Response{Error: err}
		}
	}
	if resp, ok := d.handlePrims(ctx, c, req); ok {
		return resp // elect.go
	}
	switch req.Op {
	case ipc.OpHello:
		return &ipc.Response{Hello: &ipc.Hello{Server: "leaseside", Version: d.cfg.Version, Protocol: ipc.ProtocolVersion, Session: d.g.session,
			MinTTLMs: d.cfg.MinTTL.Milliseconds(), MaxTTLMs: d.cfg.MaxTTL.Milliseconds()}}
	case ipc.OpStatus:
		return d.status(c.Cred)
	case ipc.OpClock:
		return &ipc.Response{Clock: d.clockStatus(true)}
	case ipc.OpResetRho:
		if c.Cred.UID != 0 && c.Cred.UID != os.Getuid() {
			return &ipc.Response{Error: ipc.Errorf(ipc.CodePermissionDenied, "reset_rho is for root or the daemon's own uid (%d), not uid %d", os.Getuid(), c.Cred.UID)}
		}
		d.resetRho()
		return &ipc.Response{Clock: d.clockStatus(false)}
	case ipc.OpMembers:
		return d.members(ctx)
	case ipc.OpLeases:
		return d.clusterLeases(ctx, c, req) // clusterleases.go
	case ipc.OpAcquire:
		return grantResponse(d.acquire(ctx, c, req))
	case ipc.OpRelease:
		tok, err := d.release(ctx, c, req.Lease, req.Token, req.Reason)
		if err != nil {
			return &ipc.Response{Error: err}
		}
		return &ipc.Response{ReleasedToken: strconv.FormatUint(tok, 10)}
	case ipc.OpRenew:
		return grantResponse(d.renew(ctx, c, req.Lease, req.Token))
	case ipc.OpCheck:
		return grantResponse(d.check(c, req.Lease, req.Token))
	case ipc.OpWatch:
		d.watch(c, req.Lease)
		return &ipc.Response{}
	case ipc.OpResume:
		return grantResponse(d.resumeLease(c, req))
	}
	return &ipc.Response{Error: ipc.Errorf(ipc.CodeUnknownOp, "unknown op %q", req.Op)}
}

// members relays the members question to a grantor.
func (d *Daemon) members(ctx context.Context) *ipc.Response {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, err := d.g.members(ctx)
	if errors.Is(err, errNoGrantorKnown) {
		return &ipc.Response{Members: &[]ipc.Member{}} // none found yet
	}
	if err != nil {
		return &ipc.Response{Error: grantorError(err)}
	}
	ms := make([]ipc.Member, len(resp.Members))
	for i, m := range resp.Members {
		ms[i] = ipc.Member{Name: m.Name, Role: m.Role, NodeID: m.NodeId, RPCAddr: m.RpcAddr, RaftAddr: m.RaftAddr,
			GossipAddr: m.GossipAddr, GossipState: m.GossipState, Voter: m.Voter, RaftState: m.RaftState,
			LastContactMs: m.LastContactMs, Version: m.Version}
	}
	return &ipc.Response{Members: &ms, LeaderID: resp.LeaderId}
}

func grantResponse(g *ipc.Grant, err *ipc.Error) *ipc.Response {
	if err != nil {
		return &ipc.Response{Error: err}
	}
	return &ipc.Response{Grant: g}
}

// Closed implements ipc.Handler: leases bound to the connection are
// released (after their lock-delay), and its watch ends. When the daemon
// itself is stopping, nothing is released: the owners may still be
// running, and their leases lapse at the deadlines they were told.
func (d *Daemon) Closed(c *ipc.Conn) {
	d.hw.dropConn(c)
	d.mu.Lock()
	delete(d.watchers, c)
	if d.serving.Err() != nil {
		d.mu.Unlock()
		return
	}
	var gone []*lease
	for _, l := range d.leases {
		if l.conn == c {
			l.conn = nil // nobody left to tell
			if l.owner == ownerConnection {
				gone = append(gone, l)
			}
		}
	}
	d.mu.Unlock()
	for _, l := range gone {
		d.ownerEnded(l, ipc.ReasonOwnerDisconnected)
	}
}

func (d *Daemon) wake() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// grantorError turns a failed grantor call into the socket's error object,
// with a sentence a person understands rather than a gRPC status.
// nameNotAllowed returns the detail of a grantor's refusal by its name
// rules, nil for any other error.
func nameNotAllowed(err error) *grantorpb.NameNotAllowed {
	if status.Code(err) != codes.PermissionDenied {
		return nil
	}
	for _, d := range status.Convert(err).Details() {
		if nn, ok := d.(*grantorpb.NameNotAllowed); ok {
			return nn
		}
	}
	return nil
}

func grantorError(err error) *ipc.Error {
	switch {
	case status.Code(err) == codes.InvalidArgument:
		return ipc.Errorf(ipc.CodeBadRequest, "grantor refused the request: %s", status.Convert(err).Message())
	case nameNotAllowed(err) != nil:
		nn := nameNotAllowed(err)
		return ipc.Errorf(ipc.CodeNameNotAllowed, "the grantors' name rules do not let this sidecar (%s) %s %q: ask the grantors' operator for a rule",
			nn.Identity, nn.Access, nn.Lease)
	case status.Code(err) == codes.PermissionDenied:
		return ipc.Errorf(ipc.CodePermissionDenied, "grantor refused this sidecar: %s", status.Convert(err).Message())
	case status.Code(err) == codes.ResourceExhausted:
		return ipc.Errorf(ipc.CodeResourceExhausted, "grantor refused the request: %s", status.Convert(err).Message())
	case errors.Is(err, errNoGrantorKnown):
		return ipc.Errorf(ipc.CodeUnavailable, "no grantor is known: none configured, and none found by gossip yet")
	case status.Code(err) == codes.FailedPrecondition:
		return ipc.Errorf(ipc.CodeUnavailable, "the grantor cluster has no leader: an election is under way, or fewer than a majority of grantors are up")
	case status.Code(err) == codes.Unavailable:
		return ipc.Errorf(ipc.CodeUnavailable, "no grantor could be reached")
	case status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errSilent):
		return ipc.Errorf(ipc.CodeUnavailable, "the grantor cluster did not answer in time")
	case status.Code(err) == codes.Unimplemented:
		return ipc.Errorf(ipc.CodeNotSupported, "the grantor cluster does not support this yet (a grantor is older than this sidecar, or has only just joined and not yet registered what it applies): %s", status.Convert(err).Message())
	}
	return ipc.Errorf(ipc.CodeUnavailable, "the grantor cluster did not serve the request: %s", status.Convert(err).Message())
}
