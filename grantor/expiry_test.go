package grantor

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

// Regression tests for review finding R1, with the fake clock: once the
// leader has decided that a session expired, and before that decision is
// carried out (its entry failed and waits revokeRetry, or an older
// cluster's per-lease revokes are in flight), the session's sidecar may
// be granted another lease in it. That grant's own rule (docs/design.md
// section 2, rule 2) lets the grantor end it no earlier than
// tG + d(1+rho) + eps, whatever became of the decision.

// failingExpiry is a proposer whose first expire-session entry fails with
// an error that does not end the office (raft's enqueue timeout, say).
type failingExpiry struct {
	*fakeRaft
	failed atomic.Bool
}

func (p *failingExpiry) apply(cmd []byte) (any, error) {
	if t := cmdType(cmd[0]); (t == cmdExpireSession || t == cmdExpireSession2) && p.failed.CompareAndSwap(false, true) {
		p.events.add(testEvent{what: "expire failed"})
		return nil, errors.New("grantor: raft: timed out enqueuing operation")
	}
	return p.fakeRaft.apply(cmd)
}

// isEnd matches an entry that ends grants of an expired session: a
// session's expiry or an older cluster's per-lease revoke.
func isEnd(e testEvent) bool { return isExpiry(e) || e.what == "applied revoke" }

// spares checks that lease, granted with tok at tG with term ttl, is
// neither decided to end nor ended before GrantorExpiry(tG, ttl), and
// that it is ended once that has passed. The expiry loop reports each
// grant it decides to end ("decided") from its scan, before it sleeps,
// so when advanceTo returns every decision up to then is on record.
func (h *harness) spares(lease string, tok uint64, tG clockwatch.Instant, ttl time.Duration) {
	h.t.Helper()
	exp := h.timing.GrantorExpiry(tG, ttl)
	h.advanceTo(exp - 1)
	for _, e := range h.events.all() {
		if e.what == "decided" && e.lease == lease {
			h.t.Fatalf("%s (token %d, granted at %v, term %v) decided to end at %v, %v after its grant and %v before tG+d(1+rho)+eps = %v",
				lease, tok, tG, ttl, e.now, e.now.Sub(tG), exp.Sub(e.now), exp)
		}
	}
	if got := h.held(lease); got != tok {
		h.t.Fatalf("%s held with %d at %v, before its grant's expiry %v; want %d", lease, got, h.clock.Now(), exp, tok)
	}
	m := h.events.mark()
	h.advanceTo(exp)
	h.events.wait(h.t, m, "the end of "+lease, func(e testEvent) bool { return isEnd(e) && h.held(lease) == 0 })
}

// A cluster with a grantor that lacks cmdExpireSession (rolling upgrade)
// ends an expired session with per-lease revokes. A grant made to the
// session while those are applied is not ended when the loop looks at
// the session again revokeRetry later: that decision is carried out, and
// the new grant runs to its own expiry.
func TestExpiryPerLeaseRevokesSpareGrantMadeAfterDecision(t *testing.T) {
	h := newHarness(t)
	h.raft.allowCmd.Store(uint32(cmdRelease4)) // an older grantor in the configuration
	h.takeOffice()
	const ttl = 10 * time.Second
	h.acquire(acq("s1", 1, "a", ttl))
	exp := h.timing.GrantorExpiry(h.clock.Now(), ttl)

	// When the revoke of "a" is about to be applied, s1's sidecar (which
	// has heard of no expiry) acquires "b" in the same session.
	var armed atomic.Bool
	armed.Store(true)
	var tB clockwatch.Instant
	bTok := make(chan uint64, 1)
	h.raft.beforeFSM = func() {
		if armed.CompareAndSwap(true, false) {
			tB = h.clock.Now()
			r, err := h.l.acquire(h.ctx(), acq("s1", 2, "b", ttl), 0)
			if err != nil || !r.Granted {
				t.Errorf("acquire b: %+v %v", r, err)
			}
			bTok <- r.Token
		}
	}
	m := h.events.mark()
	h.advanceTo(exp)
	h.events.wait(t, m, "revoke of a", func(e testEvent) bool { return e.what == "applied revoke" })
	tok := <-bTok
	if h.held("a") != 0 || h.held("b") != tok {
		t.Fatalf("after the revoke of a: a held with %d, b with %d; want 0 and %d", h.held("a"), h.held("b"), tok)
	}
	h.advanceTo(exp.Add(revokeRetry)) // when the decision would be retried
	h.spares("b", tok, tB, ttl)
	if r := h.acquire(acq("s2", 1, "b", ttl)); !r.Granted {
		t.Fatalf("b not free to s2 after its expiry: %+v", r)
	}
}

// The expiry entry of a session fails once while the office stands. A
// grant made to the session before the retry is not listed in the retried
// entry: the retry ends only the grants the decision listed, and the new
// grant runs to its own expiry.
func TestExpiryRetriedEntrySparesGrantMadeAfterDecision(t *testing.T) {
	h := newHarness(t)
	// Replace the lessor by one over a proposer that fails the first expiry.
	h.l.stop()
	h.l.wait()
	p := &failingExpiry{fakeRaft: h.raft}
	h.l = newLessor(lessorConfig{timing: h.timing, clock: h.clock, log: slog.New(slog.DiscardHandler),
		sessionIdle: time.Hour, hook: h.events.add}, h.fsm, p)
	h.fsm.observe = h.l.onEvent
	t.Cleanup(func() { h.l.stop(); h.l.wait() })
	h.takeOffice()

	const ttl = 10 * time.Second
	a := h.acquire(acq("s1", 1, "a", ttl))
	exp := h.timing.GrantorExpiry(h.clock.Now(), ttl)
	m := h.events.mark()
	h.advanceTo(exp)
	h.events.wait(t, m, "failed expiry", func(e testEvent) bool { return e.what == "expire failed" })

	advance(h.l, h.clock, revokeRetry/2) // the loop sleeps until retryAt
	tB := h.clock.Now()
	b := h.acquire(acq("s1", 2, "b", ttl))
	if !b.Granted {
		t.Fatalf("b not granted: %+v", b)
	}
	m = h.events.mark()
	h.advanceTo(exp.Add(revokeRetry))
	h.events.wait(t, m, "retried expiry", isExpiry)
	if h.held("a") != 0 {
		t.Fatalf("a still held with %d (granted %d) after the retried expiry", h.held("a"), a.Token)
	}
	h.spares("b", b.Token, tB, ttl)
}

