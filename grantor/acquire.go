package grantor

import (
	"context"
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
	done  chan struct{} // closed by settle once res is the request's outcome
	res   any           // *acquireResult or error, set before done is closed
	// unclaimed (1-buffered) is poked when an entry that carried w ends
	// without an outcome for it: a call whose wait ran out meanwhile
	// answers then.
	unclaimed chan struct{}
}

// acquire is rule 5 of the grantor. It proposes an Acquire; when the lease
// is held and wait > 0 it queues the caller behind earlier waiters. When a
// release or an expiry frees the lease, the freeing entry grants it to the
// head waiter (handoff.go); in a cluster with older grantors, only the
// head is woken and proposes its own Acquire. A waiter that leaves passes
// the wake-up on. There is no polling: waits end on a handoff, a wake-up,
// the wait's Clock timer, ctx, or the end of the office.
//
// FIFO holds also without wait: an Acquire of a lease others wait for is
// refused (etcd's TryLock), unless its caller holds the lease or it is a
// retry the FSM remembers. A call whose request id is queued already
// attaches to that waiter; without wait it is answered the outcome of the
// entry that carries it, if one does, else the waiter is withdrawn. A call
// whose request id this office answered refused is answered that refusal
// at once (refused.go): one request id, one answer.
func (l *lessor) acquire(ctx context.Context, c acquireCmd, wait time.Duration) (*acquireResult, error) {
	o, err := l.await(ctx)
	if err != nil {
		return nil, err
	}
	if (c.MaxHolders > 1 || c.Value != "") && l.prop.allowed() < cmdAcquire5 {
		return nil, ErrNotSupported
	}
	// A session belongs to its identity (ownership.go): a call of another
	// identity is refused here, before it can attach to the session's
	// waiters or be answered from what this office remembers of it.
	if err := checkOwner(&sessionRecord{Owner: l.fsm.sessionOwner(c.ID.Session)}, c.ID.Session, c.Identity); err != nil {
		return nil, err
	}
	defer l.touch(o, c.ID.Session)()

	var expired <-chan struct{}
	if wait > 0 {
		t := l.clock.NewTimer(wait)
		defer t.Stop()
		expired = t.C()
	}
	w, ans := l.join(o, c, wait)
	switch {
	case ans != nil:
		return handedOff(ans)
	case w != nil:
		defer l.quit(o, w)
		if wait == 0 {
			return l.answerNow(ctx, o, w)
		}
	default:
		res, err := l.proposeAcquire(ctx, o, c)
		if err != nil || res.Granted || res.Ended {
			// Ended: a retry of a grant that has ended; waiting
			// would not change that answer.
			return res, err
		}
		if wait == 0 {
			return l.refusedNow(ctx, o, c, res)
		}
		if w, ans = l.enqueue(o, c); ans != nil {
			return handedOff(ans)
		}
		defer l.quit(o, w)
	}
	var overdue <-chan struct{} // the wait ran out while an entry carried w
	for {
		select {
		case <-overdue:
			if l.carried(w) {
				continue
			}
			select {
			case <-w.done:
				return handedOff(w.res)
			default:
			}
			if res, err, final := l.lastTry(ctx, o, c, w); final {
				return res, err
			}
			overdue = w.unclaimed // claimed meanwhile: its entry answers
		case <-w.wake:
			if res, err, final := l.proposeAsWaiter(ctx, o, w); final {
				return res, err
			}
		case <-w.done:
			return handedOff(w.res)
		case <-expired:
			expired = nil
			if l.carried(w) {
				// An entry in flight carries this Acquire: its outcome
				// is this Acquire's, whatever the wait said.
				overdue = w.unclaimed
				continue
			}
			select {
			case <-w.done: // settled just before the wait ran out
				return handedOff(w.res)
			default:
			}
			if res, err, final := l.lastTry(ctx, o, c, w); final {
				return res, err
			}
			overdue = w.unclaimed // claimed meanwhile: its entry answers
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-o.ctx.Done():
			return nil, l.prop.notLeader()
		}
	}
}

