package grantor

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func semAcq(session string, seq uint64, lease string, limit int) acquireCmd {
	c := acq(session, seq, lease, 10*time.Second)
	c.MaxHolders = limit
	return c
}

// Rule: a semaphore of limit N grants up to N holders, each with the next
// token; the N+1th is refused with the oldest holder's token; tokens only
// grow per name.
func TestSemaphoreGrantsUpToLimitEachWithItsToken(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	var last uint64
	for i, s := range []string{"s1", "s2", "s3"} {
		r := h.acquire(semAcq(s, 1, "sem", 3))
		if !r.Granted || r.Token <= last || r.Limit != 3 || r.Holders != i+1 {
			t.Fatalf("holder %d: %+v (previous token %d)", i+1, r, last)
		}
		last = r.Token
	}
	r := h.acquire(semAcq("s4", 1, "sem", 3))
	if r.Granted || r.Limit != 3 || r.Holders != 3 {
		t.Fatalf("fourth holder of a semaphore of 3: %+v", r)
	}
	if first := h.acquire(semAcq("s1", 1, "sem", 3)); r.Token != first.Token {
		t.Fatalf("refusal names token %d, the oldest holder has %d", r.Token, first.Token)
	}
	if n := h.fsm.leaseCount(); n != 3 {
		t.Fatalf("%d grants stand, want 3", n)
	}
}

// Rule: a request with another limit than the one in force gets an
// invalid-argument error naming both, and changes nothing.
func TestSemaphoreLimitMismatchNamesBoth(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	h.acquire(semAcq("s1", 1, "sem", 3))
	h.acquire(acq("s1", 2, "excl", 10*time.Second))
	before := h.fsm.lastToken()
	for _, tc := range []struct {
		name           string
		c              acquireCmd
		asked, inForce int
	}{
		{"exclusive on a semaphore", acq("s2", 1, "sem", 10*time.Second), 1, 3},
		{"other limit", semAcq("s2", 2, "sem", 2), 2, 3},
		{"semaphore on an exclusive lease", semAcq("s2", 3, "excl", 4), 4, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.l.acquire(h.ctx(), tc.c, 0)
			var lm *LimitMismatchError
			if !errors.As(err, &lm) || lm.Asked != tc.asked || lm.InForce != tc.inForce || !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("got %v, want a limit mismatch %d against %d", err, tc.asked, tc.inForce)
			}
		})
	}
	if h.fsm.lastToken() != before || h.fsm.leaseCount() != 2 {
		t.Fatal("a refused acquire changed the state")
	}
}

// Rule: waiters of a semaphore are served first come first served, each
// freed slot going to the next waiter in the entry that frees it.
func TestSemaphoreWaitersFirstComeFirstServed(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	a := h.acquire(semAcq("a", 1, "sem", 2))
	b := h.acquire(semAcq("b", 1, "sem", 2))
	var waiters []<-chan acquireOutcome
	for _, s := range []string{"w1", "w2", "w3"} {
		waiters = append(waiters, h.enqueueWaiter(h.ctx(), semAcq(s, 1, "sem", 2), time.Minute))
	}
	release := func(session string, token uint64) {
		t.Helper()
		n := h.raft.entries()
		r, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: session, Seq: 2}, Lease: "sem", Owner: "o", Token: token})
		if err != nil || !r.Released {
			t.Fatalf("release %s: %+v %v", session, r, err)
		}
		if got := h.raft.entries() - n; got != 1 {
			t.Fatalf("release and handoff took %d entries", got)
		}
	}
	release("b", b.Token)
	w1 := h.outcome(waiters[0])
	if w1.err != nil || !w1.res.Granted || w1.res.Token <= b.Token {
		t.Fatalf("first waiter: %+v %v", w1.res, w1.err)
	}
	h.pending(waiters[1])
	h.pending(waiters[2])
	release("a", a.Token)
	w2 := h.outcome(waiters[1])
	if w2.err != nil || !w2.res.Granted || w2.res.Token <= w1.res.Token {
		t.Fatalf("second waiter: %+v %v", w2.res, w2.err)
	}
	h.pending(waiters[2])
	release("w1", w1.res.Token)
	if w3 := h.outcome(waiters[2]); w3.err != nil || !w3.res.Granted || w3.res.Token <= w2.res.Token {
		t.Fatalf("third waiter: %+v %v", w3.res, w3.err)
	}
}

