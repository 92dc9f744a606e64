package daemon

import (
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
		silent = &scriptedGrantor{clock: c.Clock.(*clockwatch.Fake), silent: true,
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
	// Step the clock through the retry backoff, giving the daemon a moment
	// to act at each step.
	for {
		r.clock.Advance(20 * time.Millisecond)
		select {
		case ka := <-r.g.keepalives:
			if len(ka.Leases) != 1 || ka.Leases[0].Token != 1 {
				t.Fatalf("keepalive to the second grantor: %v", ka.Leases)
			}
			ev := r.waitEvent(t, ipc.EventRenewed)
			if ev.Token != l.Token || ev.DeadlineBoottimeNs <= int64(r.timing.HolderDeadline(t0, ttl)) {
				t.Fatalf("renewed %+v", ev)
			}
			return
		case <-time.After(200 * time.Millisecond):
			if !r.clock.Now().Before(r.timing.HolderDeadline(t0, ttl)) {
				t.Fatal("the deadline came before the daemon left the silent grantor")
			}
		}
	}
}
