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
