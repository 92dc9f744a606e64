package grantor

import (
	"context"
	"errors"
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
// attaches to that waiter. Every answer is a raft entry's (outcome.go): a
// call without wait proposes a Final Acquire, or a withdrawal when others
// wait ahead of it or its id is queued; a waiter whose wait runs out
// proposes its last try (lastTry).
func (l *lessor) acquire(ctx context.Context, c acquireCmd, wait time.Duration) (*acquireResult, error) {
	o, err := l.await(ctx)
	if err != nil {
		return nil, err
	}
	if (c.MaxHolders > 1 || c.Value != "") && l.prop.allowed() < cmdAcquire5 {
		return nil, ErrNotSupported
	}
	if c.Shared && l.prop.allowed() < sharedCmd {
		return nil, ErrSharedNotSupported
	}
	if c.LockDelay > 0 && l.prop.allowed() < lockDelayCmd {
		return nil, ErrLockDelayNotSupported
	}
	// A session belongs to its identity (ownership.go): a call of another
	// identity is refused here, before it can attach to the session's
	// waiters.
	if err := checkOwner(&sessionRecord{Owner: l.fsm.sessionOwner(c.ID.Session)}, c.ID.Session, c.Identity); err != nil {
		return nil, err
	}
	defer l.touch(o, c.ID.Session, c.TTL)()
	// Without wait, a refusal is the request's outcome for good.
	c.Final = wait == 0

	var expired <-chan struct{}
	if wait > 0 {
		t := l.clock.NewTimer(wait)
		defer t.Stop()
		expired = t.C()
	}
	var (
		w           *waiter
		behind      bool
		other, mine *proposal
	)
	for {
		if w, behind, other, mine, err = l.join(o, c, wait); err != nil {
			return nil, err
		}
		if other == nil {
			break
		}
		if res, err, final := l.awaitProposal(ctx, o, c.Lease, other); final {
			return res, err
		}
	}
	switch {
	case w != nil:
		defer l.quit(o, w)
		if wait == 0 {
			return l.withdraw(o, w)
		}
	case behind: // without wait, behind others: refused for good
		return l.refuseForGood(o, c)
	default:
		res, err := l.proposeAcquire(ctx, o, c)
		if err != nil || res.settled() || wait == 0 {
			// wait == 0 and not settled: an older grantor dropped Final.
			l.endProposal(o, c, mine, res, err)
			return res, err
		}
		w, err = l.enqueue(o, c)
		if errors.Is(err, errWaitForOwnGrant) {
			res, err = l.refuseForGood(o, c)
			l.endProposal(o, c, mine, res, err)
			return res, err
		}
		l.endProposal(o, c, mine, nil, nil) // queued: its other calls join the waiter
		if err != nil {
			return nil, err
		}
		defer l.quit(o, w)
	}
	for {
		select {
		case <-w.wake:
			if res, err, final := l.proposeAsWaiter(ctx, o, w); final {
				return res, err
			}
		case <-w.done:
			return handedOff(w.res)
		case <-expired:
			return l.lastTry(ctx, o, w)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-o.ctx.Done():
			return nil, l.prop.notLeader()
		}
	}
}

// settled reports whether r is its request's outcome, which waiting
// cannot change: a grant, a grant that has ended, or a refusal for good.
func (r *acquireResult) settled() bool { return r.Granted || r.Ended || r.Final }

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

// lastTry answers the calls of waiter w's request id once a call's wait
// ran out, with one entry of its own: a Final Acquire when the lease has
// room, no entry in flight carries w and nobody waits ahead of it
// (granted, or refused for good); else a withdrawal (withdraw). An entry
// that carries w and is still in flight is ordered with it by raft: if it
// grants w first, the withdrawal answers that grant.
func (l *lessor) lastTry(ctx context.Context, o *office, w *waiter) (*acquireResult, error) {
	l.mu.Lock()
	if w.res != nil {
		l.mu.Unlock()
		return handedOff(w.res)
	}
	try := !w.claimed && l.fsm.hasRoomFor(&w.cmd) && !l.queuedBehindLocked(o, w.cmd)
	w.claimed = w.claimed || try
	l.mu.Unlock()
	if !try {
		return l.withdraw(o, w)
	}
	c := w.cmd
	c.Final = true
	res, err := l.proposeAcquire(ctx, o, c)
	if err != nil {
		// The entry's fate is unknown, or it answered this call with an
		// error: the id's other calls wait on.
		l.settle(o, w, nil)
		return nil, err
	}
	l.settle(o, w, &handoff{Lease: c.Lease, Tried: true, Res: res})
	if !res.settled() {
		// An older grantor dropped Final: the refusal is not the
		// request's outcome yet.
		return l.withdraw(o, w)
	}
	<-w.done // settle answered w
	return handedOff(w.res)
}

// withdraw answers every call of w's request id with a withdrawal entry
// (proposeWithdraw) and takes w out of the queue: the grant an earlier
// entry made, else a refusal for good. An entry in flight that carries w
// is ordered with it by raft; both answer the same.
func (l *lessor) withdraw(o *office, w *waiter) (*acquireResult, error) {
	l.mu.Lock()
	done := w.res != nil
	l.mu.Unlock()
	if !done {
		r, err := l.proposeWithdraw(o, w.cmd)
		if err != nil {
			return nil, err // its fate unknown: the id's other calls wait on
		}
		l.mu.Lock()
		if w.res == nil {
			l.dequeueLocked(o, w.cmd.Lease, w)
			w.res = r
			close(w.done)
		}
		l.mu.Unlock()
	}
	return handedOff(w.res)
}

// refuseForGood answers c, not queued, with a withdrawal entry: refused
// for good (or the outcome its request id has already).
func (l *lessor) refuseForGood(o *office, c acquireCmd) (*acquireResult, error) {
	r, err := l.proposeWithdraw(o, c)
	if err != nil {
		return nil, err
	}
	return handedOff(r)
}

// proposeWithdraw proposes c withdrawn (cmdWithdraw) and returns the FSM's
// answer (*acquireResult or error): the outcome c's request has, else a
// refusal for good. This is the entry a timed-out waiter adds. Until every
// server applies cmdWithdraw, the answer is the refusal the FSM would give
// now, with no entry and nothing remembered, as older grantors answered
// (in a rolling upgrade, one request id may then get two answers until
// every grantor applies it: its sidecar gives back a grant it was not
// told of).
func (l *lessor) proposeWithdraw(o *office, c acquireCmd) (any, error) {
	if l.prop.allowed() < outcomeCmd {
		r, err := l.fsm.standing(c)
		if err != nil {
			return err, nil
		}
		return r, nil
	}
	if o.ctx.Err() != nil {
		return nil, l.prop.notLeader()
	}
	c.Final = true
	res, err := l.prop.apply(encodeCmd(cmdWithdraw, c))
	if err != nil {
		return nil, err
	}
	return res, nil
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
