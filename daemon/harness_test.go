package daemon

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// scriptedGrantor is a grantor peer whose behaviour each test scripts. It
// is served over real gRPC on loopback. It stands in for the real grantor
// here because these tests pin down the holder's side of the timing model:
// when the reply arrives on the fake clock, and whether it arrives at all.
type scriptedGrantor struct {
	grantorpb.UnimplementedGrantorServer
	clock *clockwatch.Fake

	mu    sync.Mutex
	token uint64
	// delay is how far the fake clock moves while a request is "on the
	// wire", before the grantor answers.
	delay time.Duration
	// acquireDelay moves the fake clock this much more while an acquire
	// is "on the wire" (a long wait in the queue).
	acquireDelay time.Duration
	// silent makes keepalives and the question who leads go unanswered
	// (acquires and releases are still answered).
	silent bool
	// follower makes the grantor say another one leads.
	follower bool
	// stall, when set, holds acquires of that lease name until it is
	// closed: a slow request path.
	stallName string
	stall     chan struct{}
	// releaseStall, when set, holds every release's answer until it is
	// closed.
	releaseStall chan struct{}
	// rate skews the grantor's clock against the fake one: it reads
	// start + (now-start)*(1+rate).
	rate float64
	// sessionReply, when set, rewrites the answer to a session of a
	// keepalive (by default: renewed, the digests agree).
	sessionReply func(*grantorpb.SessionRenewal, *grantorpb.SessionRenewed)
	// holdReply, when set, picks the keepalives whose replies never
	// come (the stream stays open, later requests are answered).
	holdReply func(*grantorpb.KeepAliveRequest) bool
	// keepalives receives every keepalive request as it arrives.
	keepalives chan *grantorpb.KeepAliveRequest
	// releases receives every release request.
	releases chan *grantorpb.ReleaseRequest
	// streamsEnded hears of every keepalive stream that ended, while it
	// has room (nil: nobody listens).
	streamsEnded chan struct{}
	// acquires receives acquire requests as they arrive (before any
	// stall), while it has room.
	acquires chan *grantorpb.AcquireRequest
	// membersAsked counts the calls of Members (the leader probe).
	membersAsked atomic.Int64
	// taken are sessions another identity owns: their acquires and
	// releases are refused PERMISSION_DENIED, and a keepalive answers
	// each refused, as a grantor does.
	taken map[string]bool
}

