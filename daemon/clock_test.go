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

// driftRate is the rate the drift tests skew the grantor's clock by: it
// runs 3000 ppm slow, so ours is fast.
const driftRate = -3000e-6

// newDriftRig returns a rig whose grantor clock runs at driftRate against
// ours, with a renewed lease (jobs/keep) whose keepalives feed the drift
// estimator. Before it returns, every lease in hold (acquired by hold,
// before any sample) is acquired, and then the drift event has come.
func newDriftRig(t *testing.T, hold func(r *rig)) *rig {
	t.Helper()
	r := newRigWith(t, func(c *Config) {
		c.Watch.Drift = clockwatch.DriftConfig{Bucket: time.Second, MinSamples: 5, MinSpan: 20 * time.Second}
	})
	r.g.set(func() { r.g.rate = driftRate })
	hold(r)
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
	if math.Abs(drift.RatePPM+driftRate*1e6) > 10 {
		t.Fatalf("drift event says %.1f ppm, want about 3000 (our clock fast)", drift.RatePPM)
	}
	return r
}

// driftTiming is the timing a drift of driftRate calls for.
func (r *rig) driftTiming() clockwatch.Timing {
	return r.timing.WithObservedRate(-driftRate*1e6, clockwatch.DefaultDriftMarginPPM)
}

// A drift rate observed against the grantor beyond rho raises rho: new
// deadlines are computed with the observed rate plus margin, shorter by
// d*(observed+margin-rho), and a drift event says so.
func TestObservedDriftShortensDeadlines(t *testing.T) {
	r := newDriftRig(t, func(*rig) {})
	t0 := r.clock.Now()
	l, err := r.c.Acquire(ctxT(t), "jobs/new", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	configured := r.timing.HolderDeadline(t0, ttl)
	got := clockwatch.Instant(l.DeadlineBoottimeNs)
	margin := clockwatch.DefaultDriftMarginPPM * 1e-6
	want := r.driftTiming().HolderDeadline(t0, ttl)
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

// Issue 9, item 5: the raised rho outlives the samples that raised it. A
// new grantor leader makes the daemon forget its samples (every host has
// its own BOOTTIME; the renew loop calls ResetDrift), but deadlines are
// still computed with the largest rate seen, until the operator resets it
// with reset_rho.
func TestRaisedRhoOutlivesLeaderChange(t *testing.T) {
	r := newDriftRig(t, func(*rig) {})
	r.d.watcher.ResetDrift() // what a leader change does
	t0 := r.clock.Now()
	l, err := r.c.Acquire(ctxT(t), "jobs/after-change", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := clockwatch.Instant(l.DeadlineBoottimeNs), r.driftTiming().HolderDeadline(t0, ttl); got.Sub(want).Abs() > 100*time.Microsecond {
		t.Fatalf("deadline after a leader change %v, want %v (still the raised rho; the configured one gives %v)",
			got, want, r.timing.HolderDeadline(t0, ttl))
	}
	cs, err := r.c.ResetRho(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if cs.EffectiveRhoPPM != r.timing.Rho*1e6 {
		t.Fatalf("after reset_rho: effective rho %v ppm, want the configured %v", cs.EffectiveRhoPPM, r.timing.Rho*1e6)
	}
	t0 = r.clock.Now()
	l, err = r.c.Acquire(ctxT(t), "jobs/after-reset", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := clockwatch.Instant(l.DeadlineBoottimeNs), r.timing.HolderDeadline(t0, ttl); got != want {
		t.Fatalf("deadline after reset_rho %v, want the configured rho's %v", got, want)
	}
}

// Issue 9, item 5: a drift found after a deadline was told shortens it.
// A lease the daemon does not renew (no_renew) keeps the deadline of its
// grant, computed with the configured rho; when the drift is found, that
// deadline moves to t0 + d(1-rho') - eps, and its owner is told with a
// shortened event.
func TestDriftFoundLaterShortensToldDeadlines(t *testing.T) {
	const long = 10 * time.Minute
	var t0 clockwatch.Instant
	var told *ipc.Lease
	r := newDriftRig(t, func(r *rig) {
		t0 = r.clock.Now()
		var err error
		told, err = r.c.Acquire(ctxT(t), "jobs/told", ipc.AcquireOptions{TTL: long, Owner: ipc.OwnerDetached, NoRenew: true})
		if err != nil {
			t.Fatal(err)
		}
	})
	// The estimate may start above the true rate (it takes the largest
	// the samples allow), so the floor can end above driftTiming's.
	atMost := r.driftTiming().HolderDeadline(t0, long)
	ev := r.waitLeaseEvent(t, ipc.EventShortened, "jobs/told")
	if ev.Token != told.Token || ev.Reason != ipc.ReasonDrift || clockwatch.Instant(ev.DeadlineBoottimeNs).After(atMost) {
		t.Fatalf("shortened %+v, want token %s, reason drift, deadline at most %v", ev, told.Token, atMost)
	}
	want := r.d.floor.get().HolderDeadline(t0, long)
	if told.DeadlineBoottimeNs <= int64(want) {
		t.Fatalf("the told deadline %d was not later than the shortened one %d", told.DeadlineBoottimeNs, want)
	}
	g, err := r.c.Check(ctxT(t), "jobs/told", told.Token)
	if err != nil {
		t.Fatal(err)
	}
	if g.DeadlineBoottimeNs != int64(want) {
		t.Fatalf("check shows deadline %d, want the shortened %d", g.DeadlineBoottimeNs, want)
	}
	if told.Deadline() != int64(want) {
		t.Fatalf("the Go client's lease keeps deadline %d, want the shortened %d", told.Deadline(), want)
	}
}
