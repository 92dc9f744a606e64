package grantor

import (
	"strings"
	"testing"
	"time"
)

// Issue 22, chaos seed 506290559812: one request id, two answers. Session
// s is granted L (token 1) and the reply is lost; s goes silent (a
// partition), so its grant expires and L goes to t (token 2). s holds
// nothing now, and the leader forgot its record a term after it was last
// seen: the retry of (s,1) that came after the heal was judged afresh and
// answered "held by 2" (the chaos run's op s2c2.1.5: granted 22, answered
// held by 30); had L been free, it would have been granted again, a
// second grant of one request (the run op granted 50 and 63). The record
// of a session that remembers a grant must last as long as a retry can
// still come: the retry is answered the grant it had, ended.
func TestRetryAfterTheSessionWentQuietGetsItsOutcome(t *testing.T) {
	for _, free := range []bool{false, true} {
		name := "L held by another"
		if free {
			name = "L free again"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.takeOffice()
			const ttl = 2 * time.Second
			first := acq("s", 1, "L", ttl)
			g := h.acquire(first)
			if !g.Granted {
				t.Fatalf("%+v", g)
			}
			// s is silent: its grant expires and t takes L.
			m := h.events.mark()
			h.advanceTo(h.l.timing.GrantorExpiry(h.clock.Now(), ttl))
			h.events.wait(t, m, "s's grant expired", func(e testEvent) bool { return e.what == "applied expire-session2" })
			other := h.acquire(acq("t", 1, "L", time.Hour))
			if !other.Granted {
				t.Fatalf("t's acquire after s's grant expired: %+v", other)
			}
			if free {
				if r, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "t", Seq: 2}, Lease: "L", Owner: "o", Token: other.Token}); err != nil || !r.Released {
					t.Fatalf("t's release: %+v %v", r, err)
				}
			}
			// s stays silent for longer than its term, as long as the
			// partition lasts, until the leader decided what becomes of
			// its record.
			m = h.events.mark()
			for range 4 {
				h.advanceTo(h.l.timing.GrantorExpiry(h.clock.Now(), ttl))
			}
			h.events.wait(t, m, "s's record closed or kept", func(e testEvent) bool {
				return strings.HasPrefix(e.what, "applied close-session") && !h.fsm.hasSession("s") || e.what == "outcomes kept" && e.lease == "s"
			})
			r := h.acquire(first) // the retry, after the heal
			if r.Granted || !r.Ended || r.Token != g.Token {
				t.Fatalf("the retry of (s,1) after s was quiet: %+v, want the outcome it had: token %d, granted and ended", r, g.Token)
			}
			if free {
				if rec, held := h.fsm.lease("L"); held {
					t.Fatalf("the retry of (s,1) granted L again: %+v", rec)
				}
			}
		})
	}
}

// The close of a session is decided in the replicated state: a
// cmdCloseSession2 closes only a session that holds nothing and whose
// record remembers no grant or release, unless the leader kept it for
// outcomeKeep (Kept); whatever the leader decided, a request applied
// between its decision and the close keeps its answer. A cmdCloseSession
// closes as it always did (replicas of older versions apply it so).
func TestFSMCloseSession2KeepsAnswersAndHolders(t *testing.T) {
	f := newTestFSM()
	f.acquire(t, "holder", 1, "a", "o")
	g := f.acquire(t, "answered", 1, "b", "o")
	if !f.release(t, "answered", 2, "b", "o", g.Token) {
		t.Fatal("release said not released")
	}
	refused := acquireCmd{ID: requestID{Session: "refused", Seq: 1}, Lease: "a", Owner: "o", TTL: 10 * time.Second, Final: true}
	if r := f.apply(cmdAcquire8, refused).(*acquireResult); r.Granted || !r.Final {
		t.Fatalf("%+v, want refused for good", r)
	}
	closeS := func(session string, kept bool) bool {
		f.apply(cmdCloseSession2, closeSessionCmd{Session: session, Kept: kept})
		return !f.hasSession(session)
	}
	if closeS("holder", true) {
		t.Fatal("a session that holds a lease was closed")
	}
	if closeS("answered", false) {
		t.Fatal("a record that remembers a grant and a release was closed before the leader kept it")
	}
	if !closeS("refused", false) {
		t.Fatal("a record that remembers a refusal only was kept (review R8-2)")
	}
	if !closeS("answered", true) {
		t.Fatal("a record kept for outcomeKeep was not closed")
	}
	f.apply(cmdCloseSession, closeSessionCmd{Session: "holder"})
	if f.hasSession("holder") {
		t.Fatal("cmdCloseSession kept a record: replicas of older versions close it")
	}
	if got, want := string(encodeCmd(cmdCloseSession2, closeSessionCmd{Session: "s", Kept: true})), "\x19"+`{"session":"s","kept":true}`; got != want {
		t.Fatalf("cmdCloseSession2 encodes as %q, want %q", got, want)
	}
}
