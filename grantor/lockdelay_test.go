package grantor

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

// delayedAcq is an Acquire of lease with a lock-delay.
func delayedAcq(session string, seq uint64, lease string, ttl, delay time.Duration) acquireCmd {
	c := acq(session, seq, lease, ttl)
	c.LockDelay = delay
	return c
}

// delayOf returns the FSM's lock-delay of lease.
func delayOf(f *fsm, lease string) (delayRecord, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ds := f.st.Delays[lease]
	if len(ds) == 0 {
		return delayRecord{}, false
	}
	return ds[0], true
}

// The FSM: a grant with a lock-delay that ends without a release (owner
// ended, expiry, revoke) leaves its name delayed; an explicit release
// frees it at once; an Acquire of a delayed name is refused as delayed;
// an end that names another grant changes nothing; the end hands the
// name to the waiter it carries, in the same entry.
func TestLockDelayFSMRules(t *testing.T) {
	f := newFSM()
	i := uint64(0)
	apply := func(t cmdType, body any) any {
		i++
		return f.Apply(rlog{i, encodeCmd(t, body)}.log())
	}
	g := apply(cmdAcquire7, delayedAcq("s", 1, "x", time.Minute, 10*time.Second)).(*acquireResult)
	if !g.Granted {
		t.Fatalf("acquire: %+v", g)
	}
	// An explicit release: free at once.
	if r := apply(cmdRelease6, releaseCmd{ID: requestID{Session: "s", Seq: 2}, Lease: "x", Owner: "o", Token: g.Token}).(*releaseResult); !r.Released {
		t.Fatalf("release: %+v", r)
	}
	if _, ok := delayOf(f, "x"); ok {
		t.Fatal("an explicit release left the name delayed")
	}
	// The owner ended: delayed for the grant's lock-delay.
	g = apply(cmdAcquire7, delayedAcq("s", 3, "x", time.Minute, 10*time.Second)).(*acquireResult)
	apply(cmdRelease6, releaseCmd{ID: requestID{Session: "s", Seq: 4}, Lease: "x", Owner: "o", Token: g.Token, OwnerEnded: true})
	d, ok := delayOf(f, "x")
	if !ok || d.Token != g.Token || d.Delay != 10*time.Second {
		t.Fatalf("owner-ended release: delay %+v %v", d, ok)
	}
	r := apply(cmdAcquire7, acq("other", 1, "x", time.Minute)).(*acquireResult)
	if r.Granted || !r.Delayed || r.Token != g.Token {
		t.Fatalf("acquire of a delayed name: %+v", r)
	}
	if sr, _ := f.standing(acq("other", 2, "x", time.Minute)); !sr.Delayed {
		t.Fatalf("standing refusal of a delayed name: %+v", sr)
	}
	// A semaphore slot is no way around the delay.
	sem := acq("other", 3, "x", time.Minute)
	sem.MaxHolders = 3
	if r, ok := apply(cmdAcquire7, sem).(*acquireResult); ok && r.Granted {
		t.Fatalf("semaphore acquire of a delayed name: %+v", r)
	}
	// A release naming the ended grant changes nothing.
	if r := apply(cmdRelease6, releaseCmd{ID: requestID{Session: "s", Seq: 5}, Lease: "x", Owner: "o", Token: g.Token}).(*releaseResult); r.Released {
		t.Fatalf("release of an ended grant: %+v", r)
	}
	if _, ok := delayOf(f, "x"); !ok {
		t.Fatal("a release of the ended grant ended its delay")
	}
	// An end naming another grant changes nothing.
	if r := apply(cmdEndDelay, endDelayCmd{Lease: "x", Token: g.Token - 1}).(*endDelayResult); r.Ended {
		t.Fatalf("end of another grant's delay: %+v", r)
	}
	next := acq("w", 1, "x", time.Minute)
	r2 := apply(cmdEndDelay, endDelayCmd{Lease: "x", Token: g.Token, Next: &next}).(*endDelayResult)
	if !r2.Ended || r2.Next == nil || !r2.Next.Tried {
		t.Fatalf("end delay: %+v", r2)
	}
	if w := r2.Next.Res.(*acquireResult); !w.Granted || w.Token != g.Token+1 {
		t.Fatalf("waiter carried by the end: %+v", w)
	}
	// Expiry and revoke delay too.
	rec, _ := f.lease("x")
	apply(cmdRelease6, releaseCmd{ID: requestID{Session: "w", Seq: 2}, Lease: "x", Owner: "o", Token: rec.Token})
	g = apply(cmdAcquire7, delayedAcq("s", 6, "y", time.Minute, time.Second)).(*acquireResult)
	apply(cmdExpireSession2, expireSessionCmd{Session: "s", Term: 1, Leases: []grantRef{{"y", g.Token}}})
	if d, ok := delayOf(f, "y"); !ok || d.Token != g.Token {
		t.Fatalf("expiry: delay %+v %v", d, ok)
	}
	g = apply(cmdAcquire7, delayedAcq("s", 7, "z", time.Minute, time.Second)).(*acquireResult)
	apply(cmdRevoke, revokeCmd{Lease: "z", Token: g.Token})
	if d, ok := delayOf(f, "z"); !ok || d.Token != g.Token {
		t.Fatalf("revoke: delay %+v %v", d, ok)
	}
}