func (s *scriptedGrantor) Acquire(ctx context.Context, req *grantorpb.AcquireRequest) (*grantorpb.AcquireResponse, error) {
	select {
	case s.acquires <- req:
	default: // a test that does not look at them
	}
	s.mu.Lock()
	stallName, stall := s.stallName, s.stall
	s.mu.Unlock()
	if stall != nil && req.Lease == stallName {
		select {
		case <-stall:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken[req.GetId().GetSession()] {
		return nil, status.Errorf(codes.PermissionDenied, "grantor: permission denied: session %q belongs to another identity than %q", req.GetId().GetSession(), "web-1")
	}
	s.clock.Advance(s.delay + s.acquireDelay)
	s.token++
	return &grantorpb.AcquireResponse{Granted: true, Token: s.token, GrantorTimeNs: int64(s.clock.Now())}, nil
}

// Members answers who leads, as the daemon asks a grantor it waits on:
// this grantor, unless it is set to be a follower; a silent one does not
// answer.
func (s *scriptedGrantor) Members(ctx context.Context, req *grantorpb.MembersRequest) (*grantorpb.MembersResponse, error) {
	s.membersAsked.Add(1)
	s.mu.Lock()
	silent, follower := s.silent, s.follower
	s.mu.Unlock()
	if silent {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if follower {
		return &grantorpb.MembersResponse{LeaderId: "another", AnsweredBy: "scripted"}, nil
	}
	return &grantorpb.MembersResponse{LeaderId: "scripted", AnsweredBy: "scripted"}, nil
}

func (s *scriptedGrantor) Release(ctx context.Context, req *grantorpb.ReleaseRequest) (*grantorpb.ReleaseResponse, error) {
	s.releases <- req
	s.mu.Lock()
	stall, taken := s.releaseStall, s.taken[req.GetId().GetSession()]
	s.mu.Unlock()
	if taken {
		return nil, status.Errorf(codes.PermissionDenied, "grantor: permission denied: session %q belongs to another identity than %q", req.GetId().GetSession(), "web-1")
	}
	if stall != nil {
		select {
		case <-stall:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &grantorpb.ReleaseResponse{Released: true}, nil
}

func (s *scriptedGrantor) KeepAlive(stream grantorpb.Grantor_KeepAliveServer) error {
	defer func() {
		s.mu.Lock()
		ended := s.streamsEnded
		s.mu.Unlock()
		select {
		case ended <- struct{}{}:
		default:
		}
	}()
	for {
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		s.keepalives <- req
		s.mu.Lock()
		silent, delay, hold := s.silent, s.delay, s.holdReply
		s.mu.Unlock()
		if silent || (hold != nil && hold(req)) {
			continue
		}
		s.clock.Advance(delay)
		resp := &grantorpb.KeepAliveResponse{Batch: req.Batch, Renewed: req.Leases, GrantorTimeNs: s.remoteNow()}
		for _, ss := range req.Sessions {
			r := &grantorpb.SessionRenewed{Session: ss.Session, Renewed: true, TtlNs: ss.TtlNs, LeaseSetVersion: ss.LeaseSetVersion}
			s.mu.Lock()
			answer, taken := s.sessionReply, s.taken[ss.Session]
			s.mu.Unlock()
			if answer != nil {
				answer(ss, r)
			}
			if taken {
				r = &grantorpb.SessionRenewed{Session: ss.Session, Refused: true}
			}
			resp.Sessions = append(resp.Sessions, r)
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// remoteNow is the grantor's own clock.
func (s *scriptedGrantor) remoteNow() int64 {
	s.mu.Lock()
	rate := s.rate
	s.mu.Unlock()
	el := float64(s.clock.Now() - start)
	return int64(start) + int64(el*(1+rate))
}

func (s *scriptedGrantor) set(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// rig is a Daemon on a fake clock, a scripted grantor and a client.
type rig struct {
	clock  *clockwatch.Fake
	g      *scriptedGrantor
	d      *Daemon
	c      *ipc.Client
	events chan *ipc.Event
	timing clockwatch.Timing
	// backlog holds events that arrived while a test waited for another
	// kind, in order.
	backlog []*ipc.Event
}

// start is where the fake clock begins: the real CLOCK_BOOTTIME, so that
// the clients' own deadline watchdogs (which read the real clock) agree
// with the fake one until a test moves it.
var start = clockwatch.System.Now()

func newRig(t *testing.T) *rig {
	t.Helper()
	return newRigWith(t, func(*Config) {})
}

// newRigWith lets a test adjust the daemon's Config.
func newRigWith(t *testing.T, adjust func(*Config)) *rig {
	t.Helper()
	clock := clockwatch.NewFake(start)
	g := &scriptedGrantor{clock: clock, keepalives: make(chan *grantorpb.KeepAliveRequest, 64), releases: make(chan *grantorpb.ReleaseRequest, 64),
		acquires: make(chan *grantorpb.AcquireRequest, 64)}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	grantorpb.RegisterGrantorServer(srv, g)
	go srv.Serve(gl)
	t.Cleanup(srv.Stop)

	cfg := DefaultConfig()
	cfg.Grantors = []string{gl.Addr().String()}
	cfg.Clock = clock
	cfg.Watch.Kernel = func() (clockwatch.KernelClockState, error) { return clockwatch.KernelClockState{Synced: true}, nil }
	adjust(&cfg)
	d, sock := startDaemon(t, cfg)
	c := &ipc.Client{Socket: sock}
	events := make(chan *ipc.Event, 1024)
	c.Notify(events)
	t.Cleanup(func() { c.Close() })
	if err := c.Watch(ctxT(t), ""); err != nil { // clock events reach watchers
		t.Fatal(err)
	}
	return &rig{clock: clock, g: g, d: d, c: c, events: events, timing: cfg.Timing}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitEvent returns the next event of the given kind; events of other
// kinds stay for later waits.
func (r *rig) waitEvent(t *testing.T, kind string) *ipc.Event {
	t.Helper()
	for i, ev := range r.backlog {
		if ev.Event == kind {
			r.backlog = append(r.backlog[:i], r.backlog[i+1:]...)
			return ev
		}
	}
	ctx := ctxT(t)
	for {
		select {
		case ev := <-r.events:
			if ev.Event == kind {
				return ev
			}
			r.backlog = append(r.backlog, ev)
		case <-ctx.Done():
			t.Fatalf("no %s event", kind)
		}
	}
}

// waitLeaseEvent returns the next event of the given kind about the named
// lease, dropping those about others.
func (r *rig) waitLeaseEvent(t *testing.T, kind, lease string) *ipc.Event {
	t.Helper()
	for {
		if ev := r.waitEvent(t, kind); ev.Lease == lease {
			return ev
		}
	}
}

// client returns a second client of the rig's daemon, with its events.
func (r *rig) client(t *testing.T) (*ipc.Client, chan *ipc.Event) {
	c := &ipc.Client{Socket: r.c.Socket}
	events := make(chan *ipc.Event, 1024)
	c.Notify(events)
	t.Cleanup(func() { c.Close() })
	return c, events
}

func (r *rig) waitRelease(t *testing.T) *grantorpb.ReleaseRequest {
	t.Helper()
	select {
	case rel := <-r.g.releases:
		return rel
	case <-ctxT(t).Done():
		t.Fatal("no release sent to the grantor")
	}
	return nil
}

func (r *rig) waitKeepAlive(t *testing.T) *grantorpb.KeepAliveRequest {
	t.Helper()
	select {
	case ka := <-r.g.keepalives:
		return ka
	case <-ctxT(t).Done():
		t.Fatal("no keepalive sent")
	}
	return nil
}
