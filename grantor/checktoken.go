package grantor

import (
	"context"
	"slices"
)

// Token checks at the grantor (issue 12; Chubby's CheckSequencer).
//
// A resource that can call out, rather than store the highest token it has
// seen, asks whether a token is still a live grant of a name. The leader
// answers from its lease table, with no raft entry: after a VerifyLeader
// round that started after the question arrived, as renewals are
// acknowledged (keepalive.go), so that an answer never comes from a
// deposed leader whose table a successor may have moved past. Checks that
// arrive while a round runs share the next one: one round per batch, not
// per check.
//
// "Live" means: the FSM holds the grant (lease, token), and the leader has
// not decided that its session expired (the session's expiry has not
// passed on its clock, and no expiry entry for it is in flight). The
// answer is only as good as the time between it and the caller's write:
// a grant can end right after the check.

// tokenCheck is one question waiting for a verify round.
type tokenCheck struct {
	lease string
	token uint64
	done  chan checkResult // 1-buffered
}

// checkResult answers a tokenCheck.
type checkResult struct {
	live   bool
	tokens []uint64 // the lease's grants now, oldest first
	err    error
}

// checkToken answers whether token is a live grant of lease.
func (l *lessor) checkToken(ctx context.Context, lease string, token uint64) (bool, []uint64, error) {
	o, err := l.await(ctx)
	if err != nil {
		return false, nil, err
	}
	q := &tokenCheck{lease: lease, token: token, done: make(chan checkResult, 1)}
	l.mu.Lock()
	if !o.active {
		l.mu.Unlock()
		return false, nil, l.prop.notLeader()
	}
	o.checks = append(o.checks, q)
	l.mu.Unlock()
	poke(o.checkWake)
	l.test(testEvent{what: "check queued", lease: lease})
	select {
	case r := <-q.done:
		return r.live, r.tokens, r.err
	case <-ctx.Done():
		return false, nil, ctx.Err()
	case <-o.ctx.Done():
		return false, nil, l.prop.notLeader()
	}
}

// checkLoop runs the verify rounds of token checks for one office, as
// verifyLoop does for renewals: each round takes every check that has
// arrived, confirms leadership with one quorum round started after them,
// then answers them all from the lease table. A failed round answers
// NotLeader.
func (l *lessor) checkLoop(o *office) {
	defer l.wg.Done()
	for {
		select {
		case <-o.checkWake:
		case <-o.ctx.Done():
			return
		}
		l.mu.Lock()
		batch := o.checks
		o.checks = nil
		l.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		if err := l.confirmLeader(o); err != nil {
			nl := l.prop.notLeader()
			for _, q := range batch {
				q.done <- checkResult{err: nl}
			}
			continue
		}
		now := l.clock.Now() // after the round returned
		l.mu.Lock()
		active := o.active
		results := make([]checkResult, len(batch))
		for i, q := range batch {
			if !active {
				results[i] = checkResult{err: l.prop.notLeader()}
				continue
			}
			_, _, hs, _ := l.fsm.holders(q.lease)
			r := checkResult{tokens: make([]uint64, len(hs))}
			for j, h := range hs {
				r.tokens[j] = h.Token
			}
			if i := slices.IndexFunc(hs, func(h holderView) bool { return h.Token == q.token }); i >= 0 {
				s := o.sessions[hs[i].Session]
				ended := s != nil && s.revoking && slices.Contains(s.decided, grantRef{q.lease, q.token})
				r.live = s == nil || !(ended || s.expiry != 0 && !now.Before(s.expiry))
			}
			results[i] = r
		}
		l.mu.Unlock()
		for i, q := range batch {
			q.done <- results[i]
		}
	}
}