// The FSM applies a grant before its event reaches the leader's office.
// A session whose expiry passes in between is not ended with that grant:
// the decision lists only grants whose events the office has counted,
// and the new grant runs to its own expiry.
func TestExpirySparesGrantWhoseEventIsPending(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = 10 * time.Second
	h.acquire(acq("s1", 1, "a", ttl))
	exp := h.timing.GrantorExpiry(h.clock.Now(), ttl)
	h.advanceTo(exp - clockwatch.Instant(time.Millisecond))

	// Hold back b's grant event, as a slow FSM goroutine would.
	applied, release := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	h.fsm.observe = func(ev fsmEvent) {
		if ev.Kind == evGranted && ev.Lease == "b" && once.CompareAndSwap(false, true) {
			close(applied)
			<-release
		}
		h.l.onEvent(ev)
	}
	bRes := h.goAcquire(h.ctx(), acq("s1", 2, "b", ttl), 0)
	<-applied
	tok := h.held("b")

	h.advanceTo(exp) // the session's expiry passes while b's event waits
	for _, e := range h.events.all() {
		if e.what == "decided" && e.lease == "b" {
			close(release)
			t.Fatalf("b (token %d) decided to end at %v, before its grant's event was counted", tok, e.now)
		}
	}
	m := h.events.mark()
	tG := h.clock.Now() // b's grant counts from its event, read now (rule 2: tG after the apply)
	close(release)
	if o := h.outcome(bRes); o.err != nil || !o.res.Granted || o.res.Token != tok {
		t.Fatalf("acquire b: %+v %v, want granted with %d", o.res, o.err, tok)
	}
	h.events.wait(t, m, "the end of a", func(e testEvent) bool { return isExpiry(e) && h.held("a") == 0 })
	h.spares("b", tok, tG, ttl)
}

// TestLockCycleLeavesTheExpiryLoopAsleep: a lock cycle whose session
// expires after the instant the expiry loop sleeps until does not wake the
// loop, neither by its grant's event nor by its proposal slot's release
// (each did, and each scan walks every session of the office under the
// lessor's mutex); a grant whose session expires before that instant
// does. The loop is held on scanMu once woken, so a second kick stays in
// its channel.
func TestLockCycleLeavesTheExpiryLoopAsleep(t *testing.T) {
	h := newHarness(t)
	m := h.events.mark()
	h.takeOffice()
	h.events.wait(t, m, "the expiry loop asleep", func(e testEvent) bool { return e.what == "sleep" })
	h.l.mu.Lock()
	o := h.l.cur
	h.l.mu.Unlock()
	h.l.scanMu.Lock()
	defer h.l.scanMu.Unlock()
	for seq := uint64(1); seq <= 6; seq += 2 {
		g := h.acquire(acq("s", seq, "cycle", 15*time.Second))
		r, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "s", Seq: seq + 1}, Lease: "cycle", Owner: "o", Token: g.Token})
		if !g.Granted || err != nil || !r.Released {
			t.Fatalf("cycle %d: %+v; %+v %v", seq, g, r, err)
		}
	}
	if n := len(o.kick); n != 0 {
		t.Fatalf("three lock cycles of a 15 s term left a kick for the expiry loop, asleep until at most %v later", maxExpirySleep)
	}
	for i, name := range []string{"short-1", "short-2"} {
		if g := h.acquire(acq(name, 1, name, 100*time.Millisecond)); !g.Granted {
			t.Fatalf("acquire %d: %+v", i, g)
		}
	}
	if n := len(o.kick); n != 1 {
		t.Fatal("two grants of a 100 ms term, due before the expiry loop wakes, left it no kick")
	}
}

// TestGrantAfterSuspendWakesTheExpiryLoop: after a suspend of the grantor's
// host (BOOTTIME jumped, the loop's timer on the monotonic clock did not
// fire), a grant wakes the expiry loop even when its session's expiry comes
// after the instant the loop slept until: that instant has passed, and
// what was due by it is overdue (review of cb9a00d).
func TestGrantAfterSuspendWakesTheExpiryLoop(t *testing.T) {
	h := newHarness(t)
	m := h.events.mark()
	h.takeOffice()
	h.events.wait(t, m, "the expiry loop asleep", func(e testEvent) bool { return e.what == "sleep" })
	h.clock.Suspend(10 * time.Second)
	resumed := h.clock.Now()
	m = h.events.mark()
	if g := h.acquire(acq("s", 1, "after-suspend", 15*time.Second)); !g.Granted {
		t.Fatalf("acquire: %+v", g)
	}
	h.events.wait(t, m, "the expiry loop scanning at the instant after the suspend", func(e testEvent) bool {
		return e.what == "sleep" && !e.now.Before(resumed)
	})
}
