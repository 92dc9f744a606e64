package grantor

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// holdNextApply makes the next proposal wait before the FSM until release
// is closed (a proposal on its way to the log: later ones may pass it);
// entered is closed once it waits.
func holdNextApply(h *harness) (entered, release chan struct{}) {
	return holdNext(&h.raft.beforeFSM)
}

// holdNextEntry is holdNextApply for an entry in the log: every later
// entry waits behind it, as raft applies in log order (a slow disk or
// replication).
func holdNextEntry(h *harness) (entered, release chan struct{}) {
	return holdNext(&h.raft.inLog)
}

func holdNext(hook *func()) (entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	*hook = func() {
		if first.CompareAndSwap(false, true) {
			close(entered)
			<-release
		}
	}
	return entered, release
}

// TestRetriedWaiterOfCarriedRequestIsToldItsGrant (review 9/12/13 S2): a
// waiter whose call ends (its attempt's ctx:
// a transport blip, the sidecar's attempt timeout, the requester leaving)
// while a freeing entry carries it stays in the queue as claimed, and the
// entry grants the lease under its (session, seq). The sidecar retries
// the same request id (daemon/grantorconn.go acquire: retry with the same
// id): the retry must attach to the waiter of its id and be told the
// grant at once, not be queued again as a second waiter nor answered a
// refusal naming its own grant's token.
func TestRetriedWaiterOfCarriedRequestIsToldItsGrant(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	a := h.acquire(acq("a", 1, "L", 10*time.Second))
	ctx1, cancel1 := context.WithCancel(h.ctx())
	w := acq("w", 1, "L", 10*time.Second)
	first := h.enqueueWaiter(ctx1, w, time.Minute)

	entered, unblock := holdNextApply(h)
	relDone := make(chan *releaseResult, 1)
	go func() {
		r, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "a", Seq: 2}, Lease: "L", Owner: "o", Token: a.Token})
		if err != nil {
			t.Errorf("release: %v", err)
		}
		relDone <- r
	}()
	<-entered // the release's entry carries w's Acquire
	cancel1() // w's attempt ends
	if o := h.outcome(first); o.err == nil {
		t.Fatalf("first attempt: %+v", o.res)
	}
	retry := h.enqueueWaiter(h.ctx(), w, time.Minute) // same (session, seq)
	close(unblock)
	if r := <-relDone; r == nil || !r.Released || r.Next == nil || !r.Next.Tried {
		t.Fatalf("release: %+v", r)
	}
	granted := h.held("L")
	if granted == 0 {
		t.Fatal("the release handed the lease to nobody")
	}
	select {
	case o := <-retry:
		if o.err != nil || !o.res.Granted || o.res.Token != granted {
			t.Fatalf("retry of the granted request: %+v %v, want granted with token %d", o.res, o.err, granted)
		}
		return
	case <-time.After(2 * time.Second):
	}
	// Show what it gets in the end: its wait runs out.
	advance(h.l, h.clock, time.Minute)
	o := h.outcome(retry)
	t.Fatalf("the retry of request (w,1), granted token %d in the release's entry, was not told for its whole wait; then: %+v %v", granted, o.res, o.err)
}

// TestAbandonedWaiterRetryWithoutWaitGetsTheHandoff: the sidecar's
// abandon path (daemon/grantorconn.go acquire: cancel, then one wait-0
// retry of the same id to learn the outcome) reaches the grantor while a
// freeing entry carrying the first attempt is in flight. One request id
// gets one answer: the retry's own entry (a withdrawal) comes after that
// entry in the log and is answered the grant it made, so the sidecar
// gives it back (review 9/12/13 S2).
func TestAbandonedWaiterRetryWithoutWaitGetsTheHandoff(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	a := h.acquire(acq("a", 1, "L", 10*time.Second))
	ctx1, cancel1 := context.WithCancel(h.ctx())
	w := acq("w", 1, "L", 10*time.Second)
	first := h.enqueueWaiter(ctx1, w, time.Minute)
	entered, unblock := holdNextEntry(h)
	relDone := make(chan struct{})
	go func() {
		defer close(relDone)
		if _, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "a", Seq: 2}, Lease: "L", Owner: "o", Token: a.Token}); err != nil {
			t.Errorf("release: %v", err)
		}
	}()
	<-entered
	cancel1()
	h.outcome(first)
	probe := h.goAcquire(h.ctx(), w, 0)
	select {
	case o := <-probe:
		t.Fatalf("the wait-0 retry was answered (%+v %v) while the entry carrying its request was in flight", o.res, o.err)
	case <-time.After(100 * time.Millisecond):
	}
	close(unblock)
	<-relDone
	rec, held := h.fsm.lease("L")
	if !held || rec.Session != "w" {
		t.Fatalf("the release did not hand L to w: %+v", rec)
	}
	if o := h.outcome(probe); o.err != nil || !o.res.Granted || o.res.Token != rec.Token {
		t.Fatalf("request (w,1) was answered %+v %v, but granted token %d by the release's handoff", o.res, o.err, rec.Token)
	}
}

