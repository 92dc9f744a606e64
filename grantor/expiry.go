package grantor

import (
	"container/heap"
	"errors"

	"github.com/leaseside/leaseside/clockwatch"
)

// revokeJob is a lease the expiry loop decided to revoke; it holds the
// lease's proposal slot until the Revoke is applied or failed.
type revokeJob struct {
	lease string
	token uint64
	slot  chan struct{}
}

// expiryLoop is the leader's only source of revocations. It sleeps on a
// Clock timer until the earliest expiry (or maxExpirySleep), then re-reads
// Clock.Now and revokes what has passed: the timer only wakes it, the
// Clock decides. It also forgets idle sessions.
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
		revokes, closes, next := l.scan(o, now)
		for _, j := range revokes {
			l.wg.Add(1)
			go l.revoke(o, j)
		}
		for _, s := range closes {
			l.wg.Add(1)
			go l.closeSession(o, s)
		}
		d := next.Sub(now)
		if d <= 0 {
			d = 1 // cannot happen: scan only returns future instants
		}
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

// scan finds the leases whose expiry has passed at now and marks them
// revoking, finds idle sessions to forget, and returns when to look again.
// Leases come off the due heap in order, so a scan costs what is due:
// renewals move expiries later without touching the heap, and an entry
// that surfaces early is put back at the lease's current due instant.
func (l *lessor) scan(o *office, now clockwatch.Instant) (revokes []revokeJob, closes []string, next clockwatch.Instant) {
	l.mu.Lock()
	defer l.mu.Unlock()
	next = now.Add(maxExpirySleep)
	if !o.active {
		return nil, nil, next
	}
	var busy []dueEntry // due, but their proposal slot is taken
	for len(o.due) > 0 && !now.Before(o.due[0].at) {
		d := heap.Pop(&o.due).(dueEntry)
		e := o.leases[d.name]
		if e != d.e || e.queued != d.at {
			continue // stale: the lease is gone, re-granted, or queued again
		}
		due := e.expiry
		if e.revoking {
			due = e.retryAt
		}
		if now.Before(due) {
			o.queueLocked(d.name, e, due)
			continue
		}
		slot := l.slot(d.name)
		select {
		case slot <- struct{}{}:
		default:
			// A proposal for this lease (or one sharing its slot) is in
			// flight; releasing the slot pokes this loop.
			busy = append(busy, d)
			continue
		}
		e.revoking = true
		e.retryAt = now.Add(revokeRetry)
		o.queueLocked(d.name, e, e.retryAt)
		revokes = append(revokes, revokeJob{lease: d.name, token: e.token, slot: slot})
	}
	for _, d := range busy {
		heap.Push(&o.due, d) // still due: looked at again when the slot frees
	}
	switch {
	case len(busy) > 0:
		// The slot's release pokes the loop; this is the backstop.
		next = minInstant(next, now.Add(revokeRetry))
	case len(o.due) > 0:
		next = minInstant(next, o.due[0].at)
	}
	for id, s := range o.sessions {
		if s.busy > 0 {
			continue
		}
		idleAt := s.last.Add(l.sessionIdle)
		if now.Before(idleAt) {
			next = minInstant(next, idleAt)
			continue
		}
		delete(o.sessions, id)
		if l.fsm.holdsLeases(id) {
			// Still in use; a later request adds it back.
			continue
		}
		if l.fsm.hasSession(id) {
			closes = append(closes, id)
		}
	}
	return revokes, closes, next
}

func (l *lessor) revoke(o *office, j revokeJob) {
	defer l.wg.Done()
	defer l.releaseSlot(o, j.slot)
	if !l.current(o) {
		return
	}
	res, err := l.prop.apply(encodeCmd(cmdRevoke, revokeCmd{Lease: j.lease, Token: j.token}))
	if err != nil {
		// Still marked revoking: renewals of it answer lost, and the loop
		// proposes again at retryAt (or the office ends).
		if !errors.Is(err, ErrNotLeader) {
			l.log.Warn("grantor: revoke failed", "lease", j.lease, "token", j.token, "err", err)
		}
		return
	}
	if r, ok := res.(*revokeResult); ok && !r.Revoked {
		// The grant had already ended (released); its freed event removed
		// it, unless the table was stale: drop it now.
		l.mu.Lock()
		if e := o.leases[j.lease]; e != nil && e.token == j.token {
			delete(o.leases, j.lease)
		}
		l.mu.Unlock()
		return
	}
	l.metrics.revokes.Add(1)
	l.log.Debug("grantor: revoked expired lease", "lease", j.lease, "token", j.token)
}

func (l *lessor) closeSession(o *office, session string) {
	defer l.wg.Done()
	if _, err := l.prop.apply(encodeCmd(cmdCloseSession, closeSessionCmd{Session: session})); err != nil {
		l.log.Debug("grantor: closing idle session failed", "session", session, "err", err)
	}
}

func minInstant(a, b clockwatch.Instant) clockwatch.Instant {
	if b.Before(a) {
		return b
	}
	return a
}

// dueEntry says that lease name (state e) must be looked at again at at.
type dueEntry struct {
	at   clockwatch.Instant
	name string
	e    *leaseState
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

// addLeaseLocked enters a new grant in the office and on the due heap.
func (o *office) addLeaseLocked(name string, e *leaseState) {
	o.leases[name] = e
	o.queueLocked(name, e, e.expiry)
}

// queueLocked puts lease name on the due heap at at; earlier entries for
// it become stale.
func (o *office) queueLocked(name string, e *leaseState, at clockwatch.Instant) {
	e.queued = at
	heap.Push(&o.due, dueEntry{at: at, name: name, e: e})
}
