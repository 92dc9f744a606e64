package grantor

import (
	"errors"
	"testing"
	"time"
)

// Issue 22 item 1: a late first attempt of a refused request id that
// reaches a new leader is answered refused and granted nothing. The
// sidecar's retry without wait is refused while a holds L; leadership
// moves; a releases L; then the first attempt, held up on the way, comes
// with its full wait. At main the refusal was remembered by the office
// that gave it only (refused.go): the new leader evaluated the late call
// afresh and granted it, a grant its sidecar had been told was refused.
func TestLateFirstAttemptOfARefusedIDAtANewLeaderIsRefused(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	a := h.acquire(acq("a", 1, "L", 10*time.Second))
	w := acq("w", 1, "L", 10*time.Second)
	if r := h.acquire(w); r.Granted { // the retry, with nothing left of its wait
		t.Fatalf("the retry without wait: %+v, want refused", r)
	}
	h.l.leadershipChanged(false) // a new leader, with nothing of the old one's memory
	h.takeOffice()
	if r, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "a", Seq: 2}, Lease: "L", Owner: "o", Token: a.Token}); err != nil || !r.Released {
		t.Fatalf("release: %+v %v", r, err)
	}
	late := h.outcome(h.goAcquire(h.ctx(), w, time.Minute)) // the first attempt, late
	if late.err != nil || late.res.Granted {
		t.Fatalf("the late first attempt of (w,1) at the new leader: %+v %v, want refused", late.res, late.err)
	}
	if rec, held := h.fsm.lease("L"); held {
		t.Fatalf("request (w,1), answered refused, left L granted: %+v", rec)
	}
}

// Issue 22 item 1: a call without wait that races its waiter's last try
// gets one answer. Waiter W of (w,1) heads L's queue when its wait runs
// out with L free: its last try is a Final Acquire entry, held in the
// log. A call of (w,1) without wait (the sidecar's abandon probe) finds
// W and proposes its withdrawal, which raft orders after the last try:
// both are the grant the last try made, and W's request has no other.
func TestRetryWithoutWaitRacingItsWaitersLastTryGetsOneAnswer(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	o, err := h.l.await(h.ctx())
	if err != nil {
		t.Fatal(err)
	}
	x := acq("w", 1, "L", 10*time.Second)
	w, err := h.l.enqueue(o, x) // W heads L's queue, L free; its wait runs out now
	if err != nil {
		t.Fatal(err)
	}
	entered, release := holdNextEntry(h)
	last := make(chan acquireOutcome, 1)
	go func() {
		r, err := h.l.lastTry(h.ctx(), o, w)
		last <- acquireOutcome{r, err}
	}()
	<-entered // the last try's entry is in the log
	m := h.events.mark()
	probe := h.goAcquire(h.ctx(), x, 0)
	h.events.wait(t, m, "the probe joins W", func(e testEvent) bool { return e.what == "queued" && e.lease == "L" })
	close(release)
	lt, pr := h.outcome(last), h.outcome(probe)
	if lt.err != nil || !lt.res.Granted {
		t.Fatalf("the last try: %+v %v, want granted (L was free)", lt.res, lt.err)
	}
	if pr.err != nil || !pr.res.Granted || pr.res.Token != lt.res.Token {
		t.Fatalf("the probe of (w,1), whose last try was granted token %d: %+v %v, want that grant", lt.res.Token, pr.res, pr.err)
	}
	if n := h.raft.entries(); n != 2 {
		t.Fatalf("%d entries, want 2: the last try and the probe's withdrawal", n)
	}
}

// The same race the other way round: the probe's withdrawal reaches the
// log first, so the request is refused for good, and the last try that
// follows it grants nothing.
func TestWithdrawalBeforeTheLastTryRefusesIt(t *testing.T) {
	f := newTestFSM()
	x := acquireCmd{ID: requestID{Session: "w", Seq: 1}, Lease: "L", Owner: "o", TTL: 10 * time.Second}
	r, ok := f.apply(cmdWithdraw, x).(*acquireResult)
	if !ok || r.Granted || !r.Final {
		t.Fatalf("withdrawal: %+v, want refused for good", r)
	}
	last := x
	last.Final = true
	if r, ok := f.apply(cmdAcquire8, last).(*acquireResult); !ok || r.Granted || !r.Final {
		t.Fatalf("the last try after the withdrawal: %+v, want refused for good", r)
	}
	if _, held := f.lease("L"); held {
		t.Fatal("L was granted to a withdrawn request")
	}
}

// Every outcome of a request id is the FSM's and the same for every entry
// of it: a Final refusal is remembered (a later entry of the id, with or
// without Final, even a handoff's, grants nothing), a withdrawal answers
// an earlier grant, a refusal without Final is not remembered, and the
// session's acknowledgement floor forgets them all (the id is then stale).
func TestOutcomesAreDecidedAndRememberedByTheFSM(t *testing.T) {
	f := newTestFSM()
	hold := f.acquire(t, "a", 1, "L", "o")
	id := func(seq uint64) acquireCmd {
		return acquireCmd{ID: requestID{Session: "s", Seq: seq}, Lease: "L", Owner: "o", TTL: 10 * time.Second}
	}
	// Not Final: a waiter's own entry; refused, nothing remembered.
	if r := f.apply(cmdAcquire8, id(1)).(*acquireResult); r.Granted || r.Final {
		t.Fatalf("waiter's entry: %+v", r)
	}
	if f.hasOutcome("s", 1) {
		t.Fatal("a refusal without Final was remembered")
	}
	// Final: refused for good.
	fin := id(2)
	fin.Final = true
	if r := f.apply(cmdAcquire8, fin).(*acquireResult); r.Granted || !r.Final {
		t.Fatalf("Final: %+v", r)
	}
	f.release(t, "a", 2, "L", "o", hold.Token)
	// L is free: a handoff carrying (s,2) grants nothing.
	rel := f.acquire(t, "b", 1, "L", "o")
	next := id(2)
	h, ok := f.apply(cmdRelease6, releaseCmd{ID: requestID{Session: "b", Seq: 2}, Lease: "L", Owner: "o", Token: rel.Token, Next: &next}).(*releaseResult)
	if !ok || !h.Released || h.Next == nil || !h.Next.Tried {
		t.Fatalf("release with (s,2) attached: %+v", h)
	}
	if r := h.Next.Res.(*acquireResult); r.Granted || !r.Final {
		t.Fatalf("handoff to (s,2), refused for good: %+v", r)
	}
	if _, held := f.lease("L"); held {
		t.Fatal("a request refused for good was granted by a handoff")
	}
	// A grant, then its withdrawal: answered the grant.
	g := f.apply(cmdAcquire8, id(3)).(*acquireResult)
	if !g.Granted {
		t.Fatalf("(s,3): %+v", g)
	}
	if r := f.apply(cmdWithdraw, id(3)).(*acquireResult); !r.Granted || r.Token != g.Token {
		t.Fatalf("withdrawal of granted (s,3): %+v, want its grant", r)
	}
	// The floor forgets: (s,2) and (s,3) are stale past it.
	ack := id(4)
	ack.ID.FirstUnacked = 4
	ack.Lease = "M"
	f.apply(cmdAcquire8, ack)
	var stale *StaleRequestError
	if err, _ := f.apply(cmdAcquire8, fin).(error); !errors.As(err, &stale) {
		t.Fatalf("(s,2) after the floor passed it: %v, want stale", err)
	}
}
