package grantor

import (
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
func (l *lessor) scan(o *office, now clockwatch.Instant) (revokes []revokeJob, closes []string, next clockwatch.Instant) {
	l.mu.Lock()
	defer l.mu.Unlock()
	next = now.Add(maxExpirySleep)
	if !o.active {
		return nil, nil, next
	}
	for name, e := range o.leases {
		due := e.expiry
		if e.revoking {
			due = e.retryAt
		}
		if now.Before(due) {
			next = minInstant(next, due)
			continue
		}
		slot := l.slot(name)
		select {
		case slot <- struct{}{}:
		default:
			// A proposal for this lease (or one sharing its slot) is in
			// flight; releasing the slot pokes this loop.
			continue
		}
		e.revoking = true
		e.retryAt = now.Add(revokeRetry)
		next = minInstant(next, e.retryAt)
		revokes = append(revokes, revokeJob{lease: name, token: e.token, slot: slot})
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
