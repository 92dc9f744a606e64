package daemon

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// serveScripted serves g over real gRPC on loopback and returns its address.
func serveScripted(t *testing.T, g *scriptedGrantor) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	grantorpb.RegisterGrantorServer(srv, g)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// A grantor that goes silent (no reply and no error: partitioned or
// powered off) is given up on after one unanswered keepalive, and the
// lease is renewed through another grantor before its deadline.
func TestSilentGrantorIsLeftForAnother(t *testing.T) {
	var silent *scriptedGrantor
	r := newRigWith(t, func(c *Config) {
		silent = &scriptedGrantor{clock: c.Clock.(*clockwatch.Fake), silent: true, streamsEnded: make(chan struct{}, 1),
			keepalives: make(chan *grantorpb.KeepAliveRequest, 64), releases: make(chan *grantorpb.ReleaseRequest, 64)}
		c.Grantors = append([]string{serveScripted(t, silent)}, c.Grantors...)
	})
	t0 := r.clock.Now()
	l, err := r.c.Acquire(ctxT(t), "jobs/a", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(ttl / 3)
	select {
	case <-silent.keepalives: // the first keepalive goes to the silent one
	case <-ctxT(t).Done():
		t.Fatal("no keepalive to the first grantor")
	}
	r.clock.Advance(r.d.cfg.RenewTimeout) // unanswered: give up on it
	// The daemon drops the stream to the silent grantor once it has
	// counted the failure and set its retry backoff (from the clock as it
	// is now); the first backoff is at most 100ms.
	select {
	case <-silent.streamsEnded:
	case <-ctxT(t).Done():
		t.Fatal("the daemon never gave up on the silent grantor")
	}
	r.clock.Advance(100 * time.Millisecond)
	ka := r.waitKeepAlive(t)
	if len(ka.Sessions) != 1 || ka.Sessions[0].LeaseSetVersion != grantorpb.TokenDigest(1) {
		t.Fatalf("keepalive to the second grantor: %v, want the session holding token 1", ka.Sessions)
	}
	if !r.clock.Now().Before(r.timing.HolderDeadline(t0, ttl)) {
		t.Fatal("the deadline came before the daemon left the silent grantor")
	}
	ev := r.waitEvent(t, ipc.EventRenewed)
	if ev.Token != l.Token || ev.DeadlineBoottimeNs <= int64(r.timing.HolderDeadline(t0, ttl)) {
		t.Fatalf("renewed %+v", ev)
	}
}

// Issue 9, liveness: wait_ms is kept. An acquire waiting at a grantor that
// no longer leads (here it says so when asked; a cut-off one does not
// answer at all) is abandoned for another grantor after about a second,
// the confirm timeout, instead of after the whole attempt (its wait plus
// 3 s), and is granted there long before its wait of a minute is over.
func TestWaitingAcquireLeavesGrantorThatNoLongerLeads(t *testing.T) {
	var old *scriptedGrantor
	r := newRigWith(t, func(c *Config) {
		old = &scriptedGrantor{clock: c.Clock.(*clockwatch.Fake), follower: true, stallName: "jobs/w", stall: make(chan struct{}),
			keepalives: make(chan *grantorpb.KeepAliveRequest, 64), releases: make(chan *grantorpb.ReleaseRequest, 64),
			acquires: make(chan *grantorpb.AcquireRequest, 64)}
		c.Grantors = append([]string{serveScripted(t, old)}, c.Grantors...)
	})
	defer close(old.stall)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // far below the wait plus 3 s
	defer cancel()
	res := acquireAsync(ctx, r.c, "jobs/w", ipc.AcquireOptions{TTL: ttl, Wait: time.Minute})
	select {
	case <-old.acquires: // it went to the old leader first
	case <-ctx.Done():
		t.Fatal("the acquire never reached the first grantor")
	}
	r.clock.Advance(2 * time.Second) // part of the wait passes there
	a := <-res
	if a.err != nil {
		t.Fatalf("acquire: %v; want it granted by the grantor that leads", a.err)
	}
	if req := r.waitAcquireRPC(t); req.Lease != "jobs/w" || req.WaitNs > int64(time.Minute-2*time.Second) || req.WaitNs <= 0 {
		t.Fatalf("the retry at the leader: %v; want jobs/w with what was left of the wait", req)
	}
}
