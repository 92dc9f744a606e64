package daemon

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"sync"

	"google.golang.org/grpc/codes"
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

	mu     sync.Mutex
	leases map[string]*lease

	kick chan struct{} // wakes the renew loop when the table changed
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
	g, err := dialGrantor(cfg.Grantor)
	if err != nil {
		return nil, err
	}
	return &Daemon{
		cfg:    cfg,
		clock:  cfg.Clock,
		log:    cfg.Logger,
		g:      g,
		leases: map[string]*lease{},
		kick:   make(chan struct{}, 1),
	}, nil
}

// Session returns the daemon's grantor session id.
func (d *Daemon) Session() string { return d.g.session }

// Run serves the socket ln and renews leases until ctx ends. It returns nil
// when ctx is canceled. Leases still held then are not released: their
// holders were told a deadline, and the grantor keeps them until it passes.
func (d *Daemon) Run(ctx context.Context, ln *net.UnixListener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer d.g.close()

	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.renewLoop(ctx)
	}()
	srv := &ipc.Server{Handler: d, Logger: d.log}
	err := srv.Serve(ctx, ln)
	cancel()
	d.mu.Lock()
	for _, l := range d.leases {
		if l.stopWatch != nil {
			l.stopWatch()
		}
	}
	d.mu.Unlock()
	return err
}

// Handle implements ipc.Handler.
func (d *Daemon) Handle(ctx context.Context, c *ipc.Conn, req *ipc.Request) *ipc.Response {
	switch req.Op {
	case ipc.OpHello:
		return &ipc.Response{Hello: &ipc.Hello{Server: "leaseside", Version: d.cfg.Version, Protocol: ipc.ProtocolVersion, Session: d.g.session}}
	case ipc.OpStatus:
		return d.status()
	case ipc.OpAcquire:
		g, err := d.acquire(ctx, c, req)
		if err != nil {
			return &ipc.Response{Error: err}
		}
		return &ipc.Response{Grant: g}
	case ipc.OpRelease:
		if err := d.release(ctx, c, req.Lease); err != nil {
			return &ipc.Response{Error: err}
		}
		return &ipc.Response{}
	}
	return &ipc.Response{Error: ipc.Errorf(ipc.CodeUnknownOp, "unknown op %q", req.Op)}
}

// Closed implements ipc.Handler: leases bound to the connection are released.
func (d *Daemon) Closed(c *ipc.Conn) {
	d.mu.Lock()
	var gone []*lease
	for _, l := range d.leases {
		if l.conn == c {
			l.conn = nil // its owner is gone; nobody to tell
			if l.owner == ipc.OwnerConnection {
				gone = append(gone, l)
			}
		}
	}
	d.mu.Unlock()
	for _, l := range gone {
		d.releaseLease(l, "owner connection closed")
	}
}

// status lists the held leases. It checks deadlines itself rather than
// trust the renew loop to have run: no reply ever shows a lease past its
// deadline.
func (d *Daemon) status() *ipc.Response {
	now := d.clock.Now()
	d.mu.Lock()
	grants := make([]ipc.Grant, 0, len(d.leases))
	for _, l := range d.leases {
		if !now.Before(l.deadline) {
			d.loseLocked(l, ipc.ReasonDeadlinePassed)
			continue
		}
		grants = append(grants, *l.grant(now))
	}
	d.mu.Unlock()
	return &ipc.Response{Leases: &grants}
}

func (d *Daemon) ownerID(c *ipc.Conn, req *ipc.Request) string {
	switch req.Owner {
	case ipc.OwnerPID:
		return "pid:" + strconv.Itoa(req.OwnerPID)
	case ipc.OwnerDetached:
		return "detached"
	}
	return "conn:" + strconv.FormatUint(c.ID, 10)
}

