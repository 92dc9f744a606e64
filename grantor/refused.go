package grantor

import (
	"container/list"
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
//
// The memory is bounded three ways: each refusal is kept refusedKept
// (forgotten in answer order, whoever's it is, on any call); an identity
// (a caller's certificate name) keeps at most maxRefusedPerIdentity, its
// own oldest forgotten first, so that one identity's polling never
// pushes out another's; and the office keeps at most maxRefused in all
// (about 400 bytes each with the longest session ids: some 26 MB;
// BenchmarkRefusalMemoryBytesPerRefusal), the oldest forgotten first, so
// that it takes maxRefused / maxRefusedPerIdentity identities polling at
// once to push out the refusals of others. A call is answered only from
// its own identity's refusals. Without TLS every caller is one identity.

const (
	// refusedKept is how long an office remembers a refusal: the longest
	// wait a call of the request can carry (MaxWait), plus a sidecar's
	// attempt timeout on top of it (3 s, daemon/grantorconn.go) and room
	// to spare. A call sent before its id was answered refused has been
	// given up by its sidecar by then.
	refusedKept = MaxWait + time.Minute
	// maxRefusedPerIdentity bounds the refusals an office remembers for
	// one identity; past it, that identity's oldest is forgotten. A late
	// call comes within seconds of its retry's refusal, so only an
	// identity refused this many times in those seconds loses one.
	maxRefusedPerIdentity = 1 << 12
	// maxRefused bounds the refusals an office remembers in all; past it,
	// the oldest is forgotten.
	maxRefused = 1 << 16
)

// refusals is an office's memory of the request ids it answered refused.
// Guarded by lessor.mu.
type refusals struct {
	all        list.List // of *refusal, oldest first
	byIdentity map[string]*identityRefusals
}

// identityRefusals is one identity's refusals.
type identityRefusals struct {
	byID  map[refusedID]*refusal
	order list.List // of *refusal, oldest first
}

// refusedID is a request id as a map key.
type refusedID struct {
	session string
	seq     uint64
}

func refusedIDOf(c acquireCmd) refusedID { return refusedID{c.ID.Session, c.ID.Seq} }

// refusal is the answer an office gave a request id of an identity
// (*acquireResult or error), and when; it stands in both lists, and in
// its identity's byID, until it is forgotten from all three at once.
type refusal struct {
	identity string
	id       refusedID
	res      any
	at       clockwatch.Instant
	inAll    *list.Element
	inOwn    *list.Element
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
	rs := &o.refused
	rs.expire(l.clock.Now())
	r := rs.byIdentity[c.Identity].lookup(refusedIDOf(c))
	if r == nil || l.fsm.hasOutcome(c.ID.Session, c.ID.Seq) {
		return nil, false
	}
	return r.res, true
}

// rememberRefusalLocked records res as the answer of c's request id to
// c's identity, if it is a refusal, the FSM remembers no outcome of the
// id, and no answer is remembered yet (the first stands).
func (l *lessor) rememberRefusalLocked(o *office, c acquireCmd, res any) {
	if !isRefusal(res) || l.fsm.hasOutcome(c.ID.Session, c.ID.Seq) {
		return
	}
	rs := &o.refused
	now := l.clock.Now()
	rs.expire(now)
	id := refusedIDOf(c)
	ir := rs.byIdentity[c.Identity]
	if ir.lookup(id) != nil {
		return
	}
	if ir != nil && ir.order.Len() >= maxRefusedPerIdentity {
		rs.forget(ir.order.Front().Value.(*refusal))
	}
	if rs.all.Len() >= maxRefused {
		rs.forget(rs.all.Front().Value.(*refusal))
	}
	// Looked up again: an eviction may have forgotten the identity's
	// last refusal, and its entry with it.
	if ir = rs.byIdentity[c.Identity]; ir == nil {
		if rs.byIdentity == nil {
			rs.byIdentity = map[string]*identityRefusals{}
		}
		ir = &identityRefusals{byID: map[refusedID]*refusal{}}
		rs.byIdentity[c.Identity] = ir
	}
	r := &refusal{identity: c.Identity, id: id, res: res, at: now}
	r.inAll, r.inOwn = rs.all.PushBack(r), ir.order.PushBack(r)
	ir.byID[id] = r
}

// lookup returns ir's refusal of id, nil if none (or ir is nil).
func (ir *identityRefusals) lookup(id refusedID) *refusal {
	if ir == nil {
		return nil
	}
	return ir.byID[id]
}

// expire forgets the refusals given refusedKept or more before now.
func (rs *refusals) expire(now clockwatch.Instant) {
	for e := rs.all.Front(); e != nil && now.Sub(e.Value.(*refusal).at) >= refusedKept; e = rs.all.Front() {
		rs.forget(e.Value.(*refusal))
	}
}

// forget takes r out of the memory.
func (rs *refusals) forget(r *refusal) {
	ir := rs.byIdentity[r.identity]
	rs.all.Remove(r.inAll)
	ir.order.Remove(r.inOwn)
	delete(ir.byID, r.id)
	if ir.order.Len() == 0 {
		delete(rs.byIdentity, r.identity)
	}
}