// Rule: a session's grants end together at its expiry; two slots of one
// semaphore in the session hand over to the first two waiters in that one
// entry, each told its own outcome.
func TestSemaphoreSessionExpiryHandsBothSlotsOver(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	c1, c2 := semAcq("s", 1, "sem", 2), semAcq("s", 2, "sem", 2)
	c2.Owner = "o2"
	h.acquire(c1)
	tG := h.clock.Now()
	h.acquire(c2)
	w1 := h.enqueueWaiter(h.ctx(), semAcq("w1", 1, "sem", 2), time.Hour)
	w2 := h.enqueueWaiter(h.ctx(), semAcq("w2", 1, "sem", 2), time.Hour)
	n := h.raft.entries()
	h.advanceTo(h.timing.GrantorExpiry(tG, 10*time.Second))
	o1, o2 := h.outcome(w1), h.outcome(w2)
	if o1.err != nil || o2.err != nil || !o1.res.Granted || !o2.res.Granted || o2.res.Token <= o1.res.Token {
		t.Fatalf("waiters after the expiry: %+v %v, %+v %v", o1.res, o1.err, o2.res, o2.err)
	}
	if got := h.raft.entries() - n; got != 1 {
		t.Fatalf("expiry and two handoffs took %d entries", got)
	}
	if h.fsm.heldBy("sem", "s", "o") || h.fsm.heldBy("sem", "s", "o2") {
		t.Fatal("the expired session still holds a slot")
	}
}

// Rule: a semaphore holder is renewed with its session, and its slot is
// freed no earlier than GrantorExpiry of its last renewal.
func TestSemaphoreHolderRenewedWithSession(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = 10 * time.Second
	r := h.acquire(semAcq("s", 1, "sem", 3))
	h.clock.Advance(ttl / 3)
	o, _ := h.l.await(h.ctx())
	res, tG, err := h.l.renewSessions(h.ctx(), o, "insecure", []sessionRenewal{{Session: "s", TTL: ttl}}, nil)
	if err != nil || len(res) != 1 || !res[0].Renewed {
		t.Fatalf("renewal: %+v %v", res, err)
	}
	exp := h.timing.GrantorExpiry(tG, ttl)
	h.advanceTo(exp.Add(-time.Millisecond))
	if _, ok := h.fsm.grant("sem", r.Token); !ok {
		t.Fatal("slot freed before the renewed expiry")
	}
	m := h.events.mark()
	h.advanceTo(exp)
	h.events.wait(t, m, "expiry", isExpiry)
	if _, ok := h.fsm.grant("sem", r.Token); ok {
		t.Fatal("slot still held after its expiry")
	}
}

// Rule: a holder asking again ends its grant and gets the next token in
// one entry; the number of holders does not change.
func TestSemaphoreHolderAsksAgain(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	first := h.acquire(semAcq("s", 1, "sem", 2))
	h.acquire(semAcq("t", 1, "sem", 2))
	again := h.acquire(semAcq("s", 2, "sem", 2))
	if !again.Granted || again.Token <= first.Token || again.Holders != 2 {
		t.Fatalf("re-acquire: %+v after %+v", again, first)
	}
	if _, ok := h.fsm.grant("sem", first.Token); ok {
		t.Fatal("the old grant still stands")
	}
	// A release naming the old grant changes nothing.
	r, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "s", Seq: 3}, Lease: "sem", Owner: "o", Token: first.Token})
	if err != nil || r.Released {
		t.Fatalf("release of the old grant: %+v %v", r, err)
	}
	if _, ok := h.fsm.grant("sem", again.Token); !ok {
		t.Fatal("the release of the old grant ended the new one")
	}
}

// Rule: Proclaim changes a grant's value and keeps its token; a Proclaim
// naming an ended grant changes nothing; a retried Proclaim cannot undo a
// later one.
func TestProclaimChangesValueKeepsToken(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	c := acq("s", 1, "leader", 10*time.Second)
	c.Value = "10.0.0.1:80"
	g := h.acquire(c)
	proclaim := func(seq uint64, token uint64, v string) bool {
		t.Helper()
		r, err := h.l.proclaim(h.ctx(), proclaimCmd{ID: requestID{Session: "s", Seq: seq}, Lease: "leader", Owner: "o", Token: token, Value: v})
		if err != nil {
			t.Fatal(err)
		}
		return r.Proclaimed
	}
	value := func() string {
		_, _, hs, _ := h.fsm.holders("leader")
		if len(hs) != 1 || hs[0].Token != g.Token {
			t.Fatalf("holders %+v", hs)
		}
		return hs[0].Value
	}
	if value() != "10.0.0.1:80" {
		t.Fatalf("value after elect: %q", value())
	}
	before := h.fsm.lastToken()
	if !proclaim(2, g.Token, "v2") || !proclaim(3, g.Token, "v3") {
		t.Fatal("proclaim by the holder refused")
	}
	if proclaim(2, g.Token, "v2"); value() != "v3" {
		t.Fatalf("a retried proclaim undid a later one: %q", value())
	}
	if h.fsm.lastToken() != before {
		t.Fatal("proclaim took a token")
	}
	if proclaim(4, g.Token+100, "stale") || value() != "v3" {
		t.Fatal("a proclaim naming another token changed the value")
	}
}