// TestGhostWaiterPassesTheWakeUpOn: a waiter whose call ended while an
// entry that turns out to free nothing carries it (here a release of a
// token the holder replaced meanwhile) must leave the queue when that
// entry settles: it must not stay at the head, unclaimed, taking the
// wake-ups and the next handoff (a phantom grant) from the live waiter
// behind it (review 9/12/13 S3).
func TestGhostWaiterPassesTheWakeUpOn(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	cur := h.acquire(acq("a", 1, "L", 10*time.Second))
	ctx1, cancel1 := context.WithCancel(h.ctx())
	w1 := h.enqueueWaiter(ctx1, acq("w1", 1, "L", 10*time.Second), time.Minute)
	w2 := h.enqueueWaiter(h.ctx(), acq("w2", 1, "L", 10*time.Second), time.Minute)

	entered, unblock := holdNextApply(h)
	relDone := make(chan struct{})
	go func() {
		defer close(relDone)
		r, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "a", Seq: 2}, Lease: "L", Owner: "o", Token: cur.Token})
		if err != nil || r.Released {
			t.Errorf("release of a replaced token: %+v %v", r, err)
		}
	}()
	<-entered                                            // the release frees cur when proposed, and carries w1
	again := h.acquire(acq("a", 3, "L", 10*time.Second)) // the holder asks again: cur ended
	if !again.Granted {
		t.Fatalf("holder asks again: %+v", again)
	}
	cancel1()
	if o := h.outcome(w1); o.err == nil {
		t.Fatalf("w1 after its call ended: %+v", o.res)
	}
	close(unblock)
	<-relDone
	r, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "a", Seq: 4}, Lease: "L", Owner: "o", Token: again.Token})
	if err != nil || !r.Released {
		t.Fatalf("release: %+v %v", r, err)
	}
	select {
	case o := <-w2:
		if o.err != nil || !o.res.Granted {
			t.Fatalf("w2: %+v %v", o.res, o.err)
		}
	case <-time.After(waitTimeout):
		rec, _ := h.fsm.lease("L")
		t.Fatalf("L released and w2, the only live waiter, is not served (L: %+v)", rec)
	}
	if rec, _ := h.fsm.lease("L"); rec.Session != "w2" {
		t.Fatalf("L went to %+v, not to w2", rec)
	}
}

// TestRefusedRequestIsNeverGrantedLater: one request id, one answer. Two
// calls of one Acquire wait at the leader (the sidecar's first attempt,
// whose cancel the leader has not seen under a partition or a slow
// disk, and its retry with what is left of the wait). The retry's wait
// runs out first and it is answered a refusal that no entry made; the
// other call stayed queued, and the next release handed it the lease: a
// grant of a request its sidecar had answered refused, which nobody
// held until the sidecar's session expired (chaos run at 0d6a6f7, seed
// 797397612635). A refusal given at the end of a wait withdraws the
// request for every call of its id.
func TestRefusedRequestIsNeverGrantedLater(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	a := h.acquire(acq("a", 1, "L", 10*time.Second))
	w := acq("w", 1, "L", 10*time.Second)
	first := h.enqueueWaiter(h.ctx(), w, time.Minute)
	retry := h.enqueueWaiter(h.ctx(), w, time.Second)
	advance(h.l, h.clock, 2*time.Second) // the retry's wait runs out
	o := h.outcome(retry)
	if o.err != nil || o.res.Granted {
		t.Fatalf("the retry whose wait ran out: %+v %v, want refused", o.res, o.err)
	}
	if _, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "a", Seq: 2}, Lease: "L", Owner: "o", Token: a.Token}); err != nil {
		t.Fatal(err)
	}
	if rec, held := h.fsm.lease("L"); held && rec.Session == "w" {
		t.Fatalf("request (w,1), answered refused, was granted token %d by the next release", rec.Token)
	}
	if o := h.outcome(first); o.err == nil && o.res.Granted {
		t.Fatalf("the other call of request (w,1), answered refused, was told granted: %+v", o.res)
	}
}

