package daemon

import (
	"testing"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// tick moves the rig's fake clock one probe interval on, then waits until
// the daemon's loops have run at the new instant: every loop that sleeps
// on the fake clock sets its timer again once it has done what came due
// (the probe loop after its probe), as in advanceUntilKeepAlive.
func (r *rig) tick(t *testing.T) {
	t.Helper()
	timers := r.clock.Timers()
	r.clock.Advance(probeInterval)
	if err := r.clock.WaitTimers(ctxT(t), timers); err != nil {
		t.Fatalf("the daemon's loops did not run at %v of the fake clock: %v", r.clock.Now(), err)
	}
}

// settle moves the fake clock on until a leader has answered the rig's
// daemon (its first probe, a tick after its start).
func (r *rig) settle(t *testing.T) {
	t.Helper()
	ctx := ctxT(t)
	for {
		timers := r.clock.Timers()
		r.clock.Advance(probeInterval)
		select {
		case <-r.d.reach.firstOK:
			if err := r.clock.WaitTimers(ctx, timers); err != nil {
				t.Fatalf("the daemon's loops did not run after its first probe: %v", err)
			}
			return
		case <-ctx.Done():
			t.Fatal("no leader ever answered")
		case <-time.After(50 * time.Millisecond): // the probe loop may not have set its timer yet
		}
	}
}

// Issue 25 item 1: a sidecar whose renewals keep its exchanges with the
// leader going asks the leader nothing else. At d = 15 s it renews every
// 5 s; it used to ask the leader who leads (Members) after every second
// of quiet as well, about 4 calls for each keepalive.
func TestRenewalsStandForTheLeaderProbe(t *testing.T) {
	r := newRig(t)
	r.settle(t)
	if _, err := r.c.Acquire(ctxT(t), "jobs/a", ipc.AcquireOptions{TTL: 15 * time.Second}); err != nil {
		t.Fatal(err)
	}
	asked := r.g.membersAsked.Load()
	renewed := 0
	for range 60 {
		r.tick(t)
		select {
		case <-r.g.keepalives:
			// Its reply is in before the clock moves on.
			r.waitLeaseEvent(t, ipc.EventRenewed, "jobs/a")
			renewed++
		case <-time.After(20 * time.Millisecond): // a handed-on keepalive's transit (advanceUntilKeepAlive)
		}
	}
	if renewed < 10 {
		t.Fatalf("%d keepalives in 60 s at d = 15 s, want 12", renewed)
	}
	if probes := r.g.membersAsked.Load() - asked; probes != 0 {
		t.Errorf("%d leader probes in 60 s beside %d keepalives, want none", probes, renewed)
	}
	st, err := r.c.StatusAll(ctxT(t))
	if err != nil || !st.Grantor.LeaderReachable {
		t.Errorf("status: %+v %v, want the leader reachable", st.Grantor, err)
	}
}

// A sidecar with no lease probes the leader once every probeAfterQuiet
// (it probed every second), and status calls the leader reachable all the
// while.
func TestIdleSidecarProbesAfterQuiet(t *testing.T) {
	r := newRig(t)
	r.settle(t)
	asked := r.g.membersAsked.Load()
	const span = 60 * time.Second
	for range int(span / probeInterval) {
		r.tick(t)
		st, err := r.c.StatusAll(ctxT(t))
		if err != nil || !st.Grantor.LeaderReachable {
			t.Fatalf("status: %+v %v, want the leader reachable", st.Grantor, err)
		}
	}
	probes := r.g.membersAsked.Load() - asked
	if want := int64(span / probeAfterQuiet); probes < want-1 || probes > want+1 {
		t.Errorf("%d leader probes in %v without a lease, want %d", probes, span, want)
	}
}

// A leader that no longer leads is still noticed by an idle sidecar: at
// its next probe, within probeAfterQuiet and a tick. From then on it asks
// every tick, status says no leader is reachable, and an acquire that may
// not wait fails fast once none answered for failFastAfter.
func TestIdleSidecarNoticesALostLeader(t *testing.T) {
	r := newRig(t)
	r.settle(t)
	r.g.set(func() { r.g.follower = true })
	asked := r.g.membersAsked.Load()
	noticed := time.Duration(0)
	for i := 1; noticed == 0; i++ {
		r.tick(t)
		if r.g.membersAsked.Load() > asked {
			noticed = time.Duration(i) * probeInterval
		}
		if time.Duration(i)*probeInterval > probeAfterQuiet+probeInterval {
			t.Fatalf("no probe %v after the leader stepped down", time.Duration(i)*probeInterval)
		}
	}
	st, err := r.c.StatusAll(ctxT(t))
	if err != nil || st.Grantor.LeaderReachable {
		t.Errorf("status after the failed probe: %+v %v, want no leader reachable", st.Grantor, err)
	}
	asked = r.g.membersAsked.Load()
	for range int(failFastAfter / probeInterval) {
		r.tick(t)
	}
	if got, want := r.g.membersAsked.Load()-asked, int64(failFastAfter/probeInterval); got != want {
		t.Errorf("%d probes in %v without a leader, want one a tick (%d)", got, failFastAfter, want)
	}
	_, err = r.c.Acquire(ctxT(t), "jobs/a", ipc.AcquireOptions{TTL: 15 * time.Second})
	if e, ok := err.(*ipc.Error); !ok || e.Code != ipc.CodeUnavailable {
		t.Errorf("an acquire without a wait %v after the leader was lost: %v, want unavailable", noticed+failFastAfter, err)
	}
}