// join attaches c to the waiter of its request id if there is one
// (counted in its calls), or, when wait > 0 and c must queue behind
// others, queues a new waiter for it. ans, when not nil, is c's answer
// (*acquireResult or error), given without an entry: the refusal this
// office gave c's request id already, or, without wait, the refusal of
// an Acquire that may not take the lease ahead of the waiters queued,
// which is remembered as its id's answer. Neither: c is to be proposed.
func (l *lessor) join(o *office, c acquireCmd, wait time.Duration) (w *waiter, ans any) {
	l.mu.Lock()
	if q := l.waiterLocked(o, c); q != nil {
		q.calls++
		l.wakeIfFreeLocked(o, c.Lease)
		if l.fsm.hasOutcome(c.ID.Session, c.ID.Seq) {
			poke(q.wake) // granted by another call's entry: proposing answers it
		}
		l.mu.Unlock()
		l.test(testEvent{what: "queued", lease: c.Lease})
		return q, nil
	}
	if r, ok := l.refusedLocked(o, c); ok {
		l.mu.Unlock()
		l.test(testEvent{what: "refused again", lease: c.Lease})
		return nil, r
	}
	behind := l.queuedBehindLocked(o, c)
	if behind && wait == 0 {
		r, err := l.fsm.standing(c)
		ans = r
		if err != nil {
			ans = err
		}
		l.rememberRefusalLocked(o, c, ans)
	}
	l.mu.Unlock()
	if behind && wait > 0 {
		return l.enqueue(o, c)
	}
	return nil, ans
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

// refusedNow answers call c, without wait, that its own entry refused
// (r). The refusal is its request id's answer for every call of it: a
// waiter of the id that another call queued meanwhile is answered as a
// call without wait is (answerNow: withdrawn, or the outcome of an entry
// that carries it), and the refusal is remembered (refused.go), so that
// no later call of the id queues afresh.
func (l *lessor) refusedNow(ctx context.Context, o *office, c acquireCmd, r *acquireResult) (*acquireResult, error) {
	l.mu.Lock()
	if q := l.waiterLocked(o, c); q != nil {
		q.calls++
		l.mu.Unlock()
		defer l.quit(o, q)
		return l.answerNow(ctx, o, q)
	}
	if ans, ok := l.refusedLocked(o, c); ok {
		l.mu.Unlock()
		return handedOff(ans)
	}
	l.rememberRefusalLocked(o, c, r)
	l.mu.Unlock()
	return r, nil
}

// answerNow answers a call without wait whose request id is queued: the
// outcome of the entry that carries it, if one does; otherwise the waiter
// is withdrawn, and every call of that id is told it was not granted.
func (l *lessor) answerNow(ctx context.Context, o *office, w *waiter) (*acquireResult, error) {
	l.mu.Lock()
	if !w.claimed && w.res == nil && l.fsm.hasOutcome(w.cmd.ID.Session, w.cmd.ID.Seq) {
		// Another call's entry granted the id while this waiter queued
		// (its call had been refused before): a proposal is answered
		// that grant, which the FSM remembers.
		l.mu.Unlock()
		if res, err, final := l.proposeAsWaiter(ctx, o, w); final {
			return res, err
		}
		l.mu.Lock()
	}
	if !w.claimed && w.res == nil {
		l.dequeueLocked(o, w.cmd.Lease, w)
		if r, err := l.fsm.standing(w.cmd); err != nil {
			w.res = err
		} else {
			w.res = r
		}
		l.rememberRefusalLocked(o, w.cmd, w.res)
		close(w.done)
	}
	l.mu.Unlock()
	select {
	case <-w.done:
		return handedOff(w.res)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-o.ctx.Done():
		return nil, l.prop.notLeader()
	}
}

// proposeAsWaiter proposes w's Acquire after a wake-up, with w claimed
// by that proposal, unless an entry in flight carries it already. final
// reports that the call has its answer.
func (l *lessor) proposeAsWaiter(ctx context.Context, o *office, w *waiter) (*acquireResult, error, bool) {
	l.mu.Lock()
	if w.claimed || w.res != nil {
		l.mu.Unlock()
		return nil, nil, false
	}
	w.claimed = true
	l.mu.Unlock()
	res, err := l.proposeAcquire(ctx, o, w.cmd)
	switch {
	case err != nil && ctx.Err() != nil:
		l.settle(o, w, nil) // this call ended; others of its id wait on
		return nil, ctx.Err(), true
	case err != nil:
		l.settle(o, w, &handoff{Lease: w.cmd.Lease, Tried: true, Res: err})
	default:
		l.settle(o, w, &handoff{Lease: w.cmd.Lease, Tried: true, Res: res})
	}
	select {
	case <-w.done:
		r, err := handedOff(w.res)
		return r, err, true
	default:
		return nil, nil, false
	}
}

// carried reports whether an entry in flight carries w's Acquire.
func (l *lessor) carried(w *waiter) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return w.claimed
}

