package grantor

import (
	"fmt"
	"testing"
	"time"
)

// Review finding R8-2: each refused Acquire under a fresh session id left
// a session record in every replica's FSM (and a state at the leader) for
// SessionIdleTimeout (before the fix: 20,000 refused acquires left 20,001
// records). A refusal without wait is now its request's outcome and is
// remembered (outcome.go), in the session's record, which lasts only the
// session's own term once it holds nothing: past it, only the holder's
// record and state remain.
func TestRefusedAcquiresUnderFreshSessionsLeaveNoSessions(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	o, err := h.l.await(h.ctx())
	if err != nil {
		t.Fatal(err)
	}
	holder := acq("victim", 1, "popular", time.Hour)
	holder.Identity = "h1"
	if r := h.acquire(holder); !r.Granted {
		t.Fatalf("%+v", r)
	}
	const n = 2000
	for i := 0; i < n; i++ {
		c := acq(fmt.Sprintf("attacker-%d", i), 5, "popular", 10*time.Second)
		c.ID.FirstUnacked = 5
		c.Identity = "evil"
		c.Limit = DefaultMaxLeases
		if r := h.acquire(c); r.Granted || !r.Final {
			t.Fatalf("%+v, want refused for good", r)
		}
	}
	closeAt := h.l.timing.GrantorExpiry(h.clock.Now(), 10*time.Second)
	m := h.events.mark()
	h.advanceTo(closeAt)
	h.events.wait(t, m, "the refused sessions closed", func(testEvent) bool { return len(h.fsm.sessions()) == 1 })
	got := len(h.fsm.sessions())
	h.l.mu.Lock()
	states := len(o.sessions)
	h.l.mu.Unlock()
	t.Logf("%d refused acquires under fresh sessions: %d session records in the FSM, %d states at the leader after their term", n, got, states)
	if got != 1 || states != 1 {
		t.Fatalf("refused acquires left %d records in the FSM and %d states at the leader past their term, want only the holder's", got, states)
	}
}

// The record is dropped only by cmdAcquire6 (replicas that apply an older
// type keep it, as they did), only for a session the entry opened, and
// never when the session got something to remember.
func TestDropEmptySessionOnlyInAcquire6(t *testing.T) {
	f := newTestFSM()
	f.acquire(t, "victim", 1, "popular", "o")
	refused := func(t cmdType, session string, seq uint64) {
		c := acquireCmd{ID: requestID{Session: session, Seq: seq}, Lease: "popular", Owner: "x", TTL: 10 * time.Second, Identity: "evil"}
		f.apply(t, c)
	}
	refused(cmdAcquire5, "old", 1)
	if !f.hasSession("old") {
		t.Fatal("a cmdAcquire5 refusal dropped its session: replicas of older versions would differ")
	}
	refused(cmdAcquire6, "new", 1)
	if f.hasSession("new") {
		t.Fatal("a cmdAcquire6 refusal kept the session it opened")
	}
	refused(cmdAcquire6, "old", 2)
	if !f.hasSession("old") {
		t.Fatal("a refusal dropped a session an earlier entry opened")
	}
	if r, ok := f.apply(cmdAcquire6, acquireCmd{ID: requestID{Session: "new", Seq: 1}, Lease: "free", Owner: "x", TTL: 10 * time.Second, Identity: "evil"}).(*acquireResult); !ok || !r.Granted {
		t.Fatalf("acquire of a free lease: %+v", r)
	}
	if !f.hasSession("new") {
		t.Fatal("a granting cmdAcquire6 kept no session")
	}
}

// R8-2, through Release: a release under a session nobody opened could
// free nothing but its entry opened a session record (an outcome to
// remember) kept for an hour. It is answered not released, with no entry
// and no record; a release under a known session still releases.
func TestReleaseUnderUnknownSessionsLeavesNoSessions(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	o, err := h.l.await(h.ctx())
	if err != nil {
		t.Fatal(err)
	}
	g := h.acquire(acq("victim", 1, "popular", 10*time.Second))
	if !g.Granted {
		t.Fatalf("%+v", g)
	}
	const n = 2000
	for i := 0; i < n; i++ {
		r, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: fmt.Sprintf("attacker-%d", i), Seq: 1}, Lease: "popular", Owner: "o", Token: g.Token, Identity: "evil"})
		if err != nil || r.Released {
			t.Fatalf("release under an unknown session: %+v, %v", r, err)
		}
	}
	got := len(h.fsm.sessions())
	h.l.mu.Lock()
	states := len(o.sessions)
	h.l.mu.Unlock()
	if got != 1 || states != 1 {
		t.Fatalf("releases under unknown sessions left %d records in the FSM and %d states at the leader, want only the holder's", got, states)
	}
	r, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "victim", Seq: 2}, Lease: "popular", Owner: "o", Token: g.Token})
	if err != nil || !r.Released {
		t.Fatalf("the holder's release: %+v, %v", r, err)
	}
}
