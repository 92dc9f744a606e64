package daemon

import (
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// TestRestoredEarlierNeverReleasedBeforeTold (review rev3, left open): a
// drift raises the timing floor to rho 20% (its file keeps it), the
// operator's reset_rho lowers it again, and a renewal tells the lease's
// owner a deadline the 20% floor does not give; the process dies. The
// next process restores the lease no later than the floor's file gives
// (earlier than told: safe for this process), and when it loses it there
// (renewals failing), its release with owner_ended must not reach the
// grantor before the deadline the owner was told: not as a Release, not
// in a keepalive, until that deadline passes. Before, the lost lease's
// release was queued at once, and the grantor could grant the name
// while its owner still acted on the later deadline.
func TestRestoredEarlierNeverReleasedBeforeTold(t *testing.T) {
	_, d2, l, told := toldLater(t)
	d2.mu.Lock()
	defer d2.mu.Unlock()
	rl, now := loseRestoredLocked(t, d2, l.name, told)
	// Held back until the told deadline, or later (holdLost).
	until := d2.previous.told[grantKey{rl.name, rl.token}]
	if until.Before(told) {
		t.Fatalf("held back until %v, before the told deadline %v", until, told)
	}
	named := func(at clockwatch.Instant) bool {
		sb := &sessionBatch{s: rl.sess}
		d2.endsOfLocked(sb, at)
		for _, k := range sb.ownerEnded {
			if k == (grantKey{rl.name, rl.token}) {
				return true
			}
		}
		return false
	}
	// Nor is its session due for it (a keepalive at every turn of the
	// renew loop, naming nothing) before then.
	due := map[*gsession]bool{}
	d2.endsDueLocked(now, due)
	if due[rl.sess] {
		t.Fatalf("the session is due for its named grants at %v, %v before any may be sent", now, told.Sub(now))
	}
	d2.endsDueLocked(until, due)
	if !due[rl.sess] {
		t.Fatal("the session is not due for its named grants once the told deadline passed")
	}
	if named(now) || named(told.Add(-time.Nanosecond)) || named(until.Add(-time.Nanosecond)) {
		t.Fatalf("the lost lease's owner's end named in a keepalive before the deadline its owner was told (%v)", told)
	}
	if !named(until) {
		t.Fatal("the lost lease's owner's end never named once its told deadline passed")
	}
}

// loseRestoredLocked has d lose its restored lease name at the deadline
// it was restored with, which must be earlier than told, and fails if
// that queued a Release at once; it returns the lease and that instant.
// The caller holds d.mu.
func loseRestoredLocked(t *testing.T, d *Daemon, name string, told clockwatch.Instant) (*lease, clockwatch.Instant) {
	t.Helper()
	rl := d.leases[name]
	if rl == nil {
		t.Fatalf("%s not restored", name)
	}
	if !rl.deadline.Before(told) {
		t.Fatalf("setup: restored at %v, not earlier than told (%v)", rl.deadline, told)
	}
	now := rl.deadline
	d.stepLocked(rl, evExpired, ipc.ReasonExpired, now)
	if n := len(d.unreleased); n != 0 {
		t.Fatalf("a Release of the lost lease queued at %v, %v before the deadline its owner was told", now, told.Sub(now))
	}
	return rl, now
}

// toldLater is the start of these tests: a drift raises the timing
// floor to rho 20%, reset_rho lowers it again, a renewal tells l's owner
// a deadline (told) the 20% floor does not give, and the process dies
// with that written. The next process, restored from it, is returned.
func toldLater(t *testing.T) (r *stateDirRig, next *Daemon, l *lease, told clockwatch.Instant) {
	t.Helper()
	r = newStateDirRig(t)
	d := r.d
	l = r.grant(r.sess[0], false, false)
	driftTo(d, 0.2)
	d.resetRho()
	r.clock.Advance(time.Second)
	r.renew(r.sess[0])
	d.mu.Lock()
	told = d.leases[l.name].deadline
	d.mu.Unlock()
	return r, restartOf(t, d), l, told
}

// restartOf writes prev's state, ends it as a crash would, and returns
// the process that restores that state.
func restartOf(t *testing.T, prev *Daemon) *Daemon {
	t.Helper()
	if err := prev.writeState(prev.ps.boot); err != nil {
		t.Fatal(err)
	}
	prev.unlockState()
	prev.stop()
	next, err := New(prev.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { next.stop(); next.unlockState() })
	return next
}

// TestToldDeadlineKeptAcrossRestarts: the process that restored the lease
// earlier than its owner was told writes the state with its own, earlier
// deadline, and dies before it renewed the lease past the told one. The
// process after it must still hold the lease's release back until the
// deadline the first process told: before, the second process's file
// kept only its own deadline, so the third took that one for the told
// one and queued the Release of the lost lease at once.
func TestToldDeadlineKeptAcrossRestarts(t *testing.T) {
	_, d2, l, told := toldLater(t)
	d3 := restartOf(t, d2)
	d3.mu.Lock()
	defer d3.mu.Unlock()
	rl, _ := loseRestoredLocked(t, d3, l.name, told)
	if !d3.previous.heldBack(grantKey{rl.name, rl.token}, told.Add(-time.Nanosecond)) {
		t.Fatalf("not held back until the told deadline %v: %v", told, d3.previous.told)
	}
}

// TestHeldBackEndWakesTheLoopAtTold: a session that holds no lease any
// more, only the held-back owner's end of the one it lost, is neither
// due before the told deadline (a keepalive at every turn naming
// nothing) nor slept past the deadline it is held back to: the renew
// loop wakes at that, the keepalive then names the grant, and a reply
// without it is the end of it.
func TestHeldBackEndWakesTheLoopAtTold(t *testing.T) {
	r, d2, l, written := toldLater(t)
	d2.mu.Lock()
	rl := d2.leases[l.name]
	now := rl.deadline
	d2.stepLocked(rl, evExpired, ipc.ReasonExpired, now)
	n := len(d2.leases)
	k := grantKey{rl.name, rl.token}
	told := d2.previous.told[k] // held back to at least the told deadline
	d2.mu.Unlock()
	if n != 0 {
		t.Fatalf("setup: %d leases left", n)
	}
	if told.Before(written) {
		t.Fatalf("held back until %v, before the told deadline %v", told, written)
	}
	if at := d2.nextWake(r.clock.Now(), nil); at != told {
		t.Fatalf("the renew loop wakes at %v, not at the told deadline %v", at, told)
	}
	if sbs := d2.dueSessions(told.Add(-time.Nanosecond), nil); len(sbs) != 0 {
		t.Fatalf("%d sessions due before the told deadline", len(sbs))
	}
	sbs := d2.dueSessions(told, nil)
	if len(sbs) != 1 || sbs[0].s != rl.sess || len(sbs[0].ownerEnded) != 1 || sbs[0].ownerEnded[0] != k {
		t.Fatalf("at the told deadline the keepalive is %+v, not one of %s naming %v", sbs, rl.sess.id, k)
	}
	d2.mu.Lock()
	d2.endsAnsweredLocked(sbs[0], true, map[grantKey]*grantorpb.LeaseRef{}, told)
	left := len(d2.ends)
	d2.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d sessions still name grants after a reply without it", left)
	}
	if at := d2.nextWake(told, nil); at != told.Add(time.Hour) {
		t.Fatalf("the renew loop wakes at %v with nothing to do", at)
	}
}

