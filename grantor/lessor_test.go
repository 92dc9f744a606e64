package grantor

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Rule: the grantor expires a grant at tG + d(1+rho) + eps, tG read after
// the grant was applied, and never frees it earlier: not to a waiter, not to
// anyone.
func TestLessorNeverFreesBeforeGrantorExpiry(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = 10 * time.Second
	tG := h.clock.Now()
	first := h.acquire(acq("s1", 1, "a", ttl))
	if !first.Granted {
		t.Fatalf("first acquire: %+v", first)
	}
	exp := h.timing.GrantorExpiry(tG, ttl)

	waiter := h.enqueueWaiter(h.ctx(), acq("s2", 1, "a", ttl), time.Hour)
	if r := h.acquire(acq("s3", 1, "a", ttl)); r.Granted || r.Token != first.Token {
		t.Fatalf("acquire by a third party while held: %+v", r)
	}

	h.advanceTo(exp - 1)
	if got := h.held("a"); got != first.Token {
		t.Fatalf("one nanosecond before tG+d(1+rho)+eps the lease is held with %d, want %d", got, first.Token)
	}
	h.pending(waiter)

	h.advanceTo(exp)
	o := h.outcome(waiter)
	if o.err != nil || !o.res.Granted || o.res.Token != first.Token+1 {
		t.Fatalf("waiter after expiry: %+v %v, want granted with token %d", o.res, o.err, first.Token+1)
	}
}

// Rule: tG is read after the grant was applied; later is safer. Here the
// apply takes 2s to be reported back, and the expiry counts from then.
func TestLessorGrantExpiryCountsFromAfterApply(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl, applyTakes = 10 * time.Second, 2 * time.Second
	h.raft.afterFSM = func() { advance(h.l, h.clock, applyTakes) }
	t0 := h.clock.Now()
	if r := h.acquire(acq("s1", 1, "a", ttl)); !r.Granted {
		t.Fatal(r)
	}
	h.raft.afterFSM = nil
	exp := h.timing.GrantorExpiry(t0.Add(applyTakes), ttl)
	h.advanceTo(exp - 1)
	if h.held("a") != 1 {
		t.Fatal("expiry counted from before the apply was reported")
	}
	m := h.events.mark()
	h.advanceTo(exp)
	h.events.wait(t, m, "revoke", isExpiry)
}

// Rule: a new leader first applies the older terms (barrier), then reads
// tE and keeps every lease in the FSM live until tE + d(1+rho) + eps,
// however old its grant is.
func TestLessorNewLeaderWaitsOutOldTerms(t *testing.T) {
	h := newHarness(t)
	const ttl = 10 * time.Second
	// Two grants from earlier terms, applied while this node followed.
	h.raft.leader.Store(true)
	for _, c := range []acquireCmd{acq("s1", 1, "a", ttl), acq("s1", 2, "b", ttl)} {
		if r, _ := h.raft.apply(encodeCmd(cmdAcquire, c)); !r.(*acquireResult).Granted {
			t.Fatal("setup grant failed")
		}
	}
	h.clock.Advance(time.Minute) // far past those grants' own expiries

	// The barrier applies an old-term Revoke of b and takes a while.
	const barrierTakes = 3 * time.Second
	h.raft.barrierFn = func() error {
		h.raft.mu.Lock()
		h.raft.index++
		h.fsm.Apply(rlog{h.raft.index, encodeCmd(cmdRevoke, revokeCmd{Lease: "b", Token: 2})}.log())
		h.raft.mu.Unlock()
		h.clock.Advance(barrierTakes)
		return nil
	}
	tBefore := h.clock.Now()
	h.takeOffice()
	tE := tBefore.Add(barrierTakes) // read after the barrier
	exp := h.timing.GrantorExpiry(tE, ttl)

	if r := h.acquire(acq("s2", 1, "b", ttl)); !r.Granted || r.Token != 3 {
		t.Fatalf("b was revoked in an old term and should be free: %+v", r)
	}
	if r := h.acquire(acq("s2", 2, "a", ttl)); r.Granted {
		t.Fatalf("a granted to another session while the old term is not waited out: %+v", r)
	}
	h.advanceTo(exp - 1)
	if h.held("a") != 1 {
		t.Fatal("a freed before tE + d(1+rho) + eps")
	}
	m := h.events.mark()
	h.advanceTo(exp)
	h.events.wait(t, m, "the expiry of a", func(e testEvent) bool { return isExpiry(e) && h.held("a") == 0 })
	if r := h.acquire(acq("s2", 3, "a", ttl)); !r.Granted || r.Token != 4 {
		t.Fatalf("after the wait-out a should go to s2 with token 4: %+v", r)
	}
}