// Review 17, G1: one request id, one answer, for a call that reaches the
// leader after its id was answered refused. The sidecar's first attempt
// of an Acquire with a wait is held up on the way (a partition that
// heals, a slow link); its retry, on another connection, waits out what
// is left of the wait and is answered refused (withdraw takes the waiter
// out of the queue). Then the first attempt arrives, with the full wait:
// the FSM remembers no refusal, so it queues afresh, and the next
// release hands it the lease: a grant of a request its sidecar was told
// was refused. The FSM remembers the refusal (outcome.go) and the late
// call is answered it, without queueing.
func TestLateCallOfARefusedRequestIsNotGranted(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	a := h.acquire(acq("a", 1, "L", 10*time.Second))
	w := acq("w", 1, "L", 10*time.Second)
	retry := h.enqueueWaiter(h.ctx(), w, time.Second)
	advance(h.l, h.clock, 2*time.Second) // the retry's wait runs out
	if o := h.outcome(retry); o.err != nil || o.res.Granted {
		t.Fatalf("the retry whose wait ran out: %+v %v, want refused", o.res, o.err)
	}
	late := h.goAcquire(h.ctx(), w, time.Minute) // the first attempt, late
	lo := h.outcome(late)
	if lo.err != nil || lo.res.Granted || !lo.res.Final {
		t.Fatalf("a late call of request (w,1), answered refused: %+v %v, want that refusal at once", lo.res, lo.err)
	}
	if _, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "a", Seq: 2}, Lease: "L", Owner: "o", Token: a.Token}); err != nil {
		t.Fatal(err)
	}
	if rec, held := h.fsm.lease("L"); held && rec.Session == "w" {
		t.Fatalf("request (w,1), answered refused, was granted token %d by the next release", rec.Token)
	}
}

// Review 17, G1, a refusal an entry made: a call of (w,1) without wait
// (the sidecar's retry with nothing left of its wait) is refused by its
// own entry; the first attempt of (w,1), with its full wait, comes after
// and must be answered that refusal too, not queued to be granted by the
// next release.
func TestCallAfterAnEntryRefusedItsRequestIsNotGranted(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	a := h.acquire(acq("a", 1, "L", 10*time.Second))
	w := acq("w", 1, "L", 10*time.Second)
	if o := h.outcome(h.goAcquire(h.ctx(), w, 0)); o.err != nil || o.res.Granted {
		t.Fatalf("the call without wait: %+v %v, want refused", o.res, o.err)
	}
	late := h.goAcquire(h.ctx(), w, time.Minute)
	lo := h.outcome(late)
	if lo.err != nil || lo.res.Granted || !lo.res.Final {
		t.Fatalf("a later call of request (w,1), answered refused: %+v %v, want that refusal at once", lo.res, lo.err)
	}
	if _, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "a", Seq: 2}, Lease: "L", Owner: "o", Token: a.Token}); err != nil {
		t.Fatal(err)
	}
	if rec, held := h.fsm.lease("L"); held && rec.Session == "w" {
		t.Fatalf("request (w,1), answered refused, was granted token %d by the next release", rec.Token)
	}
}

// Review 18, finding G-a: the refusal memory outranks what the FSM
// remembers. Two calls of one Acquire (w,1) race: call A (wait > 0)
// proposes while the lease is held and is refused; the holder releases;
// call B, which joined before A queued, proposes and is granted; then A
// queues its waiter (enqueue, waiters.go: it finds no waiter and no
// refusal, and the lease has no room: nobody is woken). The sidecar's
// next call of (w,1) without wait (its abandon probe, or a retry with
// nothing left of its wait) finds A's waiter: answerNow answers it the
// FSM's refusal of the lease, naming (w,1)'s own token, and the office
// now remembers that as (w,1)'s answer, so every later call of (w,1) is
// "refused again" for refusedKept (61 min) while the FSM holds the
// lease under (w,1): one request id, two answers, and the second sticks
// (before c8e4fc7 a later call was proposed and answered the FSM's
// remembered grant). The test takes the race's outcome (B granted, then
// A's enqueue) and runs the real enqueue.
func TestRefusalMemoryDoesNotHideTheRequestsOwnGrant(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	x := acq("w", 1, "L", 10*time.Second)
	b := h.acquire(x) // call B of (w,1): granted
	if !b.Granted {
		t.Fatalf("call B: %+v", b)
	}
	if w, err := h.l.enqueue(h.l.cur, x); w == nil || err != nil { // call A's enqueue after its refused proposal
		t.Fatalf("enqueue: %v %v", w, err)
	}
	c, err := h.l.acquire(h.ctx(), x, 0) // the sidecar's wait-0 call of (w,1)
	if err != nil || !c.Granted || c.Token != b.Token {
		t.Errorf("a wait-0 call of (w,1), which the FSM granted token %d: %+v %v, want that grant", b.Token, c, err)
	}
	d, err := h.l.acquire(h.ctx(), x, 0) // and the next
	if err != nil || !d.Granted || d.Token != b.Token {
		t.Fatalf("a later call of (w,1), which the FSM granted token %d: %+v %v, want that grant (the office's refusal memory answers it refused)", b.Token, d, err)
	}
}

