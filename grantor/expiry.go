package grantor

import (
	"container/heap"
	"errors"
	"slices"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

// expireJob is a session the expiry loop decided to end: its grants as the
// FSM showed them, and the first waiters of those leases, claimed for the
// handoff (handoff.go).
type expireJob struct {
	session string
	grants  []grantRef
	waiters []*waiter
}

// revokeJob is one lease of an expired session in a cluster with older
// grantors (no cmdExpireSession): it holds the lease's proposal slot until
// the Revoke is applied or failed.
type revokeJob struct {
	session string
	lease   string
	token   uint64
	slot    chan struct{}
}

// expiryLoop is the leader's only source of expiries. It sleeps on a
// Clock timer until the earliest session expiry or lock-delay end (or
// maxExpirySleep), then re-reads Clock.Now and ends what has passed: the
// timer only wakes it, the Clock decides. It also forgets idle sessions:
// one that holds nothing and has not been seen for its own term since it
// last held something or was last seen (as its grants would run:
// GrantorExpiry from then), or for sessionIdle when this office has not
// seen its term (opened under an earlier leader, and quiet since); one
// whose record remembers a grant or a release not before outcomeKeep.
func (l *lessor) expiryLoop(o *office) {
	defer l.wg.Done()
	t := l.clock.NewTimer(maxExpirySleep)
	defer t.Stop()
	for {
		if !l.current(o) {
			return // expiries of an earlier term are not this term's to act on
		}
		l.scanMu.Lock()
		now := l.clock.Now()
		expires, revokes, closes, next := l.scan(o, now)
		ends, next := l.scanDelays(o, now, next)
		for _, j := range ends {
			l.wg.Add(1)
			go l.endDelay(o, j)
		}
		for _, j := range expires {
			l.wg.Add(1)
			go l.expire(o, j)
		}
		for _, j := range revokes {
			l.wg.Add(1)
			go l.revoke(o, j)
		}
		for _, c := range closes {
			l.wg.Add(1)
			go l.closeSession(o, c)
		}
		d := next.Sub(now)
		if d <= 0 {
			d = 1 // cannot happen: scan only returns future instants
		}
		l.mu.Lock()
		o.wakeAt, o.armed = next, true
		l.mu.Unlock()
		t.Reset(d)
		l.scanMu.Unlock()
		l.test(testEvent{what: "sleep", now: now})
		select {
		case <-t.C():
		case <-o.kick:
		case <-o.ctx.Done():
			return
		}
	}
}

// scan finds the sessions whose expiry has passed at now and decides to
// end them, finds idle sessions to forget, and returns when to look again.
// Sessions come off the due heap in order, so a scan costs what is due:
// renewals move expiries later without touching the heap, and an entry
// that surfaces early is put back at the session's current due instant.
func (l *lessor) scan(o *office, now clockwatch.Instant) (expires []expireJob, revokes []revokeJob, closes []closeSessionCmd, next clockwatch.Instant) {
	l.mu.Lock()
	defer l.mu.Unlock()
	next = now.Add(maxExpirySleep)
	o.armed = false
	if !o.active {
		return nil, nil, nil, next
	}
	oneEntry := l.prop.allowed() >= cmdExpireSession
	o.slotWanted.Store(!oneEntry)
	busy := false // a lease of an older cluster's expiry had its slot taken
	for len(o.due) > 0 && !now.Before(o.due[0].at) {
		d := heap.Pop(&o.due).(dueEntry)
		s := o.sessions[d.name]
		if s != d.s || s.queued != d.at || s.expiry == 0 {
			continue // stale: the session is gone, emptied, or queued again
		}
		due := s.expiry
		if s.revoking {
			due = s.retryAt
		}
		if now.Before(due) {
			o.queueLocked(d.name, s, due)
			continue
		}
		var grants []grantRef
		if s.revoking {
			// A retry: the decision's grants still held, nothing newer.
			if grants = l.fsm.stillHeld(d.name, s.decided); len(grants) == 0 {
				if !l.finishDecisionLocked(o, d.name, s) || now.Before(s.expiry) {
					continue
				}
				// Grants made after the decision have expired too.
			}
		}
		if !s.revoking {
			held, _ := l.fsm.sessionHeld(d.name)
			if len(held) == 0 {
				o.emptiedLocked(d.name, now)
				continue
			}
			// Only grants whose events this office has seen: a grant
			// applied since moves the session's expiry when its event
			// comes, and runs until then.
			grants = slices.DeleteFunc(held, func(g grantRef) bool { return g.Token > o.seen })
			if len(grants) == 0 {
				o.queueLocked(d.name, s, now.Add(1)) // looked at again after the event's kick
				o.unseen = true
				continue
			}
		}
		s.revoking, s.decided = true, grants
		s.retryAt = now.Add(revokeRetry)
		for _, g := range grants {
			l.test(testEvent{what: "decided", now: now, lease: g.Lease})
		}
		o.queueLocked(d.name, s, s.retryAt)
		if !oneEntry {
			for _, g := range grants {
				slot := l.slot(g.Lease)
				select {
				case slot <- struct{}{}:
					revokes = append(revokes, revokeJob{session: d.name, lease: g.Lease, token: g.Token, slot: slot})
				default:
					// A proposal for this lease is in flight; releasing the
					// slot pokes this loop, and the retry comes at retryAt.
					busy = true
				}
			}
			continue
		}
		j := expireJob{session: d.name, grants: grants}
		carried := map[string]int{} // per lease: waiters from the head this entry carries
		for _, g := range grants {
			if w := l.claimLocked(o, g.Lease, carried[g.Lease]); w != nil {
				j.waiters = append(j.waiters, w)
				carried[g.Lease]++
			}
		}
		expires = append(expires, j)
	}
	if busy {
		next = minInstant(next, now.Add(revokeRetry))
	}
	if len(o.due) > 0 {
		next = minInstant(next, o.due[0].at)
	}
	for id, s := range o.sessions {
		if s.busy > 0 || s.expiry != 0 {
			continue
		}
		idleAt := s.last.Add(l.sessionIdle)
		if s.term > 0 {
			idleAt = l.timing.GrantorExpiry(s.last, s.term)
		}
		if now.Before(idleAt) {
			next = minInstant(next, idleAt)
			continue
		}
		kept := false
		if keepAt := s.last.Add(l.outcomeKeep()); now.Before(keepAt) && l.fsm.remembersAnswer(id) {
			// A retry of a request it was answered may still come
			// (outcome.go): judged afresh, it would get a second answer.
			next = minInstant(next, keepAt)
			l.test(testEvent{what: "outcomes kept", lease: id})
			continue
		} else if !now.Before(keepAt) {
			kept = true
		}
		delete(o.sessions, id)
		if l.fsm.holdsLeases(id) {
			// Still in use; a later request adds it back.
			continue
		}
		if l.fsm.hasSession(id) {
			closes = append(closes, closeSessionCmd{Session: id, Kept: kept})
		}
	}
	return expires, revokes, closes, next
}

// outcomeKeep is how long after a quiet session was last seen the leader
// keeps its record while the record remembers a grant or a release
// (outcome.go): SessionIdleTimeout plus the longest wait an Acquire may
// ask for (2 h by default). A sidecar sends no attempt of a request id
// later than 90 minutes after its first (daemon: idHorizon), and the
// grantor cannot have seen the session after an attempt before that first
// one was sent: every retry finds its outcome. A session whose record
// remembers only refusals is forgotten after its own term (review R8-2).
func (l *lessor) outcomeKeep() time.Duration { return l.sessionIdle + MaxWait }

// expire proposes one entry that ends j's grants and hands each lease
// with waiters to its first waiter.
func (l *lessor) expire(o *office, j expireJob) {
	defer l.wg.Done()
	c := expireSessionCmd{Session: j.session, Term: o.term, Leases: j.grants}
	for _, w := range j.waiters {
		c.Next = append(c.Next, w.cmd)
	}
	settleAll := func(r *expireResult) {
		// r.Next answers c.Next in order: two waiters of one semaphore
		// are told apart by their place.
		for i, w := range j.waiters {
			var h *handoff
			if r != nil && i < len(r.Next) {
				h = &r.Next[i]
			}
			if h != nil && h.Tried {
				if g, ok := h.Res.(*acquireResult); ok && g.Granted {
					l.granted(o, w.cmd.ID.Session, g.TTL)
				}
			}
			l.settle(o, w, h)
		}
	}
	if !l.current(o) {
		settleAll(nil)
		return
	}
	res, err := l.prop.apply(expireEntry(c, l.prop.allowed()))
	r, _ := res.(*expireResult)
	settleAll(r)
	if err != nil || r == nil {
		// Still marked revoking: renewals answer "not renewed", and the
		// loop decides again at retryAt (or the office ends).
		if err != nil && !errors.Is(err, ErrNotLeader) {
			l.log.Warn("grantor: ending an expired session failed", "session", j.session, "err", err)
		}
		return
	}
	if r.StaleTerm {
		l.current(o) // ends this office
		return
	}
	l.mu.Lock()
	if s := o.sessions[j.session]; s != nil && s.revoking {
		l.finishDecisionLocked(o, j.session, s)
	}
	l.mu.Unlock()
	poke(o.kick)
	l.metrics.revokes.Add(uint64(r.Freed))
	l.audit.expireSession(j.session, c.Leases, r.Freed)
	l.test(testEvent{what: "counted expiry"})
	l.log.Debug("grantor: ended expired session", "session", j.session, "leases", r.Freed, "handoffs", len(r.Next))
}

// revoke proposes the Revoke of one lease of an expired session, in a
// cluster with older grantors.
func (l *lessor) revoke(o *office, j revokeJob) {
	defer l.wg.Done()
	defer l.releaseSlot(o, j.slot)
	if !l.current(o) {
		return
	}
	res, err := l.prop.apply(encodeCmd(cmdRevoke, revokeCmd{Lease: j.lease, Token: j.token}))
	if err != nil {
		if !errors.Is(err, ErrNotLeader) {
			l.log.Warn("grantor: revoke failed", "lease", j.lease, "token", j.token, "err", err)
		}
		return
	}
	if r, ok := res.(*revokeResult); ok && r.Revoked {
		l.metrics.revokes.Add(1)
		l.audit.revoke(j.lease, j.token)
	}
	l.mu.Lock()
	if s := o.sessions[j.session]; s != nil && s.revoking {
		l.finishDecisionLocked(o, j.session, s)
	}
	l.mu.Unlock()
}

// finishDecisionLocked ends session's decision to expire once none of the
// grants it decided to end stands, and reports whether it did. A session
// that holds nothing then is emptied; one that was granted leases after
// the decision keeps them until the expiry those grants gave it
// (extendLocked), where it is queued again: the decision never ends a
// grant it did not list (finding R1).
func (l *lessor) finishDecisionLocked(o *office, session string, s *sessionState) bool {
	if len(l.fsm.stillHeld(session, s.decided)) > 0 {
		return false
	}
	s.revoking, s.decided = false, nil
	if !l.fsm.holdsLeases(session) {
		o.emptiedLocked(session, l.clock.Now())
		return true
	}
	o.queueLocked(session, s, s.expiry)
	poke(o.kick)
	return true
}

// closeSession proposes the end of an idle session's record: a
// cmdCloseSession2, which every replica applies only while the session
// holds nothing and its record remembers no grant or release (unless
// c.Kept), when every server applies it; else a cmdCloseSession.
func (l *lessor) closeSession(o *office, c closeSessionCmd) {
	defer l.wg.Done()
	t := cmdCloseSession2
	if l.prop.allowed() < cmdCloseSession2 {
		t = cmdCloseSession
		c.Kept = false
	}
	if _, err := l.prop.apply(encodeCmd(t, c)); err != nil {
		l.log.Debug("grantor: closing idle session failed", "session", c.Session, "err", err)
	}
}

func minInstant(a, b clockwatch.Instant) clockwatch.Instant {
	if b.Before(a) {
		return b
	}
	return a
}

// dueEntry says that session name (state s) must be looked at again at at.
type dueEntry struct {
	at   clockwatch.Instant
	name string
	s    *sessionState
}

// dueHeap is a min-heap of dueEntry by at (container/heap).
type dueHeap []dueEntry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }

