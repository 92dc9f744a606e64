package grantor

import (
	"errors"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

// Refusals the leader remembers (review 17, G1): one request id, one
// answer, also for a call that comes after its id was answered refused.
//
// A refusal changes nothing in the FSM, so the FSM remembers none: a
// refused Acquire leaves no outcome (fsm.notGranted), a refusal given when
// a wait runs out makes no entry at all (withdraw), and a cmdAcquire6
// entry drops the session record a refusal opened (review R8-2). A
// sidecar's first attempt of an Acquire that is held up on the way (a
// partition that heals, a slow link) can reach the leader after its
// retry, on another connection, was answered refused; with its full wait
// it would queue afresh, and the next release would grant a request its
// sidecar was told was refused. So the office remembers the request ids
// it answered refused, and answers a later call of one the same at once,
// without queueing it or proposing it.
//
// This holds within one office only. Recording every refusal in the log
// would take an entry (and a new command type) per refusal given at the
// end of a wait, and a record per refused session, which review R8-2
// took out; so a new leader does not know the refusals the old one gave,
// and a call of such an id that reaches the new leader late is evaluated
// afresh and may be granted: one id, two answers. Its sidecar gives back
// a grant it was not told of once its session's keepalive lists it
// (sessions.go), but the grant was made. Nor is a call covered whose own
// entry is in flight when another call of its id is answered refused (two
// calls that both found no waiter of the id and no refusal, one of them
// proposing while the other queued and its wait ran out): that entry may
// still grant.

const (
	// refusedKept is how long an office remembers a refusal: the longest
	// wait a call of the request can carry (MaxWait), plus a sidecar's
	// attempt timeout on top of it (3 s, daemon/grantorconn.go) and room
	// to spare. A call sent before its id was answered refused has been
	// given up by its sidecar by then.
	refusedKept = MaxWait + time.Minute
	// maxRefusedPerSession bounds the refusals remembered for one
	// session, as maxOutstanding bounds its outcomes in the FSM: past it,
	// the session's lowest seq is forgotten.
	maxRefusedPerSession = maxOutstanding
	// maxRefused bounds the refusals an office remembers in all (about
	// 100 bytes each); past it, the oldest is forgotten.
	maxRefused = 1 << 16
)

// refusal is the answer an office gave a request id: *acquireResult or
// error, and when.
type refusal struct {
	res any
	at  clockwatch.Instant
}

// refusedRef names a remembered refusal in answer order.
type refusedRef struct {
	session string
	seq     uint64
	at      clockwatch.Instant
}

// refusals is an office's memory of the request ids it answered refused.
// Guarded by lessor.mu.
type refusals struct {
	bySession map[string]map[uint64]refusal
	order     []refusedRef // oldest first; refs to forgotten ones are skipped
}

// isRefusal reports whether res, a call's answer, refuses the request:
// not granted (and not a retry of a grant that has ended), or a limit
// other than the one in force.
func isRefusal(res any) bool {
	switch r := res.(type) {
	case *acquireResult:
		return r != nil && !r.Granted && !r.Ended
	case error:
		var lm *LimitMismatchError
		return errors.As(r, &lm)
	}
	return false
}

// refusedLocked returns the answer o gave request id, if it remembers
// having refused it.
func (l *lessor) refusedLocked(o *office, id requestID) (any, bool) {
	l.forgetOldRefusalsLocked(o, l.clock.Now())
	r, ok := o.refused.bySession[id.Session][id.Seq]
	return r.res, ok
}

// rememberRefusalLocked records res as the answer of request id, if it
// is a refusal and id has no answer remembered yet (the first stands).
// The session's refusals below its floor in the FSM are forgotten: the
// FSM answers a call of those stale.
func (l *lessor) rememberRefusalLocked(o *office, id requestID, res any) {
	if !isRefusal(res) {
		return
	}
	now := l.clock.Now()
	l.forgetOldRefusalsLocked(o, now)
	rs := &o.refused
	m := rs.bySession[id.Session]
	if _, ok := m[id.Seq]; ok {
		return
	}
	if m == nil {
		if rs.bySession == nil {
			rs.bySession = map[string]map[uint64]refusal{}
		}
		m = map[uint64]refusal{}
		rs.bySession[id.Session] = m
	}
	if floor := l.fsm.sessionFloor(id.Session); floor > 0 {
		for seq := range m {
			if seq < floor {
				delete(m, seq)
			}
		}
	}
	if len(m) >= maxRefusedPerSession {
		lowest := id.Seq
		for seq := range m {
			lowest = min(lowest, seq)
		}
		delete(m, lowest)
	}
	m[id.Seq] = refusal{res: res, at: now}
	rs.order = append(rs.order, refusedRef{session: id.Session, seq: id.Seq, at: now})
	for len(rs.order) > maxRefused {
		l.forgetOldestRefusalLocked(o)
	}
}

// forgetOldRefusalsLocked forgets the refusals given refusedKept or more
// before now.
func (l *lessor) forgetOldRefusalsLocked(o *office, now clockwatch.Instant) {
	for len(o.refused.order) > 0 && now.Sub(o.refused.order[0].at) >= refusedKept {
		l.forgetOldestRefusalLocked(o)
	}
}

func (l *lessor) forgetOldestRefusalLocked(o *office) {
	rs := &o.refused
	ref := rs.order[0]
	rs.order = rs.order[1:]
	m := rs.bySession[ref.session]
	if r, ok := m[ref.seq]; ok && r.at == ref.at {
		delete(m, ref.seq)
		if len(m) == 0 {
			delete(rs.bySession, ref.session)
		}
	}
}

// sessionFloor returns the seq below which the FSM answers session's
// requests stale (0: no record).
func (f *fsm) sessionFloor(session string) uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if s := f.st.Sessions[session]; s != nil {
		return s.Floor
	}
	return 0
}