// Rule: during the wait-out the holder may renew; its renewal then counts
// from the renewal's tG.
func TestLessorHolderRenewsDuringWaitOut(t *testing.T) {
	h := newHarness(t)
	const ttl = 10 * time.Second
	h.raft.leader.Store(true)
	h.raft.apply(encodeCmd(cmdAcquire, acq("s1", 1, "a", ttl)))
	h.takeOffice()
	exp := h.timing.GrantorExpiry(h.clock.Now(), ttl)

	h.advanceTo(exp.Add(-time.Second))
	tG := h.clock.Now()
	o, _ := h.l.await(h.ctx())
	res, err := h.l.renew(h.ctx(), o, "s1", []leaseRef{{Lease: "a", Token: 1}, {Lease: "nope", Token: 9}})
	if err != nil || len(res.renewed) != 1 || len(res.lost) != 1 || res.tG != tG {
		t.Fatalf("renew: %+v %v", res, err)
	}
	h.advanceTo(exp)
	h.advanceTo(h.timing.GrantorExpiry(tG, ttl) - 1)
	if h.held("a") != 1 {
		t.Fatal("renewed lease freed before its renewal's expiry")
	}
	m := h.events.mark()
	h.advanceTo(h.timing.GrantorExpiry(tG, ttl))
	h.events.wait(t, m, "revoke", isExpiry)
	if h.held("a") != 0 {
		t.Fatal("not revoked at the renewal's expiry")
	}
}

// Rule: the Clock decides, timers only wake. After a suspend (BOOTTIME
// jumps, no timer fires) a renewal of an expired grant is refused at once,
// and the expiry loop revokes on its next wake-up.
func TestLessorSuspendPastExpiry(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = 5 * time.Second
	h.acquire(acq("s1", 1, "a", ttl))
	m := h.events.mark()
	h.clock.Suspend(time.Minute)
	o, _ := h.l.await(h.ctx())
	res, err := h.l.renew(h.ctx(), o, "s1", []leaseRef{{Lease: "a", Token: 1}})
	if err != nil || len(res.renewed) != 0 || len(res.lost) != 1 {
		t.Fatalf("renewal after suspend past expiry: %+v %v, want lost", res, err)
	}
	// The refused renewal pokes the expiry loop; failing that, its next
	// wake-up (at most maxExpirySleep of monotonic time) revokes.
	h.clock.Advance(maxExpirySleep)
	h.events.wait(t, m, "revoke", isExpiry)
}

// Rule: one VerifyLeader round per batch, started after the batch arrived;
// renewals that arrive during a round wait for the next; tG is read after
// the round returned.
func TestLessorKeepAliveBatching(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = time.Minute
	for i, s := range []string{"s1", "s2", "s3", "s4"} {
		h.acquire(acq(s, 1, "l"+s, ttl))
		_ = i
	}
	started := make(chan int64)
	gate := make(chan struct{})
	h.raft.verify = func(round int64) error {
		started <- round
		<-gate
		return nil
	}
	o, _ := h.l.await(h.ctx())
	type out struct {
		res renewResult
		err error
	}
	renew := func(s string) <-chan out {
		ch := make(chan out, 1)
		go func() {
			r, err := h.l.renew(h.ctx(), o, s, []leaseRef{{Lease: "l" + s, Token: h.held("l" + s)}})
			ch <- out{r, err}
		}()
		return ch
	}
	m := h.events.mark()
	r1 := renew("s1")
	if round := <-started; round != 1 {
		t.Fatalf("round %d", round)
	}
	// Three more arrive while round 1 is in flight. Four "pending"
	// events (r1's may come after round 1 started) mean all are queued.
	later := []<-chan out{renew("s2"), renew("s3"), renew("s4")}
	for range 4 {
		m = h.events.wait(t, m, "renewal pending", func(e testEvent) bool { return e.what == "pending" })
	}
	gate <- struct{}{}
	if o := <-r1; o.err != nil || len(o.res.renewed) != 1 {
		t.Fatalf("r1: %+v %v", o.res, o.err)
	}
	if round := <-started; round != 2 {
		t.Fatalf("round %d", round)
	}
	h.clock.Advance(2 * time.Second) // the quorum round takes a while
	tG := h.clock.Now()
	gate <- struct{}{}
	for i, ch := range later {
		o := <-ch
		if o.err != nil || len(o.res.renewed) != 1 || o.res.tG != tG {
			t.Fatalf("renewal %d: %+v %v, want renewed at tG %v read after the round", i+2, o.res, o.err, tG)
		}
	}
	if got := h.raft.verifies.Load(); got != 2 {
		t.Fatalf("%d VerifyLeader rounds for 2 batches", got)
	}
}

