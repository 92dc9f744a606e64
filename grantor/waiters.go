package grantor

import (
	"errors"
	"slices"
	"time"
)

// waiter is one Acquire request, (session, seq), queued for a held lease,
// first come first served. Every call of that request id (the first, and
// a sidecar's retries after a transport blip or an abandoned attempt)
// attaches to the same waiter, so one request id gets one answer.
type waiter struct {
	cmd  acquireCmd
	wake chan struct{} // 1-buffered: the lease may be free, propose now
	// claimed is set (under lessor.mu) while an entry in flight carries
	// this waiter's Acquire: a freeing entry's handoff (handoff.go) or the
	// waiter's own proposal. A claimed waiter does not leave the queue; its
	// outcome comes on done.
	claimed bool
	// calls counts the calls of cmd.ID waiting on this waiter (under
	// lessor.mu). A claimed waiter whose calls all ended is a ghost: settle
	// takes it out of the queue whatever its entry did.
	calls int
	// acct is the account the waiter is charged to, until it leaves
	// its queue.
	acct *account
	done chan struct{} // closed once res is the request's outcome
	res  any           // *acquireResult or error, set before done is closed
}

// join attaches c to the waiter of its request id if there is one
// (counted in its calls), or, when wait > 0 and c must queue behind
// others, queues a new waiter for it. behind, without wait, says c may not
// take the lease ahead of the waiters queued (it is to be withdrawn).
// other, when not nil, is the proposal of another call of c's id in
// flight, whose outcome c waits for (proposing.go). Else c is to be
// proposed, as mine, which its id's other calls wait for until the caller
// ends it. err is a *LimitError when c would queue a waiter past its
// caller's limit.
func (l *lessor) join(o *office, c acquireCmd, wait time.Duration) (w *waiter, behind bool, other, mine *proposal, err error) {
	l.mu.Lock()
	if p := o.proposing[proposalKeyOf(c)]; p != nil {
		l.mu.Unlock()
		return nil, false, p, nil, nil
	}
	if q := l.waiterLocked(o, c); q != nil {
		q.calls++
		l.wakeIfFreeLocked(o, c.Lease)
		if l.fsm.hasOutcome(c.ID.Session, c.ID.Seq) {
			poke(q.wake) // answered by another call's entry: proposing answers it
		}
		l.mu.Unlock()
		l.test(testEvent{what: "queued", lease: c.Lease})
		return q, false, nil, nil, nil
	}
	behind = l.queuedBehindLocked(o, c)
	if !behind {
		mine = l.beginProposalLocked(o, c)
	}
	l.mu.Unlock()
	if behind && wait > 0 {
		w, err = l.enqueue(o, c)
		return w, false, nil, nil, err
	}
	return nil, behind, nil, mine, nil
}

// waiterLocked returns the waiter of c's request id and identity, nil if
// none is queued.
func (l *lessor) waiterLocked(o *office, c acquireCmd) *waiter {
	for _, q := range o.queues[c.Lease] {
		if q.cmd.ID.Session == c.ID.Session && q.cmd.ID.Seq == c.ID.Seq && q.cmd.Identity == c.Identity {
			return q
		}
	}
	return nil
}

// queuedBehindLocked reports whether c must stay behind others that wait
// for the lease (other request ids than c's): c is neither the holder
// asking again nor a retry whose outcome the FSM remembers.
func (l *lessor) queuedBehindLocked(o *office, c acquireCmd) bool {
	if !slices.ContainsFunc(o.queues[c.Lease], func(w *waiter) bool {
		return w.cmd.ID.Session != c.ID.Session || w.cmd.ID.Seq != c.ID.Seq
	}) {
		return false
	}
	if l.fsm.heldBy(c.Lease, c.ID.Session, c.Owner) {
		return false
	}
	return !l.fsm.hasOutcome(c.ID.Session, c.ID.Seq)
}

// errWaitForOwnGrant says an Acquire of a holder of the name (a reader
// asking to become the writer) would queue behind others that wait for
// the name: they wait for its grant to go, so its wait could never end.
// acquire answers it refused for good instead (a withdrawal).
var errWaitForOwnGrant = errors.New("grantor: a holder of the name would wait behind waiters that wait for its own grant")