// Push is for container/heap.
func (h *dueHeap) Push(x any) { *h = append(*h, x.(dueEntry)) }

// Pop is for container/heap.
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = dueEntry{}
	*h = old[:len(old)-1]
	return x
}

// queueLocked puts session name on the due heap at at; earlier entries
// for it become stale.
func (o *office) queueLocked(name string, s *sessionState, at clockwatch.Instant) {
	s.queued = at
	heap.Push(&o.due, dueEntry{at: at, name: name, s: s})
}

// sessionLocked returns the state of session, creating it.
func (o *office) sessionLocked(session string) *sessionState {
	s := o.sessions[session]
	if s == nil {
		s = &sessionState{}
		o.sessions[session] = s
	}
	return s
}

// extendLocked records that session's grants are live until at least
// GrantorExpiry(tG, ttl), and that it holds a grant of term ttl. Only a
// session that held nothing is put on the due heap: later expiries do not
// touch it, and an entry that surfaces early is put back (expiry.go).
func (o *office) extendLocked(t clockwatch.Timing, session string, ttl time.Duration, tG clockwatch.Instant) {
	s := o.sessionLocked(session)
	s.ttl = max(s.ttl, ttl)
	s.term = max(s.term, ttl)
	exp := t.GrantorExpiry(tG, s.ttl)
	switch {
	case s.expiry == 0:
		s.expiry = exp
		o.queueLocked(session, s, exp)
		// The loop is also woken when the instant it slept until has
		// passed without it: its timer runs on the monotonic clock, which
		// a suspend of the host stops, and what was due is overdue.
		if !o.armed || exp.Before(o.wakeAt) || !tG.Before(o.wakeAt) {
			poke(o.kick)
		}
	case exp.After(s.expiry):
		s.expiry = exp
	}
}

// emptiedLocked notes that session holds no lease any more, at now: it is
// idle from then (expiry.go).
func (o *office) emptiedLocked(session string, now clockwatch.Instant) {
	if s := o.sessions[session]; s != nil {
		s.ttl, s.expiry, s.revoking, s.decided = 0, 0, false, nil
		if now.After(s.last) {
			s.last = now
		}
	}
}