// Rule: a leader that fails VerifyLeader acknowledges nothing, and the
// grant keeps its old expiry.
func TestLessorFailedVerifyAcknowledgesNothing(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = 10 * time.Second
	exp := h.timing.GrantorExpiry(h.clock.Now(), ttl)
	h.acquire(acq("s1", 1, "a", ttl))
	h.raft.verify = func(int64) error { return h.raft.notLeader() }
	o, _ := h.l.await(h.ctx())
	h.advanceTo(h.clock.Now().Add(5 * time.Second))
	if res, err := h.l.renew(h.ctx(), o, "s1", []leaseRef{{Lease: "a", Token: 1}}); !isNotLeader(err) {
		t.Fatalf("renew with failed verify: %+v %v, want NotLeader", res, err)
	}
	m := h.events.mark()
	h.advanceTo(exp)
	h.events.wait(t, m, "revoke at the unrenewed expiry", isExpiry)
}

// Rule: waiters are served first come first served, one wake-up at a time.
func TestLessorWaitersFirstComeFirstServed(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = time.Minute
	held := h.acquire(acq("s0", 1, "a", ttl))
	w1 := h.enqueueWaiter(h.ctx(), acq("s1", 1, "a", ttl), time.Hour)
	w2 := h.enqueueWaiter(h.ctx(), acq("s2", 1, "a", ttl), time.Hour)

	if r, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "s0", Seq: 2}, Lease: "a", Owner: "o", Token: held.Token}); err != nil || !r.Released {
		t.Fatalf("release: %+v %v", r, err)
	}
	o1 := h.outcome(w1)
	if o1.err != nil || !o1.res.Granted || o1.res.Token != held.Token+1 {
		t.Fatalf("first waiter: %+v %v", o1.res, o1.err)
	}
	h.pending(w2)
	if r, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "s1", Seq: 2}, Lease: "a", Owner: "o", Token: o1.res.Token}); err != nil || !r.Released {
		t.Fatalf("release: %+v %v", r, err)
	}
	if o2 := h.outcome(w2); o2.err != nil || !o2.res.Granted || o2.res.Token != held.Token+2 {
		t.Fatalf("second waiter: %+v %v", o2.res, o2.err)
	}
}

// Rule: a waiter whose context ends leaves the queue and passes the
// wake-up on. This is the wake-up path of clusters with older grantors,
// where a waiter proposes its own Acquire (no handoff entries).
func TestLessorLeavingWaiterPassesWakeUpOn(t *testing.T) {
	h := newHarness(t)
	h.raft.allowCmd.Store(uint32(cmdRelease3))
	h.takeOffice()
	const ttl = time.Minute
	held := h.acquire(acq("s0", 1, "a", ttl))
	ctx1, cancel1 := context.WithCancel(h.ctx())
	w1 := h.enqueueWaiter(ctx1, acq("s1", 1, "a", ttl), time.Hour)
	w2 := h.enqueueWaiter(h.ctx(), acq("s2", 1, "a", ttl), time.Hour)
	// Hold the lease's proposal slot, so that the woken head cannot
	// propose before its context ends.
	slot := h.l.slot("a")
	slot <- struct{}{}
	h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "s0", Seq: 2}, Lease: "a", Owner: "o", Token: held.Token})
	cancel1()
	if o1 := h.outcome(w1); o1.err != context.Canceled {
		t.Fatalf("canceled head: %+v %v", o1.res, o1.err)
	}
	<-slot
	if o2 := h.outcome(w2); o2.err != nil || !o2.res.Granted || o2.res.Token != held.Token+1 {
		t.Fatalf("second waiter after the head left: %+v %v", o2.res, o2.err)
	}
}

// Rule: when the wait runs out, the answer is "not granted" with the
// holder's token.
func TestLessorWaitRunsOut(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	held := h.acquire(acq("s0", 1, "a", time.Minute))
	w := h.enqueueWaiter(h.ctx(), acq("s1", 1, "a", time.Minute), 5*time.Second)
	h.clock.Advance(5*time.Second - 1)
	h.pending(w)
	h.clock.Advance(1)
	o := h.outcome(w)
	if o.err != nil || o.res.Granted || o.res.Token != held.Token {
		t.Fatalf("wait ran out: %+v %v, want not granted naming token %d", o.res, o.err, held.Token)
	}
	h.l.mu.Lock()
	q := len(h.l.cur.queues["a"])
	h.l.mu.Unlock()
	if q != 0 {
		t.Fatalf("%d waiters left in the queue", q)
	}
}