// standing answers an Acquire c that is not granted now, as the FSM would
// refuse it: a limit other than the one in force is refused as such;
// else the oldest holder's token and identity name, token 0 when the
// lease is free (and others wait for it).
func (f *fsm) standing(c acquireCmd) (*acquireResult, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if inForce, _ := f.inForceLocked(c.Lease); inForce != 0 && inForce != max(c.MaxHolders, 1) {
		return nil, &LimitMismatchError{Lease: c.Lease, Asked: max(c.MaxHolders, 1), InForce: inForce}
	}
	return f.refusalLocked(c.Lease), nil
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

// lastTry answers call c of waiter w, whose wait ran out: with the holder;
// or, if the lease happens to have room right now and no one else waits,
// with one more proposal, which carries w (claimed); a retry whose
// outcome the FSM remembers is answered that. A refusal, made by that
// entry or by none, is w's answer for every call of its request id
// (withdraw), and the office remembers it (refused.go), so that no later
// entry grants a request one of its calls was told was refused, whether
// that entry carries w or a call of the id that comes later. final is
// false when an entry claimed w meanwhile: its outcome is the answer.
func (l *lessor) lastTry(ctx context.Context, o *office, c acquireCmd, w *waiter) (res *acquireResult, err error, final bool) {
	if !l.fsm.hasOutcome(c.ID.Session, c.ID.Seq) {
		if r, held := l.fsm.refusal(c.Lease); held {
			return l.withdraw(o, w, r, nil)
		}
		l.mu.Lock()
		behind := l.queuedBehindLocked(o, c)
		l.mu.Unlock()
		if behind {
			r, err := l.fsm.standing(c)
			return l.withdraw(o, w, r, err)
		}
	}
	l.mu.Lock()
	if w.claimed {
		l.mu.Unlock()
		return nil, nil, false
	}
	if w.res != nil {
		l.mu.Unlock()
		res, err = handedOff(w.res)
		return res, err, true
	}
	w.claimed = true
	l.mu.Unlock()
	res, err = l.proposeAcquire(ctx, o, c)
	switch {
	case err != nil:
		// The entry's fate is unknown, or it answered this call with an
		// error: the id's other calls wait on.
		l.settle(o, w, nil)
		return nil, err, true
	case res.Granted || res.Ended:
		l.settle(o, w, &handoff{Lease: c.Lease, Tried: true, Res: res})
	default:
		// Refused, and this call's wait is over: the refusal is the
		// answer of every call of the id (withdraw, with the claim
		// ended under the same lock, so no entry claims w in between).
		l.mu.Lock()
		w.claimed = false
		if w.res == nil {
			l.dequeueLocked(o, w.cmd.Lease, w)
			w.res = res
			l.rememberRefusalLocked(o, w.cmd, w.res)
			close(w.done)
		}
		l.mu.Unlock()
	}
	<-w.done // answered above or by settle
	res, err = handedOff(w.res)
	return res, err, true
}

// withdraw takes w out of the queue with the answer r or err for every
// call of its request id, and returns w's answer (another call's, if it
// had one already); unless an entry in flight carries w (final false).
func (l *lessor) withdraw(o *office, w *waiter, r *acquireResult, err error) (*acquireResult, error, bool) {
	l.mu.Lock()
	if w.claimed {
		l.mu.Unlock()
		return nil, nil, false
	}
	if w.res == nil {
		l.dequeueLocked(o, w.cmd.Lease, w)
		w.res = r
		if err != nil {
			w.res = err
		}
		l.rememberRefusalLocked(o, w.cmd, w.res)
		close(w.done)
	}
	l.mu.Unlock()
	res, err := handedOff(w.res)
	return res, err, true
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

// enqueue adds a waiter for c, with one call, at the tail of the lease's
// queue; or attaches c to the waiter of its request id, if another call
// of it queued one meanwhile. ans, when not nil, is c's answer instead:
// the refusal this office gave c's request id meanwhile (refused.go).
func (l *lessor) enqueue(o *office, c acquireCmd) (w *waiter, ans any) {
	l.mu.Lock()
	if w = l.waiterLocked(o, c); w != nil {
		w.calls++
	} else if r, ok := l.refusedLocked(o, c); ok {
		l.mu.Unlock()
		l.test(testEvent{what: "refused again", lease: c.Lease})
		return nil, r
	} else {
		w = &waiter{cmd: c, wake: make(chan struct{}, 1), calls: 1, done: make(chan struct{}), unclaimed: make(chan struct{}, 1)}
		o.queues[c.Lease] = append(o.queues[c.Lease], w)
		if l.fsm.hasOutcome(c.ID.Session, c.ID.Seq) {
			// Another call's entry granted the id since c's own entry
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
// (nil: the entry failed). A granted waiter, one refused with an error,
// or a retry whose grant has ended gets its outcome, for every call of
// its id, and leaves the queue; one whose Acquire was not tried or was
// refused waits on and is woken if the lease is free, unless it is a
// ghost (its calls all ended), which leaves and passes the wake-up on. A
// ghost granted keeps its grant under its request id: a retry of that id
// is answered it, and its sidecar gives back what it does not want.
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
	poke(w.unclaimed)
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
// none when an entry in flight carries the head.
func (l *lessor) wakeHeadLocked(o *office, lease string) {
	if w := l.nextWaiterLocked(o, lease); w != nil {
		poke(w.wake)
	}
}

// release proposes a Release. When every server applies cmdRelease4 it
// carries the Acquire of the lease's first waiter, which the same entry
// grants if the release frees the lease (handoff.go); otherwise the freed
// event wakes the head waiter. Only a release that frees a grant when the
// leader proposes it carries a waiter: one naming an older token, another
// session's grant or a retried release changes nothing and must not hold
// the head's place (review 9/12/13 S1).
//
// A release under a session the FSM does not know (never opened, or
// closed) can free nothing: it is answered not released without an entry,
// which would open a session record kept for SessionIdleTimeout (review
// R8-2). A retry of a release whose session has closed since got the same
// answer from an entry.
func (l *lessor) release(ctx context.Context, c releaseCmd) (*releaseResult, error) {
	o, err := l.await(ctx)
	if err != nil {
		return nil, err
	}
	if !l.fsm.hasSession(c.ID.Session) {
		return &releaseResult{}, nil
	}
	defer l.touch(o, c.ID.Session)()
	allowed := l.prop.allowed()
	var w *waiter
	if allowed >= cmdRelease4 && l.frees(c) {
		l.mu.Lock()
		if w = l.claimLocked(o, c.Lease, 0); w != nil {
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

// frees reports whether c, applied now, would free a grant: its session
// and owner hold the lease with the token c names, and c is not a retry.
func (l *lessor) frees(c releaseCmd) bool {
	cur, held := l.fsm.grant(c.Lease, c.Token)
	return held && cur.Session == c.ID.Session && cur.Owner == c.Owner && !l.fsm.hasOutcome(c.ID.Session, c.ID.Seq)
}
