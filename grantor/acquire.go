package grantor

import (
	"context"
	"slices"
	"time"
)

// waiter is an Acquire queued for a held lease, first come first served.
type waiter struct {
	session string
	owner   string
	wake    chan struct{} // 1-buffered: the lease may be free, propose now
}

// acquire is rule 5 of the grantor. It proposes an Acquire; when the lease
// is held and wait > 0 it queues the caller behind earlier waiters. When a
// Release or Revoke frees the lease, only the head waiter is woken, and it
// proposes its Acquire. A waiter that leaves passes the wake-up on. There is
// no polling: waits end on a wake-up, the wait's Clock timer, ctx, or the
// end of the office.
func (l *lessor) acquire(ctx context.Context, c acquireCmd, wait time.Duration) (*acquireResult, error) {
	o, err := l.await(ctx)
	if err != nil {
		return nil, err
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
			if err != nil || res.Granted || wait == 0 {
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
		case <-expired:
			l.leave(o, c.Lease, w)
			w = nil
			return l.lastTry(ctx, o, c)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-o.ctx.Done():
			return nil, l.prop.notLeader()
		}
	}
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
// the expiry to GrantorExpiry(tG, ttl) with tG read after the apply.
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
			tG := l.clock.Now()
			l.mu.Lock()
			if rec, ok := l.fsm.lease(c.Lease); ok && rec.Token == r.Token && o.active {
				o.extendLocked(l.timing, c.Lease, rec, tG)
			}
			l.mu.Unlock()
		}
		return r, nil
	}
	panic("grantor: unexpected acquire result")
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
	if cur, held := l.fsm.lease(c.Lease); held && cur.Session == c.ID.Session && cur.Owner == c.Owner {
		return false
	}
	return !l.fsm.hasOutcome(c.ID.Session, c.ID.Seq)
}

// enqueue adds a waiter for c at the tail of the lease's queue.
func (l *lessor) enqueue(o *office, c acquireCmd) *waiter {
	w := &waiter{session: c.ID.Session, owner: c.Owner, wake: make(chan struct{}, 1)}
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
// head: a waiter that leaves passes the wake-up on.
func (l *lessor) leave(o *office, lease string, w *waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
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

// wakeIfFreeLocked wakes the head waiter if the lease is free now. It
// closes the gap between a waiter's failed proposal and its enqueue, in
// which a freeing event finds nobody to wake.
func (l *lessor) wakeIfFreeLocked(o *office, lease string) {
	if _, held := l.fsm.lease(lease); !held {
		l.wakeHeadLocked(o, lease)
	}
}

// wakeHeadLocked wakes only the first waiter of lease.
func (l *lessor) wakeHeadLocked(o *office, lease string) {
	if q := o.queues[lease]; len(q) > 0 {
		poke(q[0].wake)
	}
}

// release proposes a Release; the freed event wakes the head waiter.
func (l *lessor) release(ctx context.Context, c releaseCmd) (*releaseResult, error) {
	o, err := l.await(ctx)
	if err != nil {
		return nil, err
	}
	defer l.touch(o, c.ID.Session)()
	res, err := l.prop.apply(releaseEntry(c, l.prop.allowed()))
	if err != nil {
		return nil, err
	}
	switch r := res.(type) {
	case error:
		return nil, r
	case *releaseResult:
		return r, nil
	}
	panic("grantor: unexpected release result")
}