// Rule: on losing leadership the lessor state is dropped and waiting
// calls and renewals fail with NotLeader.
func TestLessorResignFailsWaiters(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	h.acquire(acq("s0", 1, "a", time.Minute))
	w := h.enqueueWaiter(h.ctx(), acq("s1", 1, "a", time.Minute), time.Hour)
	gate := make(chan struct{})
	started := make(chan struct{})
	h.raft.verify = func(int64) error { close(started); <-gate; return nil }
	o, _ := h.l.await(h.ctx())
	renewed := make(chan error, 1)
	go func() {
		_, err := h.l.renew(h.ctx(), o, "s0", []leaseRef{{Lease: "a", Token: 1}})
		renewed <- err
	}()
	<-started
	h.raft.leader.Store(false)
	h.l.leadershipChanged(false)
	close(gate)
	if o := h.outcome(w); !isNotLeader(o.err) {
		t.Fatalf("waiter: %+v %v, want NotLeader", o.res, o.err)
	}
	if err := <-renewed; !isNotLeader(err) {
		t.Fatalf("renewal in flight during resign: %v, want NotLeader", err)
	}
	if _, err := h.l.acquire(h.ctx(), acq("s2", 1, "b", time.Minute), 0); !isNotLeader(err) {
		t.Fatalf("acquire after resign: %v", err)
	}
}

// Rule (issue 21): a session that holds nothing is forgotten after its
// own term (as its grants would run, from when it was last seen), not
// after SessionIdleTimeout; a session whose term this office never saw
// (opened under an earlier leader) after SessionIdleTimeout. A session
// that holds a lease is kept. Issue 22: a record that remembers a grant
// or a release its sidecar has not acknowledged is kept outcomeKeep after
// the session was last seen (a retry of that request may still come),
// whichever of the two it is.
func TestLessorForgetsIdleSessionsAfterTheirTerm(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	h.acquire(acq("holder", 1, "b", time.Minute))
	// idle acknowledged the grant and the release it was answered (its
	// next request's first_unacked): it remembers a refusal only.
	r := h.acquire(acq("idle", 1, "a", time.Minute))
	h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "idle", Seq: 2}, Lease: "a", Owner: "o", Token: r.Token})
	refused := acq("idle", 3, "b", time.Minute)
	refused.ID.FirstUnacked = 3
	if r := h.acquire(refused); r.Granted || !r.Final {
		t.Fatalf("%+v, want refused for good", r)
	}
	// unacked did not: its release's reply may have been lost.
	u := h.acquire(acq("unacked", 1, "c", time.Minute))
	h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "unacked", Seq: 2}, Lease: "c", Owner: "o", Token: u.Token})
	closeAt := h.l.timing.GrantorExpiry(h.clock.Now(), time.Minute)
	keepAt := h.clock.Now().Add(h.l.outcomeKeep())
	// A session the FSM knows and this office has not seen: its term is
	// unknown here.
	h.fsm.mu.Lock()
	h.fsm.putSession("unseen", &sessionRecord{Outcomes: map[uint64]outcome{1: {Kind: cmdAcquire, Lease: "c", Refused: true}}})
	h.fsm.mu.Unlock()
	o, _ := h.l.await(h.ctx())
	h.l.mu.Lock()
	o.sessionLocked("unseen").last = h.clock.Now()
	h.l.mu.Unlock()
	m := h.events.mark()
	renewHolder := func() {
		t.Helper()
		if res, err := h.l.renew(h.ctx(), o, "holder", []leaseRef{{Lease: "b", Token: 1}}); err != nil || len(res.renewed) != 1 {
			t.Fatalf("renew: %+v %v", res, err)
		}
	}
	h.advanceTo(closeAt.Add(-time.Millisecond))
	renewHolder()
	if !h.fsm.hasSession("idle") {
		t.Fatal("the idle session was forgotten before its term ran out")
	}
	h.advanceTo(closeAt)
	h.events.wait(t, m, "close-session", func(e testEvent) bool { return strings.HasPrefix(e.what, "applied close-session") })
	if h.fsm.hasSession("idle") || !h.fsm.hasSession("unseen") || !h.fsm.hasSession("unacked") {
		t.Fatalf("after the idle session's term: idle kept %v, unseen kept %v, unacked kept %v; want unseen and unacked only",
			h.fsm.hasSession("idle"), h.fsm.hasSession("unseen"), h.fsm.hasSession("unacked"))
	}
	for h.clock.Now().Before(closeAt.Add(h.l.sessionIdle)) {
		h.advanceTo(h.clock.Now().Add(20 * time.Second))
		renewHolder()
	}
	h.advanceTo(h.clock.Now().Add(20 * time.Second))
	renewHolder()
	if h.fsm.hasSession("unseen") {
		h.events.wait(t, m, "close-session", func(e testEvent) bool {
			return strings.HasPrefix(e.what, "applied close-session") && !h.fsm.hasSession("unseen")
		})
	}
	if !h.fsm.hasSession("unacked") {
		t.Fatal("a record that remembers a release was forgotten before outcomeKeep")
	}
	for h.clock.Now().Before(keepAt) {
		h.advanceTo(h.clock.Now().Add(20 * time.Second))
		renewHolder()
	}
	h.advanceTo(h.clock.Now().Add(time.Minute))
	if h.fsm.hasSession("unacked") {
		h.events.wait(t, m, "close-session", func(e testEvent) bool {
			return strings.HasPrefix(e.what, "applied close-session") && !h.fsm.hasSession("unacked")
		})
	}
	if !h.fsm.hasSession("holder") {
		t.Fatal("session that holds a lease was forgotten")
	}
}

