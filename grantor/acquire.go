package grantor

import (
	"context"
	"slices"
	"time"
)

// waiter is an Acquire queued for a held lease, first come first served.
type waiter struct {
	cmd  acquireCmd
	wake chan struct{} // 1-buffered: the lease may be free, propose now
	// claimed is set (under lessor.mu) while a freeing entry in flight
	// carries this waiter's Acquire (handoff.go); a claimed waiter does
	// not leave the queue, it waits for result.
	claimed bool
	result  chan any // 1-buffered: the handed-off Acquire's *acquireResult or error
}

// acquire is rule 5 of the grantor. It proposes an Acquire; when the lease
// is held and wait > 0 it queues the caller behind earlier waiters. When a
// release or an expiry frees the lease, the freeing entry grants it to the
// head waiter (handoff.go); in a cluster with older grantors, only the
// head is woken and proposes its own Acquire. A waiter that leaves passes
// the wake-up on. There is no polling: waits end on a handoff, a wake-up,
// the wait's Clock timer, ctx, or the end of the office.
func (l *lessor) acquire(ctx context.Context, c acquireCmd, wait time.Duration) (*acquireResult, error) {
	o, err := l.await(ctx)
	if err != nil {
		return nil, err
	}
	if (c.MaxHolders > 1 || c.Value != "") && l.prop.allowed() < cmdAcquire5 {
		return nil, ErrNotSupported
	}
	defer l.touch(o, c.ID.Session)()

	var expired <-chan struct{}
	if wait > 0 {
		t := l.clock.NewTimer(wait)
		defer t.Stop()
		expired = t.C()
	}
	var w *waiter
	defer func() {
		if w != nil {
			l.leave(o, c.Lease, w)
		}
	}()
	for {
		if w == nil && wait > 0 && l.queuedBehind(o, c) {
			w = l.enqueue(o, c)
		} else {
			res, err := l.proposeAcquire(ctx, o, c)
			if err != nil || res.Granted || res.Ended || wait == 0 {
				// Ended: a retry of a grant that has ended; waiting
				// would not change that answer.
				return res, err
			}
			if w == nil {
				w = l.enqueue(o, c)
			} else {
				l.rearm(o, c.Lease, w)
			}
		}
		select {
		case <-w.wake:
		case r := <-w.result:
			w = nil // settle took it out of the queue
			return handedOff(r)
		case <-expired:
			expired = nil
			if !l.leave(o, c.Lease, w) {
				// A freeing entry in flight carries this Acquire: its
				// outcome is this Acquire's, whatever the wait said.
				select {
				case r := <-w.result:
					w = nil
					return handedOff(r)
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-o.ctx.Done():
					return nil, l.prop.notLeader()
				}
			}
			select {
			case r := <-w.result: // settled just before the wait ran out
				w = nil
				return handedOff(r)
			default:
			}
			w = nil
			return l.lastTry(ctx, o, c)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-o.ctx.Done():
			return nil, l.prop.notLeader()
		}
	}
}

// handedOff turns a handed-off Acquire's FSM result into acquire's.
func handedOff(r any) (*acquireResult, error) {
	switch r := r.(type) {
	case *acquireResult:
		return r, nil
	case error:
		return nil, r
	}
	panic("grantor: unexpected handoff result")
}

// lastTry answers a wait that ran out: with the holder, or, if the lease
// happens to be free right now, with one more proposal.
func (l *lessor) lastTry(ctx context.Context, o *office, c acquireCmd) (*acquireResult, error) {
	if r, held := l.fsm.refusal(c.Lease); held {
		return r, nil
	}
	return l.proposeAcquire(ctx, o, c)
}

// proposeAcquire proposes c holding the lease's slot, and on a grant moves
// the session's expiry to GrantorExpiry(tG, ttl) with tG read after the
// apply.
func (l *lessor) proposeAcquire(ctx context.Context, o *office, c acquireCmd) (*acquireResult, error) {
	slot := l.slot(c.Lease)
	select {
	case slot <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-o.ctx.Done():
		return nil, l.prop.notLeader()
	}
	defer l.releaseSlot(o, slot)
	if o.ctx.Err() != nil {
		return nil, l.prop.notLeader()
	}
	res, err := l.prop.apply(acquireEntry(c, l.prop.allowed()))
	if err != nil {
		return nil, err
	}
	switch r := res.(type) {
	case error:
		return nil, r
	case *acquireResult:
		if r.Granted {
			l.granted(o, c.ID.Session, r.TTL)
		}
		return r, nil
	}
	panic("grantor: unexpected acquire result")
}

// granted moves session's expiry after a grant of term ttl, with tG read
// now, after the apply returned.
func (l *lessor) granted(o *office, session string, ttl time.Duration) {
	tG := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if o.active && l.fsm.holdsLeases(session) {
		o.extendLocked(l.timing, session, ttl, tG)
	}
}

// queuedBehind reports whether c must join the queue without proposing:
// others wait for the lease, and c is neither the holder asking again nor a
// retry whose outcome the FSM remembers.
func (l *lessor) queuedBehind(o *office, c acquireCmd) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(o.queues[c.Lease]) == 0 {
		return false
	}
	if l.fsm.heldBy(c.Lease, c.ID.Session, c.Owner) {
		return false
	}
	return !l.fsm.hasOutcome(c.ID.Session, c.ID.Seq)
}