// Rule: until every server applies them, semaphores, values and Proclaim
// are refused, and nothing is written.
func TestSemaphoresNeedEveryServer(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	h.raft.allowCmd.Store(uint32(cmdExpireSession))
	valued := acq("s", 2, "v", time.Minute)
	valued.Value = "x"
	for _, c := range []acquireCmd{semAcq("s", 1, "sem", 2), valued} {
		if _, err := h.l.acquire(h.ctx(), c, 0); !errors.Is(err, ErrNotSupported) {
			t.Fatalf("acquire %+v in an older cluster: %v", c, err)
		}
	}
	if _, err := h.l.proclaim(h.ctx(), proclaimCmd{ID: requestID{Session: "s", Seq: 3}, Lease: "v", Owner: "o", Token: 1}); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("proclaim in an older cluster: %v", err)
	}
	if h.raft.entries() != 0 {
		t.Fatalf("%d entries written", h.raft.entries())
	}
	// The older forms carry neither field.
	if b := acquireEntry(semAcq("s", 4, "sem", 2), cmdAcquire4); cmdType(b[0]) != cmdAcquire4 || bytes.Contains(b, []byte("max_holders")) {
		t.Fatalf("older acquire entry %q", b)
	}
}

// Rule: entries older than cmdAcquire5 never apply a limit or a value, so
// replicas of any version apply them alike.
func TestFSMOlderAcquireIgnoresSemaphoreFields(t *testing.T) {
	f := newFSM()
	c := semAcq("s", 1, "sem", 3)
	c.Value = "x"
	f.Apply(rlog{1, encodeCmd(cmdAcquire4, c)}.log())
	c2 := semAcq("t", 1, "sem", 3)
	if r := f.Apply(rlog{2, encodeCmd(cmdAcquire4, c2)}.log()).(*acquireResult); r.Granted {
		t.Fatal("an older entry made a semaphore")
	}
	if _, _, hs, _ := f.holders("sem"); len(hs) != 1 || hs[0].Value != "" {
		t.Fatalf("holders %+v", hs)
	}
}

// Snapshots keep semaphores and values (format 3), and are written in
// format 1 while the state has neither.
func TestSnapshotKeepsSemaphoresAndValues(t *testing.T) {
	f := newFSM()
	f.Apply(rlog{1, encodeCmd(cmdAcquire5, semAcq("s", 1, "sem", 2))}.log())
	v := acq("s", 2, "leader", time.Minute)
	v.Value = "addr"
	f.Apply(rlog{2, encodeCmd(cmdAcquire5, v)}.log())
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(sink.Bytes(), []byte(`"format":3`)) {
		t.Fatalf("snapshot with a semaphore: %s", sink.Bytes())
	}
	g := newFSM()
	if err := g.Restore(sink); err != nil {
		t.Fatal(err)
	}
	if limit, _, hs, _ := g.holders("sem"); limit != 2 || len(hs) != 1 {
		t.Fatalf("restored semaphore: %d %+v", limit, hs)
	}
	if _, _, hs, _ := g.holders("leader"); len(hs) != 1 || hs[0].Value != "addr" {
		t.Fatalf("restored value: %+v", hs)
	}
	if g.sessionLeaseCount("s") != 2 {
		t.Fatalf("restored session index counts %d grants", g.sessionLeaseCount("s"))
	}

	plain := newFSM()
	plain.Apply(rlog{1, encodeCmd(cmdAcquire5, acq("s", 1, "x", time.Minute))}.log())
	snap, _ = plain.Snapshot()
	sink = &memSink{}
	snap.Persist(sink)
	if !bytes.Contains(sink.Bytes(), []byte(`"format":1`)) {
		t.Fatalf("snapshot without semaphores or values: %s", sink.Bytes())
	}
}

// Chaos finding F4 for a semaphore: a retry of an Acquire whose slot was
// granted and has ended says so (Ended, its own token), and is not
// refused naming the holders that came after.
func TestSemaphoreRetryOfEndedGrantIsNoRefusal(t *testing.T) {
	f := newTestFSM()
	acquire := func(c acquireCmd) *acquireResult {
		t.Helper()
		r, ok := f.apply(cmdAcquire5, c).(*acquireResult)
		if !ok {
			t.Fatalf("acquire %+v: not an acquire result", c)
		}
		return r
	}
	x := acquire(semAcq("sx", 3, "sem", 2))
	if !x.Granted {
		t.Fatalf("first acquire: %+v", x)
	}
	f.revoke(t, "sem", x.Token)
	for _, s := range []string{"s1", "s2"} {
		if r := acquire(semAcq(s, 1, "sem", 2)); !r.Granted {
			t.Fatalf("%s: %+v", s, r)
		}
	}
	retry := acquire(semAcq("sx", 3, "sem", 2))
	if retry.Granted || !retry.Ended || retry.Token != x.Token || retry.Holders != 2 {
		t.Fatalf("retry = %+v, want ended naming its own token %d, 2 holders", retry, x.Token)
	}
}