// Rule (docs/design.md section 2, and section 4 for the grantor's own stalls):
// a leader that stalls acknowledges nothing that queued up during the
// stall on the strength of a round that began before it. Here the stall
// is a VerifyLeader round that hangs (the process stopped mid-round);
// renewals arrive meanwhile; the round then succeeds, yet only the
// renewal that was there before it started is acknowledged. The others
// wait for a round that starts after they arrived, and when that round
// fails (a successor was elected during the stall) they get NotLeader.
func TestLessorStallAcknowledgesNothingQueuedWithoutAFreshRound(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = time.Minute
	sessions := []string{"s1", "s2", "s3"}
	for _, s := range sessions {
		h.acquire(acq(s, 1, "l"+s, ttl))
	}
	type round struct {
		n       int64
		pending int // renewals queued before the round started
	}
	started := make(chan round)
	gate := make(chan error)
	h.raft.verify = func(n int64) error {
		started <- round{n, h.events.count("pending")}
		return <-gate
	}
	o, _ := h.l.await(h.ctx())
	type out struct {
		res renewResult
		err error
	}
	renew := func(s string) <-chan out {
		ch := make(chan out, 1)
		go func() {
			r, err := h.l.renew(h.ctx(), o, s, []leaseRef{{Lease: "l" + s, Token: h.held("l" + s)}})
			ch <- out{r, err}
		}()
		return ch
	}
	m := h.events.mark()
	r1 := renew("s1")
	m = h.events.wait(t, m, "s1 pending", func(e testEvent) bool { return e.what == "pending" })
	if r := <-started; r.n != 1 {
		t.Fatalf("round %+v, want round 1", r)
	}
	// The stall: round 1 hangs while the clock runs and two more batches
	// arrive.
	h.clock.Advance(30 * time.Second)
	during := []<-chan out{renew("s2"), renew("s3")}
	for range 2 {
		m = h.events.wait(t, m, "renewal pending during the stall", func(e testEvent) bool { return e.what == "pending" })
	}
	gate <- nil // round 1 returns: still leader as of its start
	if o := <-r1; o.err != nil || len(o.res.renewed) != 1 || o.res.tG != h.clock.Now() {
		t.Fatalf("s1, queued before round 1: %+v %v, want renewed at tG after the stall", o.res, o.err)
	}
	for _, ch := range during {
		select {
		case o := <-ch:
			t.Fatalf("a renewal queued during the stall was answered by the round that began before it: %+v %v", o.res, o.err)
		default:
		}
	}
	r := <-started
	if r.n != 2 || r.pending != 3 {
		t.Fatalf("round %+v, want round 2 started after all three renewals", r)
	}
	gate <- h.raft.notLeader() // a successor was elected during the stall
	for i, ch := range during {
		if o := <-ch; !isNotLeader(o.err) || len(o.res.renewed) != 0 {
			t.Fatalf("renewal %d queued during the stall: %+v %v, want NotLeader and nothing renewed", i+2, o.res, o.err)
		}
	}
}
