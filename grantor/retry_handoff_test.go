package grantor

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

// holdNextApply makes the next proposal wait before the FSM (as raft's
// replication would) until release is closed; entered is closed once it
// waits.
func holdNextApply(h *harness) (entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	h.raft.beforeFSM = func() {
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
// gets one answer: the retry waits for that entry and is answered the
// grant it made, so the sidecar gives it back (review 9/12/13 S2).
func TestAbandonedWaiterRetryWithoutWaitGetsTheHandoff(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	a := h.acquire(acq("a", 1, "L", 10*time.Second))
	ctx1, cancel1 := context.WithCancel(h.ctx())
	w := acq("w", 1, "L", 10*time.Second)
	first := h.enqueueWaiter(ctx1, w, time.Minute)
	entered, unblock := holdNextApply(h)
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
	h.raft.beforeFSM = nil
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
// was refused. The office remembers the refusal and answers the late call
// with it, without queueing it (refused.go).
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
	m := h.events.mark()
	late := h.goAcquire(h.ctx(), w, time.Minute) // the first attempt, late
	h.events.wait(t, m, "the late call queued or refused", func(e testEvent) bool {
		return (e.what == "queued" || e.what == "refused again") && e.lease == "L"
	})
	if _, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "a", Seq: 2}, Lease: "L", Owner: "o", Token: a.Token}); err != nil {
		t.Fatal(err)
	}
	if rec, held := h.fsm.lease("L"); held && rec.Session == "w" {
		t.Fatalf("request (w,1), answered refused, was granted token %d by the next release", rec.Token)
	}
	if o := h.outcome(late); o.err == nil && o.res.Granted {
		t.Fatalf("a late call of request (w,1), answered refused, was told granted: %+v", o.res)
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
	m := h.events.mark()
	late := h.goAcquire(h.ctx(), w, time.Minute)
	h.events.wait(t, m, "the late call queued or refused", func(e testEvent) bool {
		return (e.what == "queued" || e.what == "refused again") && e.lease == "L"
	})
	if _, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "a", Seq: 2}, Lease: "L", Owner: "o", Token: a.Token}); err != nil {
		t.Fatal(err)
	}
	if rec, held := h.fsm.lease("L"); held && rec.Session == "w" {
		t.Fatalf("request (w,1), answered refused, was granted token %d by the next release", rec.Token)
	}
	if o := h.outcome(late); o.err != nil || o.res.Granted {
		t.Fatalf("a later call of request (w,1), answered refused, was answered %+v %v", o.res, o.err)
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
	w, ans := h.l.enqueue(h.l.cur, x) // call A's enqueue after its refused proposal
	if ans != nil || w == nil {
		t.Fatalf("enqueue: %v %v", w, ans)
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

// Review 18, finding G-c: the refusals remembered stayed unbounded for a
// session whose refusals came in descending seq order (the per-session
// cap deleted the new, lowest seq and added it all the same). Now each
// identity keeps at most maxRefusedPerIdentity, oldest first, whatever
// the order of the seqs.
func TestRefusalsPerIdentityStayBoundedForDescendingSeqs(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	o := h.l.cur
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	for seq := uint64(maxRefusedPerIdentity + 100); seq > 0; seq-- {
		h.l.rememberRefusalLocked(o, acquireCmd{ID: requestID{Session: "s", Seq: seq}}, &acquireResult{Token: 1})
	}
	ir := o.refused.byIdentity[""]
	if n := len(ir.byID); n > maxRefusedPerIdentity || ir.order.Len() != n || o.refused.all.Len() != n {
		t.Fatalf("%d refusals remembered for one identity (%d in its order, %d in all), maxRefusedPerIdentity %d", n, ir.order.Len(), o.refused.all.Len(), maxRefusedPerIdentity)
	}
	if _, ok := h.l.refusedLocked(o, acquireCmd{ID: requestID{Session: "s", Seq: 1}}); !ok {
		t.Fatal("the newest refusal is not remembered")
	}
}

// BenchmarkRememberRefusalAtTheIdentityCap is the cost, under lessor.mu,
// of one refusal of an identity holding maxRefusedPerIdentity of them (a
// TryLock poller behind a queue: join refuses without an entry).
func BenchmarkRememberRefusalAtTheIdentityCap(b *testing.B) {
	l := newLessor(lessorConfig{clock: clockwatch.NewFake(clockwatch.Instant(1000 * time.Second))}, newFSM(), nil)
	o := &office{}
	seq := uint64(1)
	for ; seq <= maxRefusedPerIdentity; seq++ {
		l.rememberRefusalLocked(o, acquireCmd{ID: requestID{Session: "s", Seq: seq}}, &acquireResult{Token: 1})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l.rememberRefusalLocked(o, acquireCmd{ID: requestID{Session: "s", Seq: seq}}, &acquireResult{Token: 1})
		seq++
	}
}

func refusedCmd(session, identity string, seq uint64) acquireCmd {
	return acquireCmd{ID: requestID{Session: session, Seq: seq}, Lease: "L", Owner: "o", TTL: 10 * time.Second, Identity: identity}
}

// Review 19, R-1: at 2a2c7e8 the office-wide bound counted the refs in
// its order list, not the refusals kept: a TryLock poller at its
// session's cap left a dead ref per refusal, and after 65,536 of them
// each of its refusals forgot the oldest live refusal of every other
// session and identity (at 1,000 a second, after 65 s instead of
// refusedKept). Each identity now keeps its own, one ref per refusal.
func TestOnePollingSessionDoesNotFlushOtherSessionsRefusals(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	o := h.l.cur
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	a := refusedCmd("a", "A", 1)
	h.l.rememberRefusalLocked(o, a, &acquireResult{Token: 1})
	for seq := uint64(1); seq <= maxRefused; seq++ {
		h.l.rememberRefusalLocked(o, refusedCmd("p", "P", seq), &acquireResult{Token: 1})
	}
	if _, ok := h.l.refusedLocked(o, a); !ok {
		t.Fatalf("A's refusal of (a,1) is forgotten after %d refusals of another session and identity", maxRefused)
	}
}

// Review 19, R-2: at 2a2c7e8 refusals were kept per (session, identity)
// but under one budget for the office: a caller of one identity that
// names made-up sessions (a wait-0 Acquire behind a queue is refused
// without an entry and leaves no state in the FSM, R8-2) made the office
// forget every other identity's refusals, and a late first attempt of
// A's refused request was then queued afresh. Each identity now has a
// budget of its own.
func TestAnotherIdentitysRefusalsDoNotFlushTheMemory(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	if r := h.acquire(acq("m", 1, "M", 10*time.Second)); !r.Granted {
		t.Fatalf("M: %+v", r)
	}
	h.enqueueWaiter(h.ctx(), acq("q", 1, "M", 10*time.Second), time.Minute) // M has a queue
	a := acq("a", 1, "M", 10*time.Second)
	a.Identity = "A"
	if r, err := h.l.acquire(h.ctx(), a, 0); err != nil || r.Granted {
		t.Fatalf("A's (a,1): %+v %v", r, err)
	}
	for i := 0; i < maxRefused; i++ {
		c := acq(fmt.Sprintf("b%d", i), 1, "M", 10*time.Second)
		c.Identity = "B"
		if r, err := h.l.acquire(h.ctx(), c, 0); err != nil || r.Granted {
			t.Fatalf("B's call %d: %+v %v", i, r, err)
		}
	}
	h.l.mu.Lock()
	_, ok := h.l.refusedLocked(h.l.cur, a)
	h.l.mu.Unlock()
	if !ok {
		t.Fatalf("A's refusal of (a,1) was forgotten after %d wait-0 calls of identity B under sessions B made up", maxRefused)
	}
}

// Review 19, R-3: at 2a2c7e8 a session kept 256 refusals: a sidecar
// session whose Acquire (a,1) was refused and whose host then had 256
// more refused (TryLock pollers of other names, a few seconds at 100/s)
// forgot (a,1), and a late first attempt of it was queued afresh and
// granted by the next release (G1).
func TestSessionsOwnRefusalSurvivesItsNext256Refusals(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	o := h.l.cur
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	first := refusedCmd("a", "A", 1)
	h.l.rememberRefusalLocked(o, first, &acquireResult{Token: 1})
	for seq := uint64(2); seq <= 257; seq++ {
		h.l.rememberRefusalLocked(o, refusedCmd("a", "A", seq), &acquireResult{Token: 1})
	}
	if _, ok := h.l.refusedLocked(o, first); !ok {
		t.Fatalf("(a,1)'s refusal forgotten after 256 later refusals of its session")
	}
}

// Review 20, R20-1: at 0f0d998 refusals were expired only on their own
// identity's next call: an identity refused and then quiet (a host gone,
// a certificate renamed on rotation) kept its refusals for the life of
// the office, not refusedKept, and a fleet's churn grew the memory
// without bound. Expiry now runs over the office's refusals in answer
// order on every call.
func TestQuietIdentitysRefusalsAreForgottenAfterRefusedKept(t *testing.T) {
	clock := clockwatch.NewFake(clockwatch.Instant(1000 * time.Second))
	l := newLessor(lessorConfig{clock: clock}, newFSM(), nil)
	o := &office{}
	l.mu.Lock()
	for seq := uint64(1); seq <= 100; seq++ {
		l.rememberRefusalLocked(o, refusedCmd("a", "A", seq), &acquireResult{Token: 1})
	}
	l.mu.Unlock()
	clock.Advance(refusedKept + time.Second)
	l.mu.Lock()
	defer l.mu.Unlock()
	for seq := uint64(1); seq <= 100; seq++ {
		c := refusedCmd("b", "B", seq)
		l.rememberRefusalLocked(o, c, &acquireResult{Token: 1})
		l.refusedLocked(o, c)
	}
	if ir := o.refused.byIdentity["A"]; ir != nil && ir.order.Len() > 0 {
		t.Fatalf("identity A, quiet since, still has %d refusals remembered %v after they were given (refusedKept %v)", ir.order.Len(), refusedKept+time.Second, refusedKept)
	}
}

// BenchmarkRefusalMemoryBytesPerRefusal reports the heap one remembered
// refusal takes (64-byte session ids, the longest validSession allows;
// 64 identities, the office full).
func BenchmarkRefusalMemoryBytesPerRefusal(b *testing.B) {
	l := newLessor(lessorConfig{clock: clockwatch.NewFake(clockwatch.Instant(1000 * time.Second))}, newFSM(), nil)
	o := &office{}
	const n = maxRefused
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	l.mu.Lock()
	for i := 0; i < n; i++ {
		s := fmt.Sprintf("%064d", i)
		l.rememberRefusalLocked(o, refusedCmd(s, fmt.Sprint("host", i%64), 1), &acquireResult{Token: 1, Limit: 1, Holders: 1, HolderName: "holder"})
	}
	l.mu.Unlock()
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	b.ReportMetric(float64(ms1.HeapAlloc-ms0.HeapAlloc)/n, "B/refusal")
	runtime.KeepAlive(o)
}

// fillBehindOne gives identity A one refusal, then 65,535 of 16 other
// identities (each under its own cap), so the office is full with A's
// only refusal oldest, and then refuses A a second request id.
func fillBehindOne(l *lessor, o *office) acquireCmd {
	l.rememberRefusalLocked(o, refusedCmd("a", "A", 1), &acquireResult{Token: 1})
	for n := 0; n < maxRefused-1; n++ {
		i := n / maxRefusedPerIdentity
		l.rememberRefusalLocked(o, refusedCmd(fmt.Sprint("h", i), fmt.Sprint("H", i), uint64(n)), &acquireResult{Token: 1})
	}
	second := refusedCmd("a", "A", 2)
	l.rememberRefusalLocked(o, second, &acquireResult{Token: 1})
	return second
}

// Review 21: the office-wide eviction of an identity's only refusal, when
// that identity is refused again, took its entry away while the new
// refusal went into the entry read before (d9fc9f8): the new refusal was
// never found, and forgetting it later dereferenced the missing entry,
// which stopped the leader on any call once it expired.
func TestOfficeWideEvictionOfOwnLastKeepsNewRefusal(t *testing.T) {
	clock := clockwatch.NewFake(clockwatch.Instant(1000 * time.Second))
	l := newLessor(lessorConfig{clock: clock}, newFSM(), nil)
	o := &office{}
	l.mu.Lock()
	defer l.mu.Unlock()
	second := fillBehindOne(l, o)
	if _, ok := l.refusedLocked(o, second); !ok {
		t.Fatalf("A's refusal of (a,2), just given, is not found (byIdentity[A]=%v, all %d)", o.refused.byIdentity["A"], o.refused.all.Len())
	}
}

func TestExpiringRefusalAfterOfficeWideEvictionDoesNotPanic(t *testing.T) {
	clock := clockwatch.NewFake(clockwatch.Instant(1000 * time.Second))
	l := newLessor(lessorConfig{clock: clock}, newFSM(), nil)
	o := &office{}
	l.mu.Lock()
	defer l.mu.Unlock()
	fillBehindOne(l, o)
	clock.Advance(refusedKept + time.Second)
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("expiring the refusals panics: %v", p)
		}
	}()
	l.refusedLocked(o, refusedCmd("b", "B", 1))
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
