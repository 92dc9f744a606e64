package grantor

import "slices"

// A handoff is one raft entry (issue 13 item 2).
//
// When a release or a session's expiry frees a lease that has waiters,
// the leader puts the Acquire of the lease's first waiter into the same
// entry (releaseCmd.Next, expireSessionCmd.Next), and the FSM applies it
// right after freeing the lease, with every rule of an Acquire: the
// waiter's session, its identity and limit, and its (session, seq), so a
// retry of that Acquire gets the same grant back. One commit instead of
// two, with the token counter and FIFO order unchanged: the waiter was
// the head of the queue, and the next token is the next token.
//
// The leader marks the waiter it attaches as claimed (waiters.go): a
// claimed waiter whose wait runs out does not leave, it waits for the
// entry's outcome, so it either gets the grant or the grant did not
// happen. A waiter whose client went away still has its grant recorded
// under its (session, seq); its sidecar gives back grants it does not
// know when its session's keepalive lists them (sessions.go).
//
// The FSM applies an attached Acquire only when the lease has room after
// the entry's own change (it is free, or a semaphore below its limit);
// otherwise it is not tried (the waiter waits on). Results come back in
// the order of the attached Acquires, so two waiters of one semaphore
// carried by one entry are told apart.

// grantRef names one grant in the log: a lease and its token.
type grantRef struct {
	Lease string `json:"lease"`
	Token uint64 `json:"token"`
}

// expireSessionCmd ends, in one entry, the grants a session held when the
// leader found its expiry passed (cmdExpireSession). Only the grants
// listed, and only while the session holds them with those tokens, are
// freed: a grant made to the session after the decision is not touched.
// Term is the raft term of the office that decided: an entry appended in
// another term (the office's leadership lapsed and came back unseen)
// changes nothing. Next are the Acquires of first waiters, one per lease.
type expireSessionCmd struct {
	Session string       `json:"session"`
	Term    uint64       `json:"term"`
	Leases  []grantRef   `json:"leases"`
	Next    []acquireCmd `json:"next,omitempty"`
}

// handoff is the outcome of a waiter's Acquire applied in a freeing entry.
type handoff struct {
	Lease string
	// Tried is false when the lease was not free, so the Acquire was not
	// applied and the waiter waits on.
	Tried bool
	// Res is the Acquire's result: *acquireResult or an error.
	Res any
}

// expireResult is what the FSM returns for an expireSessionCmd.
type expireResult struct {
	// StaleTerm is set when the entry was appended in another term than
	// the deciding office's, and nothing changed.
	StaleTerm bool
	Freed     int
	Next      []handoff
}

// handOff applies next, the first waiter's Acquire of lease, once lease
// is free; nil when there is none.
func (f *fsm) handOff(lease string, next *acquireCmd) *handoff {
	if next == nil {
		return nil
	}
	h := &handoff{Lease: lease}
	if next.Lease != lease || !f.hasRoomForLocked(next) {
		return h
	}
	h.Tried = true
	next.Final = false // a waiter's Acquire: its refusal means "wait on"
	h.Res = f.applyAcquire(next, true)
	return h
}

func (f *fsm) applyExpireSession(c *expireSessionCmd, term uint64) any {
	if term != c.Term {
		return &expireResult{StaleTerm: true}
	}
	res := &expireResult{}
	for _, g := range c.Leases {
		cur, held := f.grantLocked(g.Lease, g.Token)
		if !held || cur.Session != c.Session {
			continue
		}
		f.end(g.Lease, cur, freedExpired, true)
		res.Freed++
	}
	for i := range c.Next {
		if h := f.handOff(c.Next[i].Lease, &c.Next[i]); h != nil {
			res.Next = append(res.Next, *h)
		}
	}
	return res
}

// expireEntry is the log entry of a session's expiry: cmdExpireSession3
// when a waiter's Acquire it carries is shared and every server applies
// that, else cmdExpireSession2 without it (its waiters' Acquires may be
// semaphores or carry values), else cmdExpireSession without those.
func expireEntry(c expireSessionCmd, allowed cmdType) []byte {
	if allowed >= sharedCmd && slices.ContainsFunc(c.Next, func(a acquireCmd) bool { return a.Shared }) {
		return encodeCmd(cmdExpireSession3, c)
	}
	next := make([]acquireCmd, len(c.Next))
	for i, a := range c.Next {
		a.Shared = false
		if allowed < cmdExpireSession2 {
			oldAcquire(&a)
		}
		next[i] = a
	}
	c.Next = next
	if allowed >= cmdExpireSession2 {
		return encodeCmd(cmdExpireSession2, c)
	}
	return encodeCmd(cmdExpireSession, c)
}
