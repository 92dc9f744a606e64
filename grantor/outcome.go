package grantor

import "fmt"

// Every outcome of a request id is the FSM's (issue 22 item 1).
//
// An Acquire's request id (session, seq) gets one answer, whichever call
// of it asks (the sidecar's first attempt, a retry on another connection,
// an attempt held up on the way that arrives last) and whichever leader
// it reaches. Every answer is decided by a raft entry and remembered in
// the session's record until the session acknowledges it (its floor, or
// also_received), as a grant always was:
//
//   - a grant (Outcomes[seq] names its token);
//   - a refusal for good: an Acquire entry with Final (a call without
//     wait, or a waiter's last try when the lease has room) that is not
//     granted, or a cmdWithdraw entry (a waiter whose wait ran out, or a
//     call without wait that finds others queued ahead of it), which
//     never grants: it is answered the outcome its request already has,
//     "granted" when an earlier entry granted it, else "refused" for good
//     (Outcomes[seq].Refused);
//   - a release (Outcomes[seq] with Kind cmdRelease).
//
// An entry that meets a request with an outcome answers that outcome and
// changes nothing: a refused request is never granted later, by any
// entry (its own late first attempt, a handoff that carried its waiter).
// A waiter's own entries before its wait runs out are not Final: their
// refusal means "wait on" and is not remembered.
//
// The leader keeps nothing of its own that decides an answer: its queues
// order the waiters and its proposals in flight (proposing.go) save
// entries, and a new leader without them gives the same answers.
//
// A refusal under a session that holds nothing is remembered only while
// the session's record lasts; the leader ends such a session after its
// own term (sessions.go), so a caller polling under made-up sessions
// leaves no lasting records (review R8-2).
//
// A record that remembers a grant or a release outlasts its session's
// quiet term: a sidecar cut off from the leader for longer than the term
// retries, after the heal, a request whose reply it lost, and judged
// afresh that retry got a second answer (chaos seed 506290559812: a
// grant, then "held by" the next holder; or a second grant). The leader
// keeps such a record until outcomeKeep after the session was last seen
// (expiry.go), longer than any sidecar retries one id (daemon: idHorizon),
// and the close is an entry (cmdCloseSession2) that every replica applies
// only to a session that holds nothing and whose record remembers no
// grant or release, unless the leader kept it that long.

// outcomeCmd is the command type from which every outcome is an entry's:
// cmdAcquire8 (Final) and cmdWithdraw, which one binary applies together.
const outcomeCmd = cmdWithdraw

// remembered answers c from the outcome its request id has, if it has
// one: the grant while it stands, Ended once it has ended, the refusal
// again, or ErrSeqReused when the seq was used for something else.
func (f *fsm) remembered(s *sessionRecord, c *acquireCmd) (any, bool) {
	o, dup := s.Outcomes[c.ID.Seq]
	if !dup {
		return nil, false
	}
	if o.Kind != cmdAcquire || o.Lease != c.Lease || o.Owner != c.Owner {
		return fmt.Errorf("%w: seq %d was %v of %q", ErrSeqReused, c.ID.Seq, o.Kind, o.Lease), true
	}
	if o.Refused {
		r, err := f.standingLocked(*c)
		if err != nil {
			return err, true
		}
		r.Final = true
		return r, true
	}
	// A retry of a granted Acquire. Answer "granted" only while that very
	// grant still stands; a grant that has since ended must not be handed
	// out again as if it were live, nor be answered as a refusal (the
	// Acquire took effect: chaos finding F4).
	if cur, ok := f.grantLocked(c.Lease, o.Token); ok && cur.Session == c.ID.Session && cur.Owner == c.Owner {
		f.event(fsmEvent{Kind: evGranted, Lease: c.Lease, Rec: cur, Retry: true})
		return f.grantedLocked(c.Lease, cur), true
	}
	return f.endedLocked(c.Lease, o.Token), true
}

// refuse answers c, not granted, with r (*acquireResult or
// *LimitMismatchError). When c is Final, that is its request's outcome:
// remembered, and r is marked Final.
func (f *fsm) refuse(s *sessionRecord, c *acquireCmd, r any) any {
	if !c.Final {
		return r
	}
	s.Outcomes[c.ID.Seq] = outcome{Kind: cmdAcquire, Lease: c.Lease, Owner: c.Owner, Refused: true}
	if a, ok := r.(*acquireResult); ok {
		a.Final = true
	}
	return r
}

// applyWithdraw applies a cmdWithdraw: c is not granted. Its request is
// answered the outcome it has, if any (a grant an earlier entry made),
// else refused for good.
func (f *fsm) applyWithdraw(c *acquireCmd) any {
	s, err := f.session(c.ID, c.Identity)
	if err != nil {
		return err
	}
	if r, ok := f.remembered(s, c); ok {
		return r
	}
	if len(s.Outcomes) >= maxOutstanding {
		return fmt.Errorf("%w: session %q has %d", ErrTooManyOutstanding, c.ID.Session, len(s.Outcomes))
	}
	c.Final = true
	r, err := f.standingLocked(*c)
	if err != nil {
		return f.refuse(s, c, err)
	}
	return f.refuse(s, c, r)
}

// standing answers an Acquire c that is not granted now, as the FSM would
// refuse it: a limit other than the one in force is refused as such;
// else the oldest holder's token and identity name, token 0 when the
// lease is free (and others wait for it).
func (f *fsm) standing(c acquireCmd) (*acquireResult, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.standingLocked(c)
}

func (f *fsm) standingLocked(c acquireCmd) (*acquireResult, error) {
	if err := f.mismatchLocked(&c); err != nil {
		return nil, err
	}
	if c.Shared || f.sharedLocked(c.Lease) {
		return f.refusalLocked(c.Lease), nil
	}
	if inForce, _ := f.inForceLocked(c.Lease); inForce != 0 && inForce != max(c.MaxHolders, 1) {
		return nil, &LimitMismatchError{Lease: c.Lease, Asked: max(c.MaxHolders, 1), InForce: inForce}
	}
	return f.refusalLocked(c.Lease), nil
}

// remembersAnswer reports whether session's record remembers an outcome
// other than a refusal: a grant or a release its sidecar has not
// acknowledged, which a retry could still ask for.
func (f *fsm) remembersAnswer(session string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.remembersAnswerLocked(session)
}

func (f *fsm) remembersAnswerLocked(session string) bool {
	if s := f.st.Sessions[session]; s != nil {
		for _, o := range s.Outcomes {
			if !o.Refused {
				return true
			}
		}
	}
	return false
}

// closable says whether a cmdCloseSession2 closes c's session: only one
// that holds nothing, and whose record remembers no grant or release
// unless the leader kept it for outcomeKeep (c.Kept). Whatever the leader
// decided, an entry applied between its decision and the close (a retry
// that came just then) cannot lose its answer.
func (f *fsm) closable(c *closeSessionCmd) bool {
	return f.bySession[c.Session] == nil && (c.Kept || !f.remembersAnswerLocked(c.Session))
}

// endedLocked answers a retried Acquire whose grant (token) was made and
// has ended since: Ended, with that token and the name's limit and
// holders now.
func (f *fsm) endedLocked(lease string, token uint64) *acquireResult {
	limit, holders := f.inForceLocked(lease)
	if f.sharedLocked(lease) {
		return &acquireResult{Ended: true, Token: token, Holders: len(holders), Shared: true}
	}
	return &acquireResult{Ended: true, Token: token, Limit: max(limit, 1), Holders: len(holders)}
}
