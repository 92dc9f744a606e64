package grantor

import (
	"testing"
	"time"
)

// Rule: a reader that waits to become the writer (the holder asking
// exclusive while another reader holds the name) is served once the other
// readers leave: its own shared grant does not count against it. Before,
// the wake-up asked whether the name had room with the waiter's own grant
// counted, so the waiter slept through its whole wait while the name was
// free for it, and every waiter queued behind it (writers, and the
// readers a waiting writer holds back) waited as long.
func TestSharedReaderWaitingToWriteIsServedWhenOthersLeave(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	a := sharedAcq("a", 1, "x")
	a.TTL = time.Hour
	h.acquire(a)
	b := sharedAcq("b", 1, "x")
	b.TTL = time.Hour
	rb := h.acquire(b)
	up := acq("a", 2, "x", time.Hour)
	w := h.enqueueWaiter(h.ctx(), up, time.Hour)
	h.pending(w)
	if _, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "b", Seq: 2}, Lease: "x", Owner: "o", Token: rb.Token}); err != nil {
		t.Fatal(err)
	}
	if o := h.outcome(w); o.err != nil || !o.res.Granted || o.res.Shared || o.res.Token <= rb.Token {
		t.Fatalf("reader waiting to write, alone now: %+v %v", o.res, o.err)
	}
}

// Rule: two readers that both ask to become the writer with a wait do not
// wait for each other: the first waits (until the other leaves), the
// second is refused at once, for good, keeping its shared grant (its wait
// could end only once its own grant is gone). Before, the second queued
// behind the first, each waited for the other's grant to go, and the name
// was closed to every new reader and writer until both waits ran out.
func TestSharedTwoReadersAskingToWriteDoNotDeadlock(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	a := sharedAcq("a", 1, "x")
	a.TTL = time.Hour
	h.acquire(a)
	b := sharedAcq("b", 1, "x")
	b.TTL = time.Hour
	rb := h.acquire(b)
	wa := h.enqueueWaiter(h.ctx(), acq("a", 2, "x", time.Hour), time.Hour)
	h.pending(wa)
	ob := h.outcome(h.goAcquire(h.ctx(), acq("b", 2, "x", time.Hour), time.Hour))
	if ob.err != nil || ob.res.Granted || !ob.res.Final {
		t.Fatalf("second reader asking to write while the first waits to: %+v %v", ob.res, ob.err)
	}
	if !h.l.fsm.heldBy("x", "b", "o") {
		t.Fatal("the refused upgrade ended the second reader's shared grant")
	}
	if _, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "b", Seq: 3}, Lease: "x", Owner: "o", Token: rb.Token}); err != nil {
		t.Fatal(err)
	}
	if o := h.outcome(wa); o.err != nil || !o.res.Granted || o.res.Shared {
		t.Fatalf("first reader waiting to write, alone now: %+v %v", o.res, o.err)
	}
}

// Rule: a reader asking to become the writer while a writer waits for the
// name is refused at once, for good: the writer waits for the reader's
// grant to go, so the reader's wait, behind it, could never end. Before,
// the reader queued behind the writer and both waited out their whole
// waits, every new reader with them.
func TestSharedReaderAskingToWriteBehindAWriterIsRefusedAtOnce(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	a := sharedAcq("a", 1, "x")
	a.TTL = time.Hour
	ra := h.acquire(a)
	b := sharedAcq("b", 1, "x")
	b.TTL = time.Hour
	rb := h.acquire(b)
	ww := h.enqueueWaiter(h.ctx(), acq("w", 1, "x", time.Hour), time.Hour)
	oa := h.outcome(h.goAcquire(h.ctx(), acq("a", 2, "x", time.Hour), time.Hour))
	if oa.err != nil || oa.res.Granted || !oa.res.Final {
		t.Fatalf("reader asking to write behind a waiting writer: %+v %v", oa.res, oa.err)
	}
	for i, r := range []*acquireResult{ra, rb} {
		s := []string{"a", "b"}[i]
		if _, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: s, Seq: 3}, Lease: "x", Owner: "o", Token: r.Token}); err != nil {
			t.Fatal(err)
		}
	}
	if o := h.outcome(ww); o.err != nil || !o.res.Granted {
		t.Fatalf("writer once both readers left: %+v %v", o.res, o.err)
	}
}
