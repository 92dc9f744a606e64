package grantor

import (
	"context"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

// leaseRef names one grant: a lease and its token, with a term: in a
// request the one the holder computes with (0 when unstated), in a reply
// the one the grantor applied.
type leaseRef struct {
	Lease string
	Token uint64
	TTL   time.Duration
}

// renewal is one keepalive request waiting for a verify round.
type renewal struct {
	session string
	refs    []leaseRef
	done    chan renewResult // 1-buffered
}

// renewResult answers a renewal.
type renewResult struct {
	renewed, lost []leaseRef
	tG            clockwatch.Instant
	err           error
}

// renew is rule 4 of the grantor: renewals are leader-local, and a batch
// is acknowledged only after one VerifyLeader round that started after the
// batch arrived. renew queues the request for the next round and waits.
func (l *lessor) renew(ctx context.Context, o *office, session string, refs []leaseRef) (renewResult, error) {
	defer l.touch(o, session)()
	r := &renewal{session: session, refs: refs, done: make(chan renewResult, 1)}
	l.mu.Lock()
	if !o.active {
		l.mu.Unlock()
		return renewResult{}, l.prop.notLeader()
	}
	o.pending = append(o.pending, r)
	l.mu.Unlock()
	poke(o.kaWake)
	l.test(testEvent{what: "pending"})
	select {
	case res := <-r.done:
		return res, res.err
	case <-ctx.Done():
		return renewResult{}, ctx.Err()
	case <-o.ctx.Done():
		return renewResult{}, l.prop.notLeader()
	}
}

// verifyLoop runs the verify rounds of one office. Each round takes every
// renewal that has arrived, then starts one VerifyLeader; renewals that
// arrive during the round wait for the next. Only after the round succeeds
// does it read tG and extend expiries to GrantorExpiry(tG, ttl). A failed
// round acknowledges nothing.
//
// A caveat of hashicorp/raft v1.8.0: VerifyLeader triggers fresh heartbeats,
// but it also counts a follower's answer to a heartbeat that was already in
// flight when the round started. Such an answer still proves the follower
// had not voted for a successor when it answered, and a follower that hears
// from its leader rejects votes until HeartbeatTimeout passes (leader
// stickiness; raft.go requestVote), so a successor's election still comes
// after the batch arrived as long as one network round trip is shorter than
// HeartbeatTimeout, which Config's defaults leave a wide margin for. The
// exception is a leadership transfer, which the old leader starts itself;
// the grantor starts one only when it leaves the cluster (Node.Leave), and
// only after lessor.retire has made it stop acknowledging renewals: raft
// keeps answering VerifyLeader during a transfer.
func (l *lessor) verifyLoop(o *office) {
	defer l.wg.Done()
	for {
		select {
		case <-o.kaWake:
		case <-o.ctx.Done():
			return
		}
		l.mu.Lock()
		batch := o.pending
		o.pending = nil
		l.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		err := l.prop.verifyLeader()
		if err == nil && !l.current(o) {
			// The round ran in a later term than the office's: its lease
			// table may be stale, so it acknowledges nothing.
			err = l.prop.notLeader()
		}
		if err != nil {
			l.metrics.verifyFailed.Add(1)
			l.log.Warn("grantor: leadership check failed; acknowledging no renewals", "batch", len(batch), "err", err)
			nl := l.prop.notLeader()
			for _, r := range batch {
				r.done <- renewResult{err: nl}
			}
			continue
		}
		l.metrics.verifyOK.Add(1)
		tG := l.clock.Now() // after the quorum round returned
		l.mu.Lock()
		if !o.active {
			l.mu.Unlock()
			nl := l.prop.notLeader()
			for _, r := range batch {
				r.done <- renewResult{err: nl}
			}
			continue
		}
		results := make([]renewResult, len(batch))
		var renewed, lost int
		for i, r := range batch {
			results[i] = l.renewLocked(o, r, tG)
			renewed += len(results[i].renewed)
			lost += len(results[i].lost)
		}
		l.mu.Unlock()
		l.metrics.keepaliveBatches.Add(uint64(len(batch)))
		l.metrics.leasesRenewed.Add(uint64(renewed))
		l.metrics.leasesLost.Add(uint64(lost))
		for i, r := range batch {
			r.done <- results[i]
		}
	}
}

// renewLocked renews each lease of r that its session holds with the given
// token and that the leader has not decided to revoke.
func (l *lessor) renewLocked(o *office, r *renewal, tG clockwatch.Instant) renewResult {
	res := renewResult{tG: tG}
	for _, ref := range r.refs {
		rec, held := l.fsm.lease(ref.Lease)
		if !held || rec.Session != r.session || rec.Token != ref.Token {
			res.lost = append(res.lost, ref)
			continue
		}
		e := o.leases[ref.Lease]
		if e != nil && e.token == rec.Token && (e.revoking || !tG.Before(e.expiry)) {
			// Expired on the leader's clock: the revoke is decided or
			// about to be; never extend a grant past that.
			res.lost = append(res.lost, ref)
			poke(o.kick)
			continue
		}
		// e is nil only between a grant's apply and its event; extend
		// creates it from the FSM record then.
		o.extendLocked(l.timing, ref.Lease, rec, tG)
		// The renewal runs with the term stored with the grant, whatever
		// the holder assumed; the reply says which (TEAM.md decision 2).
		res.renewed = append(res.renewed, leaseRef{Lease: ref.Lease, Token: ref.Token, TTL: rec.TTL})
	}
	return res
}