func (d *Daemon) acquire(ctx context.Context, c *ipc.Conn, req *ipc.Request) (*ipc.Grant, *ipc.Error) {
	ttl := req.TTL()
	if ttl < d.cfg.MinTTL || ttl > d.cfg.MaxTTL {
		return nil, ipc.Errorf(ipc.CodeInvalidTTL, "ttl_ms must be between %d and %d", d.cfg.MinTTL.Milliseconds(), d.cfg.MaxTTL.Milliseconds())
	}
	owner := req.Owner
	if owner == "" {
		owner = ipc.OwnerConnection
	}
	ownerID := d.ownerID(c, req)

	d.mu.Lock()
	if l := d.leases[req.Lease]; l != nil && l.ownerID == ownerID {
		g := l.grant(d.clock.Now())
		d.mu.Unlock()
		return g, nil // already held by this owner: acquiring again is a no-op
	}
	d.mu.Unlock()

	var stopWatch func()
	l := &lease{name: req.Lease, ttl: ttl, owner: owner, ownerID: ownerID, ownerPID: req.OwnerPID, conn: c, renewed: make(chan struct{})}
	if owner == ipc.OwnerPID {
		stop, err := watchPID(req.OwnerPID, func() { d.releaseLease(l, "owner process exited") })
		if err != nil {
			return nil, ipc.Errorf(ipc.CodeBadRequest, "owner_pid: %v", err)
		}
		stopWatch = stop
	}
	fail := func(e *ipc.Error) (*ipc.Grant, *ipc.Error) {
		if stopWatch != nil {
			stopWatch()
		}
		return nil, e
	}

	rctx, cancel := context.WithTimeout(ctx, req.Wait()+d.cfg.RequestTimeout)
	defer cancel()
	t0 := d.clock.Now() // rule 1: read before the request is sent
	resp, err := d.g.acquire(rctx, req.Lease, ownerID, ttl, req.Wait())
	if err != nil {
		return fail(grantorError(err))
	}
	if !resp.Granted {
		e := ipc.Errorf(ipc.CodeLeaseHeld, "lease %q is held by another owner with token %d", req.Lease, resp.Token)
		e.HolderToken = strconv.FormatUint(resp.Token, 10)
		return fail(e)
	}

	l.token = resp.Token
	l.stopWatch = stopWatch
	l.deadline = d.cfg.Timing.HolderDeadline(t0, ttl) // rule 3
	l.renewAt = t0.Add(renewInterval(ttl))
	d.mu.Lock()
	if old := d.leases[req.Lease]; old != nil && old.token != l.token {
		// The grantor gave us a new grant while we still had the old
		// one listed: the old one is over.
		d.loseLocked(old, ipc.ReasonRevoked)
	}
	d.leases[req.Lease] = l
	d.mu.Unlock()
	d.wake()

	// A grant that came after waiting in the queue was made at an unknown
	// point after t0: its deadline may be short or gone. Renew it once now
	// so the owner starts with a full term.
	if req.Wait() > 0 && clockwatch.Until(d.clock, l.deadline) < 2*ttl/3 {
		if err := d.renewNow(ctx, l); err != nil {
			return nil, err
		}
	}
	now := d.clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.leases[req.Lease] == l && !now.Before(l.deadline) {
		d.loseLocked(l, ipc.ReasonDeadlinePassed)
	}
	if d.leases[req.Lease] != l {
		return nil, ipc.Errorf(ipc.CodeLost, "lease %q was lost before the reply could be sent", req.Lease)
	}
	return l.grant(now), nil
}

// renewNow asks the renew loop for an immediate renewal of l and waits
// for its outcome.
func (d *Daemon) renewNow(ctx context.Context, l *lease) *ipc.Error {
	d.mu.Lock()
	l.renewAt = 0
	done := l.renewed
	d.mu.Unlock()
	d.wake()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ipc.Errorf(ipc.CodeUnavailable, "renewing %q after the wait: %v", l.name, ctx.Err())
	}
}

func (d *Daemon) release(ctx context.Context, c *ipc.Conn, name string) *ipc.Error {
	d.mu.Lock()
	l := d.leases[name]
	d.mu.Unlock()
	if l == nil {
		return ipc.Errorf(ipc.CodeNotHeld, "this host does not hold %q", name)
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	if !d.forget(l) {
		return ipc.Errorf(ipc.CodeNotHeld, "this host does not hold %q", name)
	}
	if l.conn != nil && l.conn != c {
		l.conn.Send(&ipc.Event{Event: ipc.EventReleased, Lease: l.name, Token: strconv.FormatUint(l.token, 10)})
	}
	if _, err := d.g.release(rctx, l.name, l.ownerID, l.token); err != nil {
		// The lease is already out of our table, so nobody here acts on
		// it; the grantor frees it when its term runs out.
		return grantorError(err)
	}
	return nil
}

// releaseLease ends l because its owner is gone, and tells the grantor.
func (d *Daemon) releaseLease(l *lease, why string) {
	if !d.forget(l) {
		return
	}
	d.log.Info("releasing lease", "lease", l.name, "token", l.token, "why", why)
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.RequestTimeout)
	defer cancel()
	if _, err := d.g.release(ctx, l.name, l.ownerID, l.token); err != nil {
		d.log.Warn("release failed; the grantor frees the lease when its term ends", "lease", l.name, "err", err)
	}
}

// forget takes l out of the table; it reports false if l was no longer there.
func (d *Daemon) forget(l *lease) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.leases[l.name] != l {
		return false
	}
	delete(d.leases, l.name)
	if l.stopWatch != nil {
		l.stopWatch()
	}
	return true
}

// loseLocked ends l at once and tells its owner (rule 5). The caller holds d.mu.
func (d *Daemon) loseLocked(l *lease, reason string) {
	if d.leases[l.name] == l {
		delete(d.leases, l.name)
	}
	if l.stopWatch != nil {
		l.stopWatch()
	}
	d.log.Warn("lease lost", "lease", l.name, "token", l.token, "reason", reason)
	if l.conn != nil {
		l.conn.Send(&ipc.Event{Event: ipc.EventLost, Lease: l.name, Token: strconv.FormatUint(l.token, 10), Reason: reason})
	}
	close(l.renewed)
	l.renewed = make(chan struct{})
}

func (d *Daemon) wake() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// grantorError turns a failed grantor call into the socket's error object.
func grantorError(err error) *ipc.Error {
	if status.Code(err) == codes.InvalidArgument {
		return ipc.Errorf(ipc.CodeBadRequest, "grantor refused the request: %s", status.Convert(err).Message())
	}
	return ipc.Errorf(ipc.CodeUnavailable, "grantor cluster: %v", err)
}

// keepAliveRefs lists the leases of a batch for the wire.
func keepAliveRefs(ls []*lease) []*grantorpb.LeaseRef {
	refs := make([]*grantorpb.LeaseRef, len(ls))
	for i, l := range ls {
		refs[i] = &grantorpb.LeaseRef{Lease: l.name, Token: l.token}
	}
	return refs
}
