package daemon

import (
	"strconv"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

const ttl = 9 * time.Second

// Rules 1 and 3: the holder reads t0 before it sends Acquire and keeps the
// lease until t0 + d(1-rho) - eps. However long the grant takes to arrive,
// the deadline does not move later.
func TestDeadlineCountsFromT0BeforeRequest(t *testing.T) {
	r := newRig(t)
	r.g.set(func() { r.g.delay = 2 * time.Second }) // slow network
	t0 := r.clock.Now()
	l, err := r.c.Acquire(ctxT(t), "jobs/a", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	want := r.timing.HolderDeadline(t0, ttl)
	if got := clockwatch.Instant(l.DeadlineBoottimeNs); got != want {
		t.Fatalf("deadline %v, want t0+d(1-rho)-eps = %v (t0 %v)", got, want, t0)
	}
	// The reply was written at t0+delay or later: valid_ms cannot count
	// the delay again.
	if most := want.Sub(t0.Add(2 * time.Second)).Milliseconds(); l.ValidMs > most {
		t.Fatalf("valid_ms %d, want at most %d (the delay is already spent)", l.ValidMs, most)
	}
}

// Rules 3, 4 and 6: a renewal is sent by d/3, keeps the token, and moves
// the deadline to t0 + d(1-rho) - eps with t0 read before the keepalive.
func TestRenewalKeepsTokenDeadlineFromBatchT0(t *testing.T) {
	r := newRig(t)
	l, err := r.c.Acquire(ctxT(t), "jobs/a", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	r.g.set(func() { r.g.delay = 500 * time.Millisecond })
	r.clock.Advance(ttl / 3)
	t0 := r.clock.Now()
	ka := r.waitKeepAlive(t)
	tok, _ := strconv.ParseUint(l.Token, 10, 64)
	if len(ka.Leases) != 0 || len(ka.Sessions) != 1 || ka.Sessions[0].TtlNs != int64(ttl) || ka.Sessions[0].LeaseSetVersion != grantorpb.TokenDigest(tok) {
		t.Fatalf("keepalive %v, want the session of term %v holding jobs/a's grant", ka, ttl)
	}
	ev := r.waitEvent(t, ipc.EventRenewed)
	if ev.Token != l.Token {
		t.Fatalf("renewal changed the token: %s -> %s", l.Token, ev.Token)
	}
	if want := r.timing.HolderDeadline(t0, ttl); clockwatch.Instant(ev.DeadlineBoottimeNs) != want {
		t.Fatalf("renewed deadline %v, want %v", clockwatch.Instant(ev.DeadlineBoottimeNs), want)
	}
}

// Rule 5: a holder that cannot renew reports lost no later than its
// deadline, and no reply shows the lease after it.
func TestLostNoLaterThanDeadline(t *testing.T) {
	r := newRig(t)
	r.g.set(func() { r.g.silent = true })
	t0 := r.clock.Now()
	if _, err := r.c.Acquire(ctxT(t), "jobs/a", ipc.AcquireOptions{TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	deadline := r.timing.HolderDeadline(t0, ttl)
	// Walk up to the deadline in steps; the lease stays listed, with a
	// deadline that never grew, until the very end.
	step := ttl / 10
	sent := false
	for r.clock.Now().Add(step).Before(deadline) {
		r.clock.Advance(step)
		if !sent && !r.clock.Now().Before(t0.Add(ttl/3)) {
			// The renewal due at d/3 leaves (and goes unanswered) before
			// the walk goes on, however slow the renew loop is to wake.
			r.waitKeepAlive(t)
			sent = true
		}
		leases, err := r.c.Status(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(leases) != 1 || clockwatch.Instant(leases[0].DeadlineBoottimeNs) != deadline {
			t.Fatalf("at %v: status %+v, want the lease with deadline %v", r.clock.Now(), leases, deadline)
		}
	}
	r.clock.Advance(deadline.Sub(r.clock.Now()))
	ev := r.waitEvent(t, ipc.EventLost)
	if ev.Reason != ipc.ReasonRenewFailed {
		t.Errorf("lost reason %q, want %q", ev.Reason, ipc.ReasonRenewFailed)
	}
	leases, err := r.c.Status(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != 0 {
		t.Fatalf("status after the deadline still lists %+v", leases)
	}
}

// The leases of one term ride one session, renewed as a whole: the
// keepalive names the session and the digest of its three grants, not
// the leases.
func TestRenewalsShareOneKeepAlive(t *testing.T) {
	r := newRig(t)
	var tokens []uint64
	for _, n := range []string{"a", "b", "c"} {
		l, err := r.c.Acquire(ctxT(t), n, ipc.AcquireOptions{TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		tok, _ := strconv.ParseUint(l.Token, 10, 64)
		tokens = append(tokens, tok)
	}
	r.clock.Advance(ttl / 3)
	ka := r.waitKeepAlive(t)
	if len(ka.Leases) != 0 || len(ka.Sessions) != 1 || ka.Sessions[0].LeaseSetVersion != grantorpb.LeaseSetDigest(tokens) {
		t.Fatalf("keepalive %v, want one session with the digest of all 3 grants", ka)
	}
	for range 3 {
		r.waitEvent(t, ipc.EventRenewed)
	}
}

// A grant that arrives after the deadline its t0 would give (a wait in the
// queue longer than the term) is not reported lost: the daemon renews it
// first and answers with the deadline of that renewal, whose t0 was read
// after the grant; nobody hears of the grant before.
func TestLateGrantIsRenewedBeforeTheAnswer(t *testing.T) {
	r := newRig(t)
	r.g.set(func() { r.g.acquireDelay = 2 * ttl })
	t0 := r.clock.Now()
	l, err := r.c.Acquire(ctxT(t), "jobs/late", ipc.AcquireOptions{TTL: ttl, Wait: time.Minute})
	if err != nil {
		t.Fatalf("a late grant: %v", err)
	}
	got := clockwatch.Instant(l.DeadlineBoottimeNs)
	if !got.After(t0.Add(2 * ttl)) {
		t.Fatalf("deadline %v is not from a renewal after the grant (t0 %v)", got, t0)
	}
	if want := r.timing.HolderDeadline(t0.Add(2*ttl), ttl); got != want {
		t.Fatalf("deadline %v, want the renewal's t0 + d(1-rho) - eps = %v", got, want)
	}
	if l.ValidMs <= 0 {
		t.Fatalf("valid_ms %d", l.ValidMs)
	}
}

// Rule 4: renewal runs on its own goroutine: a request stuck on the way
// to the grantor (here an acquire the grantor holds) does not keep other
// leases from being renewed on time.
func TestStuckRequestDoesNotStarveRenewal(t *testing.T) {
	r := newRig(t)
	l, err := r.c.Acquire(ctxT(t), "jobs/kept", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	stall := make(chan struct{})
	defer close(stall)
	r.g.set(func() { r.g.stallName, r.g.stall = "jobs/stuck", stall })
	stuck := make(chan error, 1)
	go func() {
		_, err := r.c.Acquire(ctxT(t), "jobs/stuck", ipc.AcquireOptions{TTL: ttl, Wait: time.Minute})
		stuck <- err
	}()
	for i := 0; i < 3; i++ { // three renewal rounds while the acquire hangs
		r.clock.Advance(ttl / 3)
		r.waitKeepAlive(t)
		if ev := r.waitEvent(t, ipc.EventRenewed); ev.Lease != "jobs/kept" || ev.Token != l.Token {
			t.Fatalf("renewed %+v", ev)
		}
	}
	select {
	case err := <-stuck:
		t.Fatalf("the stalled acquire returned early: %v", err)
	default:
	}
}