// Entries of types older than the lock-delay ones apply no lock-delay,
// whatever their JSON says: a log replays as it applied when written.
func TestLockDelayOlderEntriesApplyNone(t *testing.T) {
	f := newFSM()
	g := f.Apply(rlog{1, encodeCmd(cmdAcquire6, delayedAcq("s", 1, "x", time.Minute, time.Second))}.log()).(*acquireResult)
	f.Apply(rlog{2, encodeCmd(cmdRelease5, releaseCmd{ID: requestID{Session: "s", Seq: 2}, Lease: "x", Owner: "o", Token: g.Token, OwnerEnded: true})}.log())
	if _, ok := delayOf(f, "x"); ok {
		t.Fatal("an entry older than cmdAcquire7 stored a lock-delay")
	}
	g = f.Apply(rlog{3, encodeCmd(cmdAcquire7, delayedAcq("s", 3, "x", time.Minute, time.Second))}.log()).(*acquireResult)
	f.Apply(rlog{4, encodeCmd(cmdRelease5, releaseCmd{ID: requestID{Session: "s", Seq: 4}, Lease: "x", Owner: "o", Token: g.Token, OwnerEnded: true})}.log())
	if _, ok := delayOf(f, "x"); ok {
		t.Fatal("a cmdRelease5 applied owner_ended")
	}
	if got := acquireEntry(delayedAcq("s", 5, "x", time.Minute, time.Second), cmdAcquire6); cmdType(got[0]) != cmdAcquire6 || bytes.Contains(got, []byte("lock_delay")) {
		t.Fatalf("acquireEntry for an older cluster: %s", got)
	}
}

// Snapshots keep delays and grants' lock-delays (format 4), and a
// snapshot with a malformed delay is refused.
func TestLockDelaySnapshot(t *testing.T) {
	f := newFSM()
	g := f.Apply(rlog{1, encodeCmd(cmdAcquire7, delayedAcq("s", 1, "x", time.Minute, time.Second))}.log()).(*acquireResult)
	f.Apply(rlog{2, encodeCmd(cmdRelease6, releaseCmd{ID: requestID{Session: "s", Seq: 2}, Lease: "x", Owner: "o", Token: g.Token, OwnerEnded: true})}.log())
	f.Apply(rlog{3, encodeCmd(cmdAcquire7, delayedAcq("s", 3, "y", time.Minute, 2*time.Second))}.log())
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(sink.Bytes(), []byte(`"format":4`)) {
		t.Fatalf("snapshot with a delay: %s", sink.Bytes())
	}
	h := newFSM()
	if err := h.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if d, ok := delayOf(h, "x"); !ok || d.Token != g.Token || d.Delay != time.Second {
		t.Fatalf("restored delay: %+v %v", d, ok)
	}
	if rec, _ := h.lease("y"); rec.LockDelay != 2*time.Second {
		t.Fatalf("restored grant: %+v", rec)
	}
	bad := bytes.Replace(sink.Bytes(), []byte(`"delay_ns":1000000000`), []byte(`"delay_ns":0`), 1)
	if err := newFSM().Restore(io.NopCloser(bytes.NewReader(bad))); err == nil {
		t.Fatal("a snapshot with a zero delay was restored")
	}
}