// enqueue adds a waiter for c at the tail of the lease's queue.
func (l *lessor) enqueue(o *office, c acquireCmd) *waiter {
	w := &waiter{cmd: c, wake: make(chan struct{}, 1), result: make(chan any, 1)}
	l.mu.Lock()
	o.queues[c.Lease] = append(o.queues[c.Lease], w)
	l.wakeIfFreeLocked(o, c.Lease)
	l.mu.Unlock()
	l.test(testEvent{what: "queued", lease: c.Lease})
	return w
}

// rearm is called by a head waiter whose proposal lost a race: if the lease
// was freed again meanwhile, it is woken at once.
func (l *lessor) rearm(o *office, lease string, w *waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.wakeIfFreeLocked(o, lease)
}

// leave removes w from the queue and, if the lease is free, wakes the new
// head: a waiter that leaves passes the wake-up on. A claimed waiter does
// not leave: leave returns false, and its outcome comes on w.result.
func (l *lessor) leave(o *office, lease string, w *waiter) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.claimed {
		return false
	}
	l.dequeueLocked(o, lease, w)
	return true
}

func (l *lessor) dequeueLocked(o *office, lease string, w *waiter) {
	q := o.queues[lease]
	if i := slices.Index(q, w); i >= 0 {
		q = slices.Delete(q, i, i+1)
	}
	if len(q) == 0 {
		delete(o.queues, lease)
		return
	}
	o.queues[lease] = q
	l.wakeIfFreeLocked(o, lease)
}

// claimLocked marks the first waiter of lease that no freeing entry
// carries yet as carried by one, and returns it; nil when there is none.
// For an exclusive lease that is the head or nobody: one grant frees it at
// a time, and a second entry carrying the next waiter could, applied
// first, serve it before the head. A semaphore's slots free
// independently, so each freeing entry carries the next unclaimed waiter.
func (l *lessor) claimLocked(o *office, lease string) *waiter {
	w := l.nextWaiterLocked(o, lease)
	if w != nil {
		w.claimed = true
	}
	return w
}

// nextWaiterLocked is the waiter of lease to serve next: the head, or for
// a semaphore the first that is not claimed.
func (l *lessor) nextWaiterLocked(o *office, lease string) *waiter {
	q := o.queues[lease]
	if len(q) == 0 {
		return nil
	}
	if !q[0].claimed {
		return q[0]
	}
	if !l.fsm.isSemaphore(lease) {
		return nil
	}
	for _, w := range q[1:] {
		if !w.claimed {
			return w
		}
	}
	return nil
}

// settle ends w's claim with the outcome h of the entry that carried it
// (nil: the entry failed). A granted waiter, one refused with an error,
// or a retry whose grant has ended gets its outcome and leaves the queue;
// one whose Acquire was not tried or was refused waits on, and is woken if
// the lease is free.
func (l *lessor) settle(o *office, w *waiter, h *handoff) {
	if w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w.claimed = false
	if h != nil && h.Tried {
		if r, ok := h.Res.(*acquireResult); !ok || r.Granted || r.Ended {
			l.dequeueLocked(o, w.cmd.Lease, w)
			w.result <- h.Res
			return
		}
	}
	l.wakeIfFreeLocked(o, w.cmd.Lease)
}

// wakeIfFreeLocked wakes the next waiter if the lease has room now (it is
// free, or a semaphore below its limit). It closes the gap between a
// waiter's failed proposal and its enqueue, in which a freeing event finds
// nobody to wake.
func (l *lessor) wakeIfFreeLocked(o *office, lease string) {
	if l.fsm.hasRoom(lease) {
		l.wakeHeadLocked(o, lease)
	}
}

// wakeHeadLocked wakes only the next waiter of lease (nextWaiterLocked),
// none when a freeing entry carries the head of an exclusive lease.
func (l *lessor) wakeHeadLocked(o *office, lease string) {
	if w := l.nextWaiterLocked(o, lease); w != nil {
		poke(w.wake)
	}
}

// release proposes a Release. When every server applies cmdRelease4 it
// carries the Acquire of the lease's first waiter, which the same entry
// grants if the release frees the lease (handoff.go); otherwise the freed
// event wakes the head waiter.
func (l *lessor) release(ctx context.Context, c releaseCmd) (*releaseResult, error) {
	o, err := l.await(ctx)
	if err != nil {
		return nil, err
	}
	defer l.touch(o, c.ID.Session)()
	allowed := l.prop.allowed()
	var w *waiter
	if allowed >= cmdRelease4 {
		l.mu.Lock()
		if w = l.claimLocked(o, c.Lease); w != nil {
			next := w.cmd
			c.Next = &next
		}
		l.mu.Unlock()
	}
	res, err := l.prop.apply(releaseEntry(c, allowed))
	if err != nil {
		l.settle(o, w, nil)
		return nil, err
	}
	switch r := res.(type) {
	case error:
		l.settle(o, w, nil)
		return nil, r
	case *releaseResult:
		if r.Next != nil && r.Next.Tried {
			if g, ok := r.Next.Res.(*acquireResult); ok && g.Granted {
				l.granted(o, w.cmd.ID.Session, g.TTL)
			}
		}
		l.settle(o, w, r.Next)
		return r, nil
	}
	panic("grantor: unexpected release result")
}
