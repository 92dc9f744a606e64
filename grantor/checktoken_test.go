package grantor

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Rule: a token check is true for the grant that stands and false for a
// superseded one, which learns the tokens that stand now.
func TestCheckTokenLiveAndSuperseded(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	old := h.acquire(acq("s1", 1, "x", 10*time.Second))
	if _, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "s1", Seq: 2}, Lease: "x", Owner: "o", Token: old.Token}); err != nil {
		t.Fatal(err)
	}
	cur := h.acquire(acq("s2", 1, "x", 10*time.Second))
	entries := h.raft.entries()
	for _, tc := range []struct {
		token uint64
		live  bool
	}{{old.Token, false}, {cur.Token, true}} {
		live, tokens, err := h.l.checkToken(h.ctx(), "x", tc.token)
		if err != nil || live != tc.live || fmt.Sprint(tokens) != fmt.Sprint([]uint64{cur.Token}) {
			t.Fatalf("check %d: live %v tokens %v err %v, want live %v", tc.token, live, tokens, err, tc.live)
		}
	}
	if live, tokens, _ := h.l.checkToken(h.ctx(), "free", 1); live || len(tokens) != 0 {
		t.Fatalf("check of a free lease: %v %v", live, tokens)
	}
	if h.raft.entries() != entries {
		t.Fatal("a token check wrote a raft entry")
	}
}

// Rule: a check is answered only after a verify round that started after
// it arrived; checks that arrive during a round share the next one; a
// failed round answers none of them.
func TestCheckTokenBatchesVerifyRounds(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	g := h.acquire(acq("s1", 1, "x", 10*time.Second))
	started := make(chan int64)
	gate := make(chan error)
	h.raft.verify = func(round int64) error {
		started <- round
		return <-gate
	}
	type out struct {
		live bool
		err  error
	}
	check := func() <-chan out {
		ch := make(chan out, 1)
		go func() {
			live, _, err := h.l.checkToken(h.ctx(), "x", g.Token)
			ch <- out{live, err}
		}()
		return ch
	}
	m := h.events.mark()
	first := check()
	<-started
	m = h.events.wait(t, m, "first check queued", func(e testEvent) bool { return e.what == "check queued" })
	later := make([]<-chan out, 5)
	for i := range later {
		later[i] = check()
	}
	// All five are queued before round 1 ends.
	for range later {
		m = h.events.wait(t, m, "check queued", func(e testEvent) bool { return e.what == "check queued" })
	}
	select {
	case o := <-first:
		t.Fatalf("answered before its round ended: %+v", o)
	default:
	}
	gate <- nil
	if o := <-first; o.err != nil || !o.live {
		t.Fatalf("first check: %+v", o)
	}
	if round := <-started; round != 2 {
		t.Fatalf("round %d", round)
	}
	gate <- &NotLeaderError{}
	for i, ch := range later {
		if o := <-ch; !isNotLeader(o.err) || o.live {
			t.Fatalf("check %d after a failed round: %+v", i, o)
		}
	}
	if got := h.raft.verifies.Load(); got != 2 {
		t.Fatalf("%d verify rounds for 6 checks in 2 batches", got)
	}
}

// Rule: a grant whose session's expiry has passed on the leader's clock is
// not live, even before the entry that ends it is applied.
func TestCheckTokenPastSessionExpiry(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = 10 * time.Second
	tG := h.clock.Now()
	g := h.acquire(acq("s1", 1, "x", ttl))
	exp := h.timing.GrantorExpiry(tG, ttl)
	advance(h.l, h.clock, exp.Add(-time.Millisecond).Sub(h.clock.Now()))
	if live, _, err := h.l.checkToken(h.ctx(), "x", g.Token); err != nil || !live {
		t.Fatalf("just before the expiry: %v %v", live, err)
	}
	// Hold the expiry entry back: the FSM still has the grant.
	hold := make(chan struct{})
	h.raft.beforeFSM = func() { <-hold }
	defer close(hold)
	advance(h.l, h.clock, time.Millisecond)
	ctx, cancel := context.WithTimeout(h.ctx(), waitTimeout)
	defer cancel()
	if live, _, err := h.l.checkToken(ctx, "x", g.Token); err != nil || live {
		t.Fatalf("past the session's expiry: live %v err %v", live, err)
	}
}