// delayEnd is when an office that learnt of a delay at from ends it.
func (h *harness) delayEnd(from clockwatch.Instant, d time.Duration) clockwatch.Instant {
	return h.timing.GrantorExpiry(from, d)
}

// waitOutBefore moves the clock from from to a nanosecond before end, a
// second at a time with a scan of the expiry loop after each, and checks
// that the name "x" stays delayed all along.
func (h *harness) waitOutBefore(from, end clockwatch.Instant) {
	h.t.Helper()
	for at := from.Add(time.Second); at.Before(end); at = at.Add(time.Second) {
		h.advanceTo(at)
		if _, ok := delayOf(h.fsm, "x"); !ok {
			h.t.Fatalf("the delay ended at %v, before %v", at, end)
		}
	}
	// The loop's next wake-up is end itself: no scan comes before it.
	advance(h.l, h.clock, end.Add(-1).Sub(h.clock.Now()))
	if _, ok := delayOf(h.fsm, "x"); !ok {
		h.t.Fatalf("the delay ended before %v", end)
	}
}

// The leader ends a lock-delay at GrantorExpiry(apply, delay) on its own
// clock and not a nanosecond before; the end grants the name to the
// first waiter in the same entry (one extra entry per lock-delay), FIFO
// kept.
func TestLockDelayLeaderEndsItOnTime(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const delay = 10 * time.Second
	g := h.acquire(delayedAcq("s", 1, "x", time.Minute, delay))
	ctx := h.ctx()
	first := h.enqueueWaiter(ctx, acq("w1", 1, "x", time.Minute), time.Hour)
	second := h.enqueueWaiter(ctx, acq("w2", 1, "x", time.Minute), time.Hour)
	start := h.clock.Now()
	if r, err := h.l.release(ctx, releaseCmd{ID: requestID{Session: "s", Seq: 2}, Lease: "x", Owner: "o", Token: g.Token, OwnerEnded: true}); err != nil || !r.Released {
		t.Fatalf("release: %+v %v", r, err)
	}
	if r := h.acquire(acq("late", 1, "x", time.Minute)); r.Granted || !r.Delayed {
		t.Fatalf("acquire during the delay: %+v", r)
	}
	end := h.delayEnd(start, delay)
	entries := h.raft.entries()
	h.waitOutBefore(start, end)
	h.pending(first)
	if n := h.raft.entries(); n != entries {
		t.Fatalf("%d entries during the delay", n-entries)
	}
	m := h.events.mark()
	h.advanceTo(end)
	h.events.wait(t, m, "delay ended", func(e testEvent) bool { return e.what == "delay ended" && e.lease == "x" })
	o := h.outcome(first)
	if o.err != nil || !o.res.Granted || o.res.Token != g.Token+1 {
		t.Fatalf("first waiter: %+v %v", o.res, o.err)
	}
	if n := h.raft.entries(); n != entries+1 {
		t.Fatalf("ending the delay took %d entries, want 1 (with the handoff)", n-entries)
	}
	h.pending(second)
	if _, ok := delayOf(h.fsm, "x"); ok {
		t.Fatal("the delay is still in the table")
	}
}

