package grantor

import (
	"context"
	"time"
)

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
	if c.LockDelay > 0 && l.prop.allowed() < lockDelayCmd {
		return nil, ErrLockDelayNotSupported
	}
	// A session belongs to its identity (ownership.go): a call of another
	// identity is refused here, before it can attach to the session's
	// waiters or be answered from what this office remembers of it.
	if err := checkOwner(&sessionRecord{Owner: l.fsm.sessionOwner(c.ID.Session)}, c.ID.Session, c.Identity); err != nil {
		return nil, err
	}
	defer l.touch(o, c.ID.Session, c.TTL)()

	var expired <-chan struct{}
	if wait > 0 {
		t := l.clock.NewTimer(wait)
		defer t.Stop()
		expired = t.C()
	}
	var (
		w           *waiter
		ans         any
		other, mine *proposal
	)
	for {
		if w, ans, other, mine = l.join(o, c, wait); other == nil {
			break
		}
		if res, err, final := l.awaitProposal(ctx, o, c, other, wait > 0); final {
			return res, err
		}
	}
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
			l.endProposal(o, c, mine, res, err)
			return res, err
		}
		if wait == 0 {
			res, err = l.refusedNow(ctx, o, c, res)
			l.endProposal(o, c, mine, res, err)
			return res, err
		}
		w, ans = l.enqueue(o, c)
		l.endProposal(o, c, mine, nil, nil) // queued: its other calls join the waiter
		if ans != nil {
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
	defer l.touch(o, c.ID.Session, 0)()
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
// and owner hold the lease with the token c names, c is not a retry, and
// it does not end the grant into its lock-delay.
func (l *lessor) frees(c releaseCmd) bool {
	cur, held := l.fsm.grant(c.Lease, c.Token)
	if c.OwnerEnded && cur.LockDelay > 0 {
		return false // it ends the grant into a lock-delay: nobody is handed the name
	}
	return held && cur.Session == c.ID.Session && cur.Owner == c.Owner && !l.fsm.hasOutcome(c.ID.Session, c.ID.Seq)
}
