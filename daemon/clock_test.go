package daemon

import (
	"math"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// A suspend longer than the validity left ends the lease with reason
// suspended, at the first chance after the resume (the watcher's first
// tick), before any renewal is attempted. (A fake clock stands in for a
// real suspend, which a test cannot cause.)
func TestSuspendPastDeadlineLosesLease(t *testing.T) {
	r := newRig(t)
	if _, err := r.c.Acquire(ctxT(t), "jobs/a", ipc.AcquireOptions{TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	r.clock.Suspend(ttl) // BOOTTIME jumps past the deadline; no timer fires
	r.clock.Advance(clockwatch.DefaultInterval)
	ev := r.waitEvent(t, ipc.EventLost)
	if ev.Reason != ipc.ReasonSuspended {
		t.Fatalf("lost reason %q, want %q", ev.Reason, ipc.ReasonSuspended)
	}
	if se := r.waitEvent(t, ipc.EventSuspend); se.LengthMs != ttl.Milliseconds() {
		t.Errorf("suspend event length %dms, want %d", se.LengthMs, ttl.Milliseconds())
	}
	select {
	case ka := <-r.g.keepalives:
		t.Fatalf("renewal attempted for a lease the suspend had ended: %v", ka)
	default:
	}
}

// A request answered right after a resume, before the watcher ticks,
// already knows: the lease is gone, with reason suspended.
func TestRequestAfterSuspendSeesIt(t *testing.T) {
	r := newRig(t)
	if _, err := r.c.Acquire(ctxT(t), "jobs/a", ipc.AcquireOptions{TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	r.clock.Suspend(2 * ttl)
	if _, err := r.c.Check(ctxT(t), "jobs/a", ""); err == nil {
		t.Fatal("check after a suspend past the deadline says the lease is held")
	}
	if ev := r.waitEvent(t, ipc.EventLost); ev.Reason != ipc.ReasonSuspended {
		t.Fatalf("lost reason %q, want suspended", ev.Reason)
	}
}

// A suspend shorter than the validity left leaves the lease valid, with
// its original deadline (BOOTTIME already counted the suspended time).
func TestShortSuspendKeepsDeadline(t *testing.T) {
	r := newRig(t)
	r.g.set(func() { r.g.silent = true }) // no renewal moves the deadline
	l, err := r.c.Acquire(ctxT(t), "jobs/a", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	r.clock.Suspend(ttl / 10)
	r.clock.Advance(clockwatch.DefaultInterval)
	r.waitEvent(t, ipc.EventSuspend)
	g, err := r.c.Check(ctxT(t), "jobs/a", l.Token)
	if err != nil {
		t.Fatalf("a short suspend ended the lease: %v", err)
	}
	if g.DeadlineBoottimeNs != l.DeadlineBoottimeNs {
		t.Fatalf("deadline moved from %d to %d", l.DeadlineBoottimeNs, g.DeadlineBoottimeNs)
	}
}

// After a stall (the fake clock jumps with every timer late), no answer
// shows a lease whose deadline passed during it.
func TestNoAnswerAfterStallCarriesPassedDeadline(t *testing.T) {
	r := newRig(t)
	r.g.set(func() { r.g.silent = true })
	if _, err := r.c.Acquire(ctxT(t), "jobs/a", ipc.AcquireOptions{TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(2 * ttl)
	leases, err := r.c.Status(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	now := int64(r.clock.Now())
	for _, g := range leases {
		if g.DeadlineBoottimeNs <= now || g.ValidMs <= 0 {
			t.Fatalf("status after the stall lists %+v, past its deadline", g)
		}
	}
	r.waitEvent(t, ipc.EventPause)
}

// A drift rate observed against the grantor beyond rho raises rho: new
// deadlines are computed with the observed rate plus margin, shorter by
// d*(observed+margin-rho), and a drift event says so.
func TestObservedDriftShortensDeadlines(t *testing.T) {
	const rate = -3000e-6 // the grantor's clock runs 3000 ppm slow: ours is fast
	r := newRigWith(t, func(c *Config) {
		c.Watch.Drift = clockwatch.DriftConfig{Bucket: time.Second, MinSamples: 5, MinSpan: 20 * time.Second}
	})
	r.g.set(func() { r.g.rate = rate })
	if _, err := r.c.Acquire(ctxT(t), "jobs/keep", ipc.AcquireOptions{TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	// Renewals feed the estimator: one keepalive every d/3.
	for i := 0; i < 12; i++ {
		r.clock.Advance(ttl / 3)
		r.waitKeepAlive(t)
		r.waitEvent(t, ipc.EventRenewed)
	}
	drift := r.waitEvent(t, ipc.EventDrift)
	if math.Abs(drift.RatePPM-3000) > 10 {
		t.Fatalf("drift event says %.1f ppm, want about 3000 (our clock fast)", drift.RatePPM)
	}
	t0 := r.clock.Now()
	l, err := r.c.Acquire(ctxT(t), "jobs/new", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	configured := r.timing.HolderDeadline(t0, ttl)
	got := clockwatch.Instant(l.DeadlineBoottimeNs)
	margin := clockwatch.DefaultDriftMarginPPM * 1e-6
	want := r.timing.WithObservedRate(3000, clockwatch.DefaultDriftMarginPPM).HolderDeadline(t0, ttl)
	if d := got.Sub(want); d > 100*time.Microsecond || d < -100*time.Microsecond {
		t.Fatalf("deadline %v, want %v (t0+d(1-(observed+margin))-eps)", got, want)
	}
	shorter := configured.Sub(got)
	wantShorter := time.Duration(float64(ttl) * (3000e-6 + margin - r.timing.Rho))
	t.Logf("observed drift shortened a %v term by %v", ttl, shorter)
	if shorter < wantShorter-100*time.Microsecond {
		t.Fatalf("deadline only %v shorter than with rho, want about %v", shorter, wantShorter)
	}
	cs, err := r.c.Clock(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if cs.DriftPPM == nil || cs.EffectiveRhoPPM < 3000 {
		t.Fatalf("clock view: %+v, want the observed drift and a raised rho", cs)
	}
}