// A leader that takes office while a name is delayed counts the delay from
// its own tE, however long ago the grant ended on the old leader's clock.
func TestLockDelayNewLeaderWaitsItOutFromTE(t *testing.T) {
	h := newHarness(t)
	const delay = 10 * time.Second
	// The old leader: the grant and its owner's end are in the log.
	h.raft.leader.Store(true)
	res, _ := h.raft.apply(acquireEntry(delayedAcq("s", 1, "x", time.Minute, delay), newestCmd))
	g := res.(*acquireResult)
	h.raft.apply(releaseEntry(releaseCmd{ID: requestID{Session: "s", Seq: 2}, Lease: "x", Owner: "o", Token: g.Token, OwnerEnded: true}, newestCmd))
	h.clock.Advance(9 * time.Second) // most of the delay went by under the old leader
	h.raft.termN.Store(2)
	h.takeOffice()
	tE := h.clock.Now()
	ch := h.enqueueWaiter(h.ctx(), acq("w", 1, "x", time.Minute), time.Hour)
	end := h.delayEnd(tE, delay)
	h.waitOutBefore(tE, end)
	h.pending(ch)
	m := h.events.mark()
	h.advanceTo(end)
	h.events.wait(t, m, "delay ended", func(e testEvent) bool { return e.what == "delay ended" })
	if o := h.outcome(ch); o.err != nil || !o.res.Granted {
		t.Fatalf("waiter: %+v %v", o.res, o.err)
	}
}

// A session's expiry delays its grants' names; a waiter queued on one is
// granted when the delay is over, not at the expiry.
func TestLockDelayAfterExpiry(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl, delay = 3 * time.Second, 5 * time.Second
	g := h.acquire(delayedAcq("s", 1, "x", ttl, delay))
	ch := h.enqueueWaiter(h.ctx(), acq("w", 1, "x", time.Minute), time.Hour)
	exp := h.timing.GrantorExpiry(h.clock.Now(), ttl)
	m := h.events.mark()
	h.advanceTo(exp)
	h.events.wait(t, m, "expiry applied", func(e testEvent) bool { return e.what == "applied expire-session2" })
	if d, ok := delayOf(h.fsm, "x"); !ok || d.Token != g.Token {
		t.Fatalf("after the expiry: delay %+v %v", d, ok)
	}
	h.pending(ch)
	end := h.delayEnd(exp, delay)
	h.waitOutBefore(exp, end)
	h.pending(ch)
	h.advanceTo(end)
	if o := h.outcome(ch); o.err != nil || !o.res.Granted {
		t.Fatalf("waiter: %+v %v", o.res, o.err)
	}
}

// An Acquire with a lock-delay is refused while not every grantor applies
// lock-delays, and validation bounds the delay.
func TestLockDelayRefusedWhenNotSupportedOrOutOfBounds(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	h.raft.allowCmd.Store(uint32(cmdAcquire6))
	if _, err := h.l.acquire(context.Background(), delayedAcq("s", 1, "x", time.Minute, time.Second), 0); err != ErrLockDelayNotSupported {
		t.Fatalf("acquire in an older cluster: %v", err)
	}
	cfg := DefaultConfig()
	for _, tt := range []struct {
		name  string
		delay time.Duration
	}{
		{name: "negative", delay: -1},
		{name: "over the maximum", delay: cfg.MaxLockDelay + 1},
	} {
		if _, err := cfg.validLockDelay(int64(tt.delay)); err == nil {
			t.Errorf("%s: lock-delay %v accepted", tt.name, tt.delay)
		}
	}
	if d, err := cfg.validLockDelay(int64(cfg.MaxLockDelay)); err != nil || d != cfg.MaxLockDelay {
		t.Fatalf("the maximum: %v %v", d, err)
	}
}