// enqueue adds a waiter for c, with one call, at the tail of the lease's
// queue; or attaches c to the waiter of its request id, if another call
// of it queued one meanwhile. err is a *LimitError instead when c's
// caller has as many waiters as it may, and errWaitForOwnGrant when c's
// caller holds the name and others wait for it: a holder's Acquire that
// has no room (a reader asking to write beside other readers) waits only
// at the head, or two readers asking to write (or one behind a writer)
// would each wait for the other's grant to go, and every later waiter of
// the name with them, until their waits ran out.
func (l *lessor) enqueue(o *office, c acquireCmd) (*waiter, error) {
	l.mu.Lock()
	w := l.waiterLocked(o, c)
	if w != nil {
		w.calls++
	} else {
		if len(o.queues[c.Lease]) > 0 && l.fsm.heldBy(c.Lease, c.ID.Session, c.Owner) {
			l.mu.Unlock()
			return nil, errWaitForOwnGrant
		}
		acct, err := l.accounts.charge(c.caller, limWaiters, 1)
		if err != nil {
			l.mu.Unlock()
			return nil, err
		}
		w = &waiter{cmd: c, acct: acct, wake: make(chan struct{}, 1), calls: 1, done: make(chan struct{})}
		o.queues[c.Lease] = append(o.queues[c.Lease], w)
		if l.fsm.hasOutcome(c.ID.Session, c.ID.Seq) {
			// Another call's entry answered the id since c's own entry
			// was refused: c proposes at once, and is answered that.
			poke(w.wake)
		}
	}
	l.wakeIfFreeLocked(o, c.Lease)
	l.mu.Unlock()
	l.test(testEvent{what: "queued", lease: c.Lease})
	return w, nil
}

// quit ends one call's wait on w. The last call of an unclaimed waiter
// takes it out of the queue and, if the lease is free, wakes the new
// head: a waiter that leaves passes the wake-up on. A claimed waiter
// stays until settle, which takes a ghost (no calls left) out.
func (l *lessor) quit(o *office, w *waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w.calls--
	if w.calls <= 0 && !w.claimed {
		l.dequeueLocked(o, w.cmd.Lease, w)
	}
}

func (l *lessor) dequeueLocked(o *office, lease string, w *waiter) {
	q := o.queues[lease]
	if i := slices.Index(q, w); i >= 0 {
		q = slices.Delete(q, i, i+1)
		l.accounts.refund(w.acct, limWaiters, 1)
	}
	if len(q) == 0 {
		delete(o.queues, lease)
		return
	}
	o.queues[lease] = q
	l.wakeIfFreeLocked(o, lease)
}

// claimLocked marks the head waiter of lease as carried by a freeing
// entry, and returns it; nil when there is none or an entry in flight
// carries the head already. Only the head is carried, for a semaphore
// too: a second entry carrying the next waiter could, applied first (or
// the head's entry freeing nothing), serve it before the head. A head
// whose entry serves it leaves the queue and wakes the next; one whose
// entry tried nothing is woken if the lease has room. One entry may carry
// several waiters in queue order (an expiry freeing several slots of a
// semaphore): carried is how many of the head's this entry carries
// already, and the FSM tries them in that order.
func (l *lessor) claimLocked(o *office, lease string, carried int) *waiter {
	q := o.queues[lease]
	if len(q) <= carried || q[carried].claimed {
		return nil
	}
	w := q[carried]
	w.claimed = true
	return w
}

// nextWaiterLocked is the waiter of lease to serve next: the head, unless
// an entry in flight carries it.
func (l *lessor) nextWaiterLocked(o *office, lease string) *waiter {
	if q := o.queues[lease]; len(q) > 0 && !q[0].claimed {
		return q[0]
	}
	return nil
}

// settle ends w's claim with the outcome h of the entry that carried it
// (nil: the entry failed). A waiter whose Acquire the entry settled
// (granted, refused with an error or for good, or a retry whose grant has
// ended) gets its outcome, for every call of its id, and leaves the
// queue; one whose Acquire was not tried or was refused waits on and is
// woken if the lease is free, unless it is a ghost (its calls all ended),
// which leaves and passes the wake-up on. A ghost granted keeps its grant
// under its request id: a retry of that id is answered it, and its
// sidecar gives back what it does not want.
func (l *lessor) settle(o *office, w *waiter, h *handoff) {
	if w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w.claimed = false
	if h != nil && h.Tried {
		if r, ok := h.Res.(*acquireResult); !ok || r.settled() {
			l.dequeueLocked(o, w.cmd.Lease, w)
			if w.res == nil {
				w.res = h.Res
				close(w.done)
			}
			return
		}
	}
	if w.calls <= 0 {
		l.dequeueLocked(o, w.cmd.Lease, w)
		return
	}
	l.wakeIfFreeLocked(o, w.cmd.Lease)
}

// wakeIfFreeLocked wakes the next waiter if the lease has room for it now
// (it is free, a semaphore below its limit, or held shared and the waiter
// asks shared). It closes the gap between a waiter's failed proposal and
// its enqueue, in which a freeing event finds nobody to wake.
func (l *lessor) wakeIfFreeLocked(o *office, lease string) {
	if w := l.nextWaiterLocked(o, lease); w != nil && l.fsm.hasRoomFor(&w.cmd) {
		poke(w.wake)
	}
}
