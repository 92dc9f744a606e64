package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor"
	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// startGrantor runs a real one-node grantor in process, on clock, and
// returns its gRPC address. These tests pin down how the sidecar takes in
// what the real grantor decides.
func startGrantor(t *testing.T, clock clockwatch.Clock, timing clockwatch.Timing) string {
	t.Helper()
	return startGrantorWith(t, clock, timing, func(*grantor.Config) {})
}

// startGrantorWith is startGrantor with the Config adjusted.
func startGrantorWith(t *testing.T, clock clockwatch.Clock, timing clockwatch.Timing, adjust func(*grantor.Config)) string {
	t.Helper()
	cfg := grantor.DefaultConfig()
	cfg.NodeID = "g1"
	cfg.DataDir = t.TempDir()
	cfg.Bootstrap = true
	cfg.Clock = clock
	cfg.Timing = timing
	cfg.HeartbeatTimeout = 50 * time.Millisecond
	cfg.ElectionTimeout = 50 * time.Millisecond
	cfg.LeaderLeaseTimeout = 50 * time.Millisecond
	cfg.CommitTimeout = 5 * time.Millisecond
	adjust(&cfg)
	n, err := grantor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("grantor Run: %v", err)
		}
	})
	if err := n.WaitReady(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return n.RPCAddr()
}

// newGrantDaemon is a Daemon that is not Run: tests drive its grantor
// session and its grant path by hand.
func newGrantDaemon(t *testing.T, clock clockwatch.Clock, grantorAddr string, timing clockwatch.Timing) *Daemon {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Grantors = []string{grantorAddr}
	cfg.Clock = clock
	cfg.Timing = timing
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.stop()
		d.bg.Wait()
		d.g.close()
	})
	return d
}

func newTestLease(d *Daemon, name, ownerID string, ttl time.Duration) *lease {
	return &lease{name: name, ttl: ttl, sess: d.g.sessionFor(ttl), owner: ownerConnection, ownerID: ownerID,
		renewed: make(chan struct{}), stopWatch: func() {}}
}

