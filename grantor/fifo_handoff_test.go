package grantor

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestSemaphoreStaleReleaseKeepsHeadWaiterFirst (review 9/12/13 S1): a
// Release that frees nothing (it names an
// older token of the holder: TEAM.md decision 1 says it changes nothing)
// must not carry the head waiter of a semaphore: a real release of
// another slot in flight at the same time must hand the slot to the
// head, not to the second in line.
func TestSemaphoreStaleReleaseKeepsHeadWaiterFirst(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	a1 := h.acquire(semAcq("a", 1, "sem", 2))
	a2 := h.acquire(semAcq("a", 2, "sem", 2)) // the holder asks again: a1 ended
	if !a2.Granted || a2.Token == a1.Token {
		t.Fatalf("holder asks again: %+v", a2)
	}
	b := h.acquire(semAcq("b", 1, "sem", 2))
	w1 := h.enqueueWaiter(h.ctx(), semAcq("w1", 1, "sem", 2), time.Minute)
	w2 := h.enqueueWaiter(h.ctx(), semAcq("w2", 1, "sem", 2), time.Minute)

	// The stale release is held before the FSM (replication), as raft
	// would while another proposal goes ahead.
	entered, unblock := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	h.raft.beforeFSM = func() {
		if first.CompareAndSwap(false, true) {
			close(entered)
			<-unblock
		}
	}
	staleDone := make(chan *releaseResult, 1)
	go func() {
		r, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "a", Seq: 3}, Lease: "sem", Owner: "o", Token: a1.Token})
		if err != nil {
			t.Errorf("stale release: %v", err)
		}
		staleDone <- r
	}()
	<-entered
	r, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "b", Seq: 2}, Lease: "sem", Owner: "o", Token: b.Token})
	if err != nil || !r.Released {
		t.Fatalf("release b: %+v %v", r, err)
	}
	close(unblock)
	if sr := <-staleDone; sr == nil || sr.Released {
		t.Fatalf("stale release freed something: %+v", sr)
	}
	// One slot was freed; the first waiter must be the one served.
	select {
	case o := <-w2:
		t.Fatalf("the second waiter got the freed slot (%+v %v) while the first still waits", o.res, o.err)
	case o := <-w1:
		if o.err != nil || !o.res.Granted {
			t.Fatalf("first waiter: %+v %v", o.res, o.err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("nobody was served")
	}
}

// TestNoWaitAcquireDoesNotJumpQueuedWaiters (review 9/12/13 S4): an
// Acquire without wait of a lease others wait for is refused (etcd's
// TryLock), also in the moment a release frees it for the head waiter;
// and a stale release in flight does not hold the head's place.
func TestNoWaitAcquireDoesNotJumpQueuedWaiters(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	old := h.acquire(acq("a", 1, "L", 10*time.Second))
	cur := h.acquire(acq("a", 2, "L", 10*time.Second)) // the holder asks again: old ended
	w1 := h.enqueueWaiter(h.ctx(), acq("w1", 1, "L", 10*time.Second), time.Minute)

	entered, unblock := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	h.raft.beforeFSM = func() {
		if first.CompareAndSwap(false, true) {
			close(entered)
			<-unblock
		}
	}
	staleDone := make(chan struct{})
	go func() {
		defer close(staleDone)
		r, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "a", Seq: 3}, Lease: "L", Owner: "o", Token: old.Token})
		if err != nil || r.Released {
			t.Errorf("stale release: %+v %v", r, err)
		}
	}()
	<-entered // the stale release carries w1
	r, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "a", Seq: 4}, Lease: "L", Owner: "o", Token: cur.Token})
	if err != nil || !r.Released {
		t.Fatalf("release: %+v %v", r, err)
	}
	n := h.acquire(acq("n", 1, "L", 10*time.Second)) // no wait
	close(unblock)
	<-staleDone
	if n.Granted {
		h.pending(w1)
		t.Fatalf("an acquire without wait took L (token %d) while w1 waited at the head of its queue", n.Token)
	}
	if o := h.outcome(w1); o.err != nil || !o.res.Granted {
		t.Fatalf("w1: %+v %v", o.res, o.err)
	}
}