// TestRestoredFollowerLostNotReleasedBeforeItsOwn: a follower lease
// granted after its session's last renewal was told a later deadline than
// the session's other leases, and the sessions file keeps only their
// earliest, so the next process restores it with an earlier deadline than
// its owner was told (the deadline rule, statefile.go). Lost there (its
// renewals failing at once), its Release with owner_ended must not reach
// the grantor before the deadline its owner was told: before, it was
// queued at once, 2 s before.
func TestRestoredFollowerLostNotReleasedBeforeItsOwn(t *testing.T) {
	r := newStateDirRig(t)
	r.grant(r.sess[0], false, false)
	r.clock.Advance(2 * time.Second)
	a := r.grant(r.sess[0], false, false)
	d2 := restartOf(t, r.d)
	d2.mu.Lock()
	defer d2.mu.Unlock()
	rl := d2.leases[a.name]
	if rl == nil || !rl.deadline.Before(a.deadline) {
		t.Fatalf("setup: %s restored as %+v, not earlier than told (%v)", a.name, rl, a.deadline)
	}
	now := rl.deadline
	d2.stepLocked(rl, evExpired, ipc.ReasonExpired, now)
	if n := len(d2.unreleased); n != 0 {
		t.Fatalf("a Release of the lost lease queued %v before the deadline its owner was told", a.deadline.Sub(now))
	}
	if k := (grantKey{rl.name, rl.token}); !d2.previous.heldBack(k, a.deadline.Add(-time.Nanosecond)) {
		t.Fatalf("its owner's end is not held back until the deadline its owner was told (%v)", a.deadline)
	}
}