// storedTerm asks the grantor, with a keepalive of the daemon's session,
// which term it applies to token's grant of name (0: not held so).
func storedTerm(t *testing.T, d *Daemon, name string, token uint64) time.Duration {
	t.Helper()
	api, _, err := d.g.client()
	if err != nil {
		t.Fatal(err)
	}
	ka, err := api.KeepAlive(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ka.CloseSend()
	d.mu.Lock()
	sess := d.leases[name].sess
	d.mu.Unlock()
	// An older sidecar's keepalive, which the grantor answers per lease.
	if err := ka.Send(&grantorpb.KeepAliveRequest{Session: sess.id, Batch: 1, Leases: []*grantorpb.LeaseRef{{Lease: name, Token: token}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := ka.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Renewed) != 1 {
		return 0
	}
	return time.Duration(resp.Renewed[0].TtlNs)
}

// Issue 9 item 1: two acquires of one name by one owner, both answered by
// the grantor, their replies taken in either order. The sidecar must end
// up computing with the grant the grantor holds and with the term the
// grantor stored for it, never a longer one. (Before decision 1 the
// grantor kept one token and the last term applied, and the sidecar the
// term of the reply it stored first: 12s against 1s.) Leases of another
// term ride on another grantor session, so the second of two terms is
// refused while the first holds the name; two of one term are two grants.
func TestConcurrentAcquiresComputeWithTheGrantorsTerm(t *testing.T) {
	timing := clockwatch.DefaultTiming()
	for _, tt := range []struct {
		name       string
		terms      []time.Duration // in the order the grantor applies them
		replyOrder []int
	}{
		{name: "long then short, replies in apply order", terms: []time.Duration{12 * time.Second, time.Second}, replyOrder: []int{0, 1}},
		{name: "long then short, replies reversed", terms: []time.Duration{12 * time.Second, time.Second}, replyOrder: []int{1, 0}},
		{name: "short then long, replies in apply order", terms: []time.Duration{time.Second, 12 * time.Second}, replyOrder: []int{0, 1}},
		{name: "short then long, replies reversed", terms: []time.Duration{time.Second, 12 * time.Second}, replyOrder: []int{1, 0}},
		{name: "one term twice, replies in apply order", terms: []time.Duration{12 * time.Second, 12 * time.Second}, replyOrder: []int{0, 1}},
		{name: "one term twice, replies reversed", terms: []time.Duration{12 * time.Second, 12 * time.Second}, replyOrder: []int{1, 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := clockwatch.NewFake(start)
			d := newGrantDaemon(t, clock, startGrantor(t, clock, timing), timing)
			t0 := clock.Now()
			var resps []*grantorpb.AcquireResponse
			for _, ttl := range tt.terms {
				resp, err := d.g.acquire(ctxT(t), d.g.sessionFor(ttl), acquireAsk{name: "x", owner: "conn:1", limit: 1}, 0, &d.metrics.acquireRPCs, nil)
				if err != nil {
					t.Fatalf("acquire ttl %v: %v", ttl, err)
				}
				resps = append(resps, resp)
			}
			if !resps[0].Granted {
				t.Fatalf("first acquire refused: %v", resps[0])
			}
			for _, i := range tt.replyOrder {
				if !resps[i].Granted {
					continue // answered lease_held
				}
				if _, ierr := d.granted(ctxT(t), newTestLease(d, "x", "conn:1", tt.terms[i]), resps[i], t0); ierr != nil {
					t.Fatalf("reply %d: %v", i, ierr)
				}
			}
			d.mu.Lock()
			l := d.leases["x"]
			d.mu.Unlock()
			if l == nil {
				t.Fatal("no lease listed")
			}
			stored := storedTerm(t, d, "x", l.token)
			if stored == 0 {
				t.Fatalf("the sidecar lists token %d, which the grantor does not hold", l.token)
			}
			if l.ttl > stored {
				t.Fatalf("the sidecar computes with %v, the grantor stored %v for token %d", l.ttl, stored, l.token)
			}
			if want := timing.HolderDeadline(t0, stored); l.deadline.After(want) {
				t.Fatalf("deadline %v is past t0 + d(1-rho) - eps = %v with the grantor's term", l.deadline, want)
			}
		})
	}
}

// TEAM.md decision 2: the sidecar computes with the larger of its own and
// the grantor's rho and epsilon, and says so in a metric.
func TestGrantorTimingRaisesTheSidecars(t *testing.T) {
	clock := clockwatch.NewFake(start)
	gTiming := clockwatch.Timing{Rho: 0.01, Epsilon: 500 * time.Millisecond}
	own := clockwatch.DefaultTiming()
	if own.Rho >= gTiming.Rho || own.Epsilon >= gTiming.Epsilon {
		t.Fatalf("test needs a grantor timing above the default %+v", own)
	}
	d := newGrantDaemon(t, clock, startGrantor(t, clock, gTiming), own)
	if d.timingMismatch() {
		t.Fatal("mismatch before any reply")
	}
	t0 := clock.Now()
	resp, err := d.g.acquire(ctxT(t), d.g.sessionFor(10*time.Second), acquireAsk{name: "x", owner: "conn:1", limit: 1}, 0, &d.metrics.acquireRPCs, nil)
	if err != nil || !resp.Granted {
		t.Fatalf("acquire: %v %v", resp, err)
	}
	g, ierr := d.granted(ctxT(t), newTestLease(d, "x", "conn:1", 10*time.Second), resp, t0)
	if ierr != nil {
		t.Fatal(ierr)
	}
	want := gTiming.HolderDeadline(t0, 10*time.Second)
	if g.DeadlineBoottimeNs != want.Nanoseconds() {
		t.Fatalf("deadline %d, want %d computed with the grantor's rho and epsilon", g.DeadlineBoottimeNs, want.Nanoseconds())
	}
	if !d.timingMismatch() {
		t.Fatal("no mismatch reported")
	}
	if got := d.timing(); got.Rho < gTiming.Rho || got.Epsilon < gTiming.Epsilon {
		t.Fatalf("timing %+v after the reply, want at least %+v", got, gTiming)
	}
}
