package daemon

import (
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// Rule (issue 12, jeopardy): when no renewal has succeeded for a third of
// the term after the one due at d/3, that is at t0 + 2d/3, the owner and
// watchers are told jeopardy with the validity left; not before. A
// renewal that succeeds again brings safe with the new deadline.
func TestJeopardyAtTwoThirdsThenSafe(t *testing.T) {
	r := newRig(t)
	r.catchUp()
	r.g.set(func() { r.g.silent = true })
	t0 := r.clock.Now()
	l, err := r.c.Acquire(ctxT(t), "jobs/a", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	deadline := r.timing.HolderDeadline(t0, ttl)
	at := t0.Add(2 * ttl / 3)
	r.clock.Advance(ttl / 3)
	r.waitKeepAlive(t) // due at d/3; it goes unanswered
	// Most of the way: still safe. Had jeopardy come now, its valid_ms
	// would show the 100ms.
	r.clock.Advance(at.Add(-100 * time.Millisecond).Sub(r.clock.Now()))
	if s, _ := l.State(); s != ipc.Safe {
		t.Fatalf("state %v before 2d/3", s)
	}
	sent := clockwatch.System.Now()
	r.clock.Advance(at.Sub(r.clock.Now()))
	ev := r.waitEvent(t, ipc.EventJeopardy)
	queued := clockwatch.System.Now().Sub(sent)
	if ev.Lease != "jobs/a" || ev.Token != l.Token || clockwatch.Instant(ev.DeadlineBoottimeNs) != deadline {
		t.Fatalf("jeopardy %+v, want jobs/a's grant with deadline %v", ev, deadline)
	}
	// valid_ms is deadline - (t0 + 2d/3) on the daemon's (fake) clock,
	// less the real time the event waited to be written (ipc ages it).
	want := deadline.Sub(at).Milliseconds()
	if ev.ValidMs > want || ev.ValidMs < want-queued.Milliseconds()-1 {
		t.Fatalf("jeopardy valid_ms %d, want deadline - (t0 + 2d/3) = %d, less at most the %v it took to come", ev.ValidMs, want, queued)
	}
	if s, _ := l.State(); s != ipc.Jeopardy {
		t.Fatalf("client state %v after jeopardy", s)
	}
	// The grantor answers again: the next retry renews, and the lease is
	// safe, with a deadline from that keepalive's t0.
	r.g.set(func() { r.g.silent = false })
	r.clock.Advance(time.Second) // past any retry backoff
	ev = r.waitEvent(t, ipc.EventSafe)
	if ev.Token != l.Token || clockwatch.Instant(ev.DeadlineBoottimeNs) <= deadline {
		t.Fatalf("safe %+v, want a deadline later than %v", ev, deadline)
	}
	if s, _ := l.State(); s != ipc.Safe {
		t.Fatalf("client state %v after safe", s)
	}
}

// Rule: jeopardy comes before lost, and lost still comes at the deadline;
// a lease the daemon does not renew is never in jeopardy.
func TestJeopardyBeforeLostAndNotWithoutRenewals(t *testing.T) {
	r := newRig(t)
	r.catchUp()
	r.g.set(func() { r.g.silent = true })
	t0 := r.clock.Now()
	l, err := r.c.Acquire(ctxT(t), "jobs/a", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.Acquire(ctxT(t), "jobs/norenew", ipc.AcquireOptions{TTL: ttl, Owner: ipc.OwnerDetached, NoRenew: true}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(ttl / 3)
	r.waitKeepAlive(t)
	r.clock.Advance(t0.Add(2 * ttl / 3).Sub(r.clock.Now()))
	if ev := r.waitEvent(t, ipc.EventJeopardy); ev.Lease != "jobs/a" {
		t.Fatalf("jeopardy of %s", ev.Lease)
	}
	// The pass that told jobs/a's jeopardy looked at every lease, and its
	// events are on this connection before the status reply.
	if _, err := r.c.Status(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for {
		ev := r.pendingEvent()
		if ev == nil {
			break
		}
		if ev.Event == ipc.EventJeopardy {
			t.Fatalf("jeopardy for %s, a lease the daemon does not renew", ev.Lease)
		}
	}
	r.clock.Advance(r.timing.HolderDeadline(t0, ttl).Sub(r.clock.Now()))
	if ev := r.waitLeaseEvent(t, ipc.EventLost, "jobs/a"); ev.Token != l.Token {
		t.Fatalf("lost %+v", ev)
	}
	if s, _ := l.State(); s != ipc.Lost {
		t.Fatalf("client state %v after lost", s)
	}
}

// pendingEvent returns an event that has arrived, nil when none has.
func (r *rig) pendingEvent() *ipc.Event {
	if len(r.backlog) > 0 {
		ev := r.backlog[0]
		r.backlog = r.backlog[1:]
		return ev
	}
	select {
	case ev := <-r.events:
		return ev
	default:
		return nil
	}
}

// catchUp advances the rig's fake clock, which starts where the real
// CLOCK_BOOTTIME stood when the package's tests began, to the real one
// now, before any lease is held: the Go client also ends a lease by the
// real clock at its deadline (client.go), so a test that reads the
// client's state must hold deadlines the real clock has not passed.
func (r *rig) catchUp() {
	if lag := clockwatch.System.Now().Sub(r.clock.Now()); lag > 0 {
		r.clock.Advance(lag)
	}
}