// A semaphore's slot that ends without a release is delayed in its place:
// the slot is granted to nobody until its delay ends, the other slots
// stay in use, and the name keeps its limit while only delays stand.
func TestLockDelayOfSemaphoreSlot(t *testing.T) {
	f := newFSM()
	i := uint64(0)
	apply := func(t cmdType, body any) any {
		i++
		return f.Apply(rlog{i, encodeCmd(t, body)}.log())
	}
	slot := func(session string, seq uint64) acquireCmd {
		c := delayedAcq(session, seq, "sem", time.Minute, time.Second)
		c.MaxHolders = 2
		return c
	}
	a := apply(cmdAcquire7, slot("a", 1)).(*acquireResult)
	b := apply(cmdAcquire7, slot("b", 1)).(*acquireResult)
	if !a.Granted || !b.Granted {
		t.Fatalf("slots: %+v %+v", a, b)
	}
	apply(cmdExpireSession2, expireSessionCmd{Session: "a", Term: 1, Leases: []grantRef{{"sem", a.Token}}})
	if r := apply(cmdAcquire7, slot("c", 1)).(*acquireResult); r.Granted {
		t.Fatalf("a slot granted while the other is delayed: %+v", r)
	}
	apply(cmdRelease6, releaseCmd{ID: requestID{Session: "b", Seq: 2}, Lease: "sem", Owner: "o", Token: b.Token, OwnerEnded: true})
	if ds := f.st.Delays["sem"]; len(ds) != 2 || ds[0].Limit != 2 {
		t.Fatalf("delays: %+v", ds)
	}
	if r, ok := apply(cmdAcquire7, acq("c", 2, "sem", time.Minute)).(*acquireResult); ok && r.Granted {
		t.Fatalf("an exclusive acquire of a delayed semaphore: %+v", r)
	}
	snap, _ := f.Snapshot()
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(sink.Bytes(), []byte(`"format":4`)) {
		t.Fatalf("snapshot with delayed slots: %s", sink.Bytes())
	}
	if err := newFSM().Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatalf("restoring delayed slots: %v", err)
	}
	// A slot's lock-delay alone needs format 4 too.
	held := newFSM()
	held.Apply(rlog{1, encodeCmd(cmdAcquire7, slot("a", 1))}.log())
	if !held.st.needsFormat4() {
		t.Fatal("a semaphore slot with a lock-delay does not need snapshot format 4")
	}
	next := slot("c", 3)
	r := apply(cmdEndDelay, endDelayCmd{Lease: "sem", Token: a.Token, Next: &next}).(*endDelayResult)
	if !r.Ended || r.Next == nil || !r.Next.Tried || !r.Next.Res.(*acquireResult).Granted {
		t.Fatalf("end of a slot's delay: %+v", r)
	}
	if r := apply(cmdAcquire7, slot("d", 1)).(*acquireResult); r.Granted {
		t.Fatalf("granted while one slot is held and the other delayed: %+v", r)
	}
}

// A snapshot restored while in office brings its delays with it, counted
// from the restore; an end the leader fails to commit is proposed again
// revokeRetry later, and the delay stands meanwhile.
func TestLockDelayRestoredInOfficeAndRetriedEnd(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const delay = 3 * time.Second
	old := newFSM()
	g := old.Apply(rlog{1, encodeCmd(cmdAcquire7, delayedAcq("s", 1, "x", time.Minute, delay))}.log()).(*acquireResult)
	old.Apply(rlog{2, encodeCmd(cmdRelease6, releaseCmd{ID: requestID{Session: "s", Seq: 2}, Lease: "x", Owner: "o", Token: g.Token, OwnerEnded: true})}.log())
	snap, err := old.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	restored := h.clock.Now()
	if err := h.fsm.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	end := h.delayEnd(restored, delay)
	h.waitOutBefore(restored, end)
	h.raft.leader.Store(false) // the end's entry fails
	m := h.events.mark()
	h.advanceTo(end)
	h.events.wait(t, m, "the failed end", func(e testEvent) bool { return e.what == "delay end failed" && e.lease == "x" })
	if _, ok := delayOf(h.fsm, "x"); !ok {
		t.Fatal("the delay ended without its entry")
	}
	h.raft.leader.Store(true)
	m = h.events.mark()
	h.advanceTo(h.clock.Now().Add(revokeRetry))
	h.events.wait(t, m, "delay ended", func(e testEvent) bool { return e.what == "delay ended" && e.lease == "x" })
	if _, ok := delayOf(h.fsm, "x"); ok {
		t.Fatal("the delay is still in the table after its retried end")
	}
}
