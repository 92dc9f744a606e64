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
	// maxRefusedPerSession bounds the refusals remembered for one session
	// and identity: past it, the lowest seq is forgotten (a sidecar numbers
	// its requests upwards, and a late call comes within seconds), and one
	// lower than every seq remembered is not remembered. Small, so that
	// finding the lowest costs little under lessor.mu.
	maxRefusedPerSession = 256
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

// refusedBucket names the refusals of one session given to one identity.
// Keyed by identity too, so that a caller of another identity that names
// a session (acquire refuses it when the session is owned; not yet, when
// it is not) remembers nothing for the session's own calls.
type refusedBucket struct{ session, identity string }

// refusedSession is the refusals of one bucket, by seq.
type refusedSession struct {
	bySeq map[uint64]refusal
	// floor is the session's floor in the FSM when the seqs below it
	// were last dropped (the FSM answers a call of those stale).
	floor uint64
}

// refusedRef names a remembered refusal in answer order.
type refusedRef struct {
	bucket refusedBucket
	seq    uint64
	at     clockwatch.Instant
}

// refusals is an office's memory of the request ids it answered refused.
// Guarded by lessor.mu.
type refusals struct {
	buckets map[refusedBucket]*refusedSession
	order   []refusedRef // oldest first; refs to forgotten ones are skipped
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

// refusedLocked returns the answer o gave the request id of c, if it
// remembers having refused it to c's identity. What the FSM remembers of
// the id comes first: an entry of another call of it that granted it
// after the refusal (an entry in flight, see above) makes the refusal
// void, and a proposal of c is answered that grant.
func (l *lessor) refusedLocked(o *office, c acquireCmd) (any, bool) {
	l.forgetOldRefusalsLocked(o, l.clock.Now())
	b := refusedBucket{c.ID.Session, c.Identity}
	rs := o.refused.buckets[b]
	if rs == nil {
		return nil, false
	}
	r, ok := rs.bySeq[c.ID.Seq]
	if ok && l.fsm.hasOutcome(c.ID.Session, c.ID.Seq) {
		l.forgetLocked(o, b, rs, c.ID.Seq)
		return nil, false
	}
	return r.res, ok
}

// rememberRefusalLocked records res as the answer of c's request id to
// c's identity, if it is a refusal, the FSM remembers no outcome of the
// id, and no answer is remembered yet (the first stands).
func (l *lessor) rememberRefusalLocked(o *office, c acquireCmd, res any) {
	if !isRefusal(res) || l.fsm.hasOutcome(c.ID.Session, c.ID.Seq) {
		return
	}
	now := l.clock.Now()
	l.forgetOldRefusalsLocked(o, now)
	b, seq := refusedBucket{c.ID.Session, c.Identity}, c.ID.Seq
	all := &o.refused
	rs := all.buckets[b]
	if rs == nil {
		if all.buckets == nil {
			all.buckets = map[refusedBucket]*refusedSession{}
		}
		rs = &refusedSession{bySeq: map[uint64]refusal{}}
		all.buckets[b] = rs
	}
	if _, ok := rs.bySeq[seq]; ok {
		return
	}
	if floor := l.fsm.sessionFloor(c.ID.Session); floor > rs.floor {
		rs.floor = floor
		for s := range rs.bySeq {
			if s < floor {
				delete(rs.bySeq, s)
			}
		}
	}
	if len(rs.bySeq) >= maxRefusedPerSession {
		lowest := seq
		for s := range rs.bySeq {
			lowest = min(lowest, s)
		}
		if lowest == seq {
			return // below every seq remembered: the oldest, forgotten first
		}
		delete(rs.bySeq, lowest)
	}
	rs.bySeq[seq] = refusal{res: res, at: now}
	all.order = append(all.order, refusedRef{bucket: b, seq: seq, at: now})
	for len(all.order) > maxRefused {
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
	all := &o.refused
	ref := all.order[0]
	all.order = all.order[1:]
	if rs := all.buckets[ref.bucket]; rs != nil {
		if r, ok := rs.bySeq[ref.seq]; ok && r.at == ref.at {
			l.forgetLocked(o, ref.bucket, rs, ref.seq)
		}
	}
}

// forgetLocked forgets the refusal of seq in bucket b (rs).
func (l *lessor) forgetLocked(o *office, b refusedBucket, rs *refusedSession, seq uint64) {
	delete(rs.bySeq, seq)
	if len(rs.bySeq) == 0 {
		delete(o.refused.buckets, b)
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