// Review 18, finding G-b: the refusal memory is keyed by request id only
// and filled without the session-ownership check (ownership.go) that
// every entry makes: a wait-0 Acquire that join refuses behind the queue
// (no entry) is remembered under the session it names, whoever sent it.
// A caller of another identity that knows a session id plants refusals
// under that session's next seqs, and the session's own calls of those
// ids, for any lease, even a free one, are answered "refused again".
func TestRefusalOfAnotherIdentitysCallDoesNotPoisonTheSession(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	own := acq("a", 1, "N", 10*time.Second)
	own.Identity = "A"
	if r := h.acquire(own); !r.Granted { // session a belongs to A
		t.Fatalf("A's acquire: %+v", r)
	}
	if r := h.acquire(acq("m", 1, "M", 10*time.Second)); !r.Granted {
		t.Fatalf("M: %+v", r)
	}
	h.enqueueWaiter(h.ctx(), acq("q", 1, "M", 10*time.Second), time.Minute) // M has a queue
	forged := acq("a", 2, "M", 10*time.Second)
	forged.Identity = "B"
	if r, err := h.l.acquire(h.ctx(), forged, 0); err == nil && r.Granted {
		t.Fatalf("B's call under A's session: %+v", r)
	}
	mine := acq("a", 2, "P", 10*time.Second) // A's own next request, of a free lease
	mine.Identity = "A"
	r, err := h.l.acquire(h.ctx(), mine, 0)
	if err != nil || !r.Granted {
		t.Fatalf("A's acquire (a,2) of the free lease P, after identity B's call named (a,2): %+v %v, want granted", r, err)
	}
}

// Chaos finding F8 (seed 483018969885 at ab781e3, checker linearizable,
// under a slow disk on the leader): a sidecar's first call of an Acquire
// found the lease with nobody queued and proposed it; its entry was slow
// to apply. Others queued meanwhile, and the sidecar's retry of the same
// request id, with no wait left, was refused behind them; then the first
// call's entry applied, the lease free by then, and granted the id: one
// request id, two answers (the grant was given back unused). The retry
// now waits for the first call's outcome and is answered that.
func TestRetryWhileTheFirstCallsEntryIsInFlightGetsItsOutcome(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	w := acq("w", 1, "L", 10*time.Second)
	entered, release := holdNextApply(h)
	first := h.goAcquire(h.ctx(), w, 10*time.Second) // L free, nobody queued: proposes
	select {
	case <-entered:
	case <-time.After(waitTimeout):
		t.Fatal("the first call's entry never reached the FSM")
	}
	h.l.enqueue(h.l.cur, acq("q", 1, "L", 10*time.Second)) // another waiter queues meanwhile
	m := h.events.mark()
	retry := h.goAcquire(h.ctx(), w, 0)
	h.events.wait(t, m, "the retry awaits the first call's proposal", func(e testEvent) bool { return e.what == "awaits proposal" && e.lease == "L" })
	h.pending(retry)
	close(release)
	f, r := h.outcome(first), h.outcome(retry)
	if f.err != nil || !f.res.Granted {
		t.Fatalf("the first call: %+v %v, want granted", f.res, f.err)
	}
	if r.err != nil || !r.res.Granted || r.res.Token != f.res.Token {
		t.Fatalf("the retry of (w,1), whose first call was granted token %d: %+v %v, want that grant", f.res.Token, r.res, r.err)
	}
}
