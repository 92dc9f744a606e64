package grantor

import (
	"context"
	"runtime"
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

// sessionRenewal is one session of a keepalive (issue 13): its name, the
// term its holder computes with, and the digest of the grants it knows
// (LeaseSetDigest); and the grants its holder names to end (untold.go):
// nobody was told of them, or their owner ended.
type sessionRenewal struct {
	Session            string
	TTL                time.Duration
	Digest             uint64
	Untold, OwnerEnded []grantRef
}

// sessionRenewed answers a sessionRenewal.
type sessionRenewed struct {
	Session string
	// Renewed says the session's grants now run until tG plus TTL (the
	// largest term of its grants, the one applied). A session that holds
	// nothing is renewed trivially.
	Renewed bool
	TTL     time.Duration
	// Digest is the digest of the session's grants; when it differs from
	// the request's, Listed is set and Grants lists them all, unless the
	// listing was refused its bytes: then Withheld is set instead, and
	// Renewed is false (the holder must not extend a deadline on an
	// answer that does not say which of its grants still stand).
	Digest   uint64
	Listed   bool
	Grants   []sessionGrant
	Withheld bool
	// Refused says the session belongs to another identity than the
	// caller's: nothing of it was renewed, ended or listed, and nothing
	// else is said of it.
	Refused bool
}

// renewal is one keepalive request waiting for a verify round: either the
// sessions of a current sidecar, or one session and its leases (refs) of
// an older sidecar.
type renewal struct {
	sessions []sessionRenewal
	caller   string // the requester's identity name (sessions only)
	session  string
	refs     []leaseRef
	done     chan renewResult // 1-buffered
	// marked are the states markBusyLocked marked busy: those of the
	// sessions the FSM knows (review R8-3), released when r is done.
	marked []*sessionState
}

// renewResult answers a renewal.
type renewResult struct {
	sessions      []sessionRenewed
	renewed, lost []leaseRef
	tG            clockwatch.Instant
	err           error
}

// renew renews session for an older sidecar that lists its leases: the
// session is renewed as a whole, and the reply says which listed leases it
// holds with those tokens (renewed, with the term stored with each) and
// which not (lost). A session past its expiry renews nothing.
func (l *lessor) renew(ctx context.Context, o *office, session string, refs []leaseRef) (renewResult, error) {
	return l.queueRenewal(ctx, o, &renewal{session: session, refs: refs, done: make(chan renewResult, 1)})
}

// renewSessions renews whole sessions (rule 4 of the grantor, per
// session): each is acknowledged after a verify round that started after
// the request arrived, and runs until tG + d(1+rho) + eps, tG read after
// the round returned. caller is the identity name of the requester; a
// session another identity owns is answered Refused, and the others are
// renewed (ownership.go; before, one such session failed the whole call,
// and with it the renewal of every other session of the host).
//
// A session whose digest differs is listed after the round, outside the
// lessor's lock (renewSessionLocked only compares digests): reserve is
// asked first for the bytes of its listing (the caller's queued_bytes,
// service.keepAlive; nil takes any), and when it refuses them the session
// is answered Withheld, not renewed, and nothing of the listing is built.
// A listing read after the renewal was decided is as safe as one read
// with it: a grant can only have ended since (the holder then drops it),
// or be new (the holder leaves grants it does not know alone).
func (l *lessor) renewSessions(ctx context.Context, o *office, caller string, ss []sessionRenewal, reserve func(n int) bool) ([]sessionRenewed, clockwatch.Instant, error) {
	res, err := l.queueRenewal(ctx, o, &renewal{sessions: ss, caller: caller, done: make(chan renewResult, 1)})
	if err != nil {
		return nil, 0, err
	}
	if reserve == nil {
		reserve = func(int) bool { return true }
	}
	for i := range res.sessions {
		r := &res.sessions[i]
		if !r.Listed {
			continue
		}
		var ok bool
		if r.Grants, r.Digest, ok = l.fsm.sessionListing(r.Session, reserve); !ok {
			r.Listed, r.Withheld, r.Renewed = false, true, false
		}
	}
	return res.sessions, res.tG, nil
}

// foreign reports whether session belongs to another identity than
// caller (checkOwner).
func (l *lessor) foreign(session, caller string) bool {
	return checkOwner(&sessionRecord{Owner: l.fsm.sessionOwner(session)}, session, caller) != nil
}

// queueRenewal queues r for the next verify round and waits. Its sessions
// the FSM knows are busy (lessor.touch) meanwhile; one it does not know
// gets no state at the leader (review R8-3: a keepalive naming made-up
// sessions would otherwise add states kept for SessionIdleTimeout and
// walked by every expiry scan), and is answered not renewed.
func (l *lessor) queueRenewal(ctx context.Context, o *office, r *renewal) (renewResult, error) {
	l.mu.Lock()
	if !o.active {
		l.mu.Unlock()
		return renewResult{}, l.prop.notLeader()
	}
	l.markBusyLocked(o, r)
	o.pending = append(o.pending, r)
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		now := l.clock.Now()
		for _, s := range r.marked {
			s.busy--
			s.last = now
		}
		l.mu.Unlock()
	}()
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

// markBusyLocked marks r's sessions that the FSM knows busy and seen now,
// as lessor.touch does for one, under one lock, and records them in
// r.marked; not one of another identity than r's caller, whose use it
// is not.
func (l *lessor) markBusyLocked(o *office, r *renewal) {
	now := l.clock.Now()
	mark := func(session string, term time.Duration) {
		if !l.fsm.hasSession(session) {
			return
		}
		s := o.sessionLocked(session)
		s.busy++
		s.last = now
		s.term = max(s.term, term)
		r.marked = append(r.marked, s)
	}
	if r.session != "" {
		mark(r.session, 0)
	}
	for _, s := range r.sessions {
		if !l.foreign(s.Session, r.caller) {
			mark(s.Session, s.TTL)
		}
	}
}

// verifyLoop runs the verify rounds of one office. Each round takes every
// renewal that has arrived, then starts one verify round; renewals that
// arrive during the round wait for the next. Only after the round succeeds
// does it read tG and extend the sessions' expiries to
// GrantorExpiry(tG, ttl). A failed round acknowledges nothing.
//
// The round counts only answers to heartbeats sent after it began
// (verify.go): hashicorp/raft's VerifyLeader alone also counts an answer
// to a heartbeat sent before, which a leader paused with that answer in
// its socket buffer could count after a successor took office. raft keeps
// answering VerifyLeader during a leadership transfer, which the old
// leader starts itself; the grantor starts one only when it leaves the
// cluster (Node.Leave), and only after lessor.retire has made it stop
// acknowledging renewals.
func (l *lessor) verifyLoop(o *office) {
	defer l.wg.Done()
	for {
		select {
		case <-o.kaWake:
		case <-o.ctx.Done():
			return
		}
		// Let keepalives already read off their streams queue first: one
		// round then serves more of them (a round costs a heartbeat to
		// every follower and their answers); it costs no wait.
		runtime.Gosched()
		l.mu.Lock()
		batch := o.pending
		o.pending = nil
		l.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		if err := l.confirmLeader(o); err != nil {
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
		var sessions, renewed, lost int
		for i, r := range batch {
			results[i] = l.renewLocked(o, r, tG)
			sessions += len(results[i].sessions)
			renewed += len(results[i].renewed)
			lost += len(results[i].lost)
			for _, s := range results[i].sessions {
				if s.Renewed {
					renewed += l.fsm.sessionLeaseCount(s.Session)
				}
			}
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

// confirmLeader runs one verify round, started now, and says
// whether o may act on what arrived before it: nil, or why not.
func (l *lessor) confirmLeader(o *office) error {
	err := l.prop.verifyLeader()
	if err == nil && !l.current(o) {
		// The round ran in a later term than the office's: its state may
		// be stale, so it confirms nothing.
		err = l.prop.notLeader()
	}
	return err
}

// renewLocked answers one renewal at tG.
func (l *lessor) renewLocked(o *office, r *renewal, tG clockwatch.Instant) renewResult {
	res := renewResult{tG: tG}
	if r.refs == nil && r.session == "" {
		res.sessions = make([]sessionRenewed, len(r.sessions))
		for i, s := range r.sessions {
			res.sessions[i] = l.renewSessionLocked(o, s, r.caller, tG)
		}
		return res
	}
	ok := l.extendSessionLocked(o, r.session, tG)
	for _, ref := range r.refs {
		rec, held := l.fsm.grant(ref.Lease, ref.Token)
		if !ok || !held || rec.Session != r.session {
			res.lost = append(res.lost, ref)
			continue
		}
		// The renewal runs with the term stored with the grant, whatever
		// the holder assumed; the reply says which (TEAM.md decision 2).
		res.renewed = append(res.renewed, leaseRef{Lease: ref.Lease, Token: ref.Token, TTL: rec.TTL})
	}
	return res
}

// renewSessionLocked renews one session at tG for caller. Nothing in it
// depends on how many leases the session holds: when the digests differ
// it says so (Listed), and renewSessions lists them after the lock. A
// session of another identity is answered Refused, and nothing else is
// done with it.
func (l *lessor) renewSessionLocked(o *office, r sessionRenewal, caller string, tG clockwatch.Instant) sessionRenewed {
	out := sessionRenewed{Session: r.Session}
	if l.foreign(r.Session, caller) {
		out.Refused = true
		return out
	}
	// A session the FSM does not know (closed, or never opened) is not
	// renewed and gets no state (review R8-3); its list is empty.
	if l.fsm.hasSession(r.Session) {
		out.Renewed = l.extendSessionLocked(o, r.Session, tG)
	}
	if s := o.sessions[r.Session]; s != nil {
		out.TTL = s.ttl
	}
	l.endNamedLocked(o, r)
	out.Digest = l.fsm.sessionDigest(r.Session)
	out.Listed = out.Digest != r.Digest
	return out
}

// extendSessionLocked extends session's expiry to GrantorExpiry(tG, its
// term) and reports whether it could: not when the leader has decided to
// end its grants or their expiry has passed on its clock (then the expiry
// loop is poked). A session holding nothing needs nothing: true.
func (l *lessor) extendSessionLocked(o *office, session string, tG clockwatch.Instant) bool {
	if !l.fsm.holdsLeases(session) {
		return true
	}
	s := o.sessions[session]
	if s == nil || s.expiry == 0 {
		// Only between a grant's apply and its event: the grant's own
		// rule gives the session its expiry from now.
		_, ttl := l.fsm.sessionHeld(session)
		o.extendLocked(l.timing, session, ttl, tG)
		return true
	}
	if s.revoking || !tG.Before(s.expiry) {
		poke(o.kick)
		return false
	}
	o.extendLocked(l.timing, session, s.ttl, tG)
	return true
}
