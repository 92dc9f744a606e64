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
//
// The memory is kept per identity (the caller's certificate name): one
// identity's refusals never push out another's, and a call is answered
// only from its own identity's. Each identity keeps at most
// maxRefusedPerIdentity, oldest forgotten first, and each for
// refusedKept; so the office holds at most that many per identity that
// was refused (about 100 bytes each), and the identities are the
// certificates the cluster's CA issued. Without TLS every caller is one
// identity and shares one budget.

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
	maxRefusedPerIdentity = 1 << 16
)

// refusal is the answer an office gave a request id: *acquireResult or
// error, and when.
type refusal struct {
	res any
	at  clockwatch.Instant
}

// refusals is an office's memory of the request ids it answered refused,
// by identity. Guarded by lessor.mu.
type refusals struct {
	byIdentity map[string]*identityRefusals
}

// identityRefusals is one identity's refusals: byID and order hold the
// same request ids (an entry leaves both at once, from the front of
// order).
type identityRefusals struct {
	byID  map[refusedID]refusal
	order []refusedID // oldest first
}

// refusedID is a request id as a map key.
type refusedID struct {
	session string
	seq     uint64
}

func refusedIDOf(c acquireCmd) refusedID { return refusedID{c.ID.Session, c.ID.Seq} }

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
	ir := l.identityRefusalsLocked(o, c.Identity, false)
	if ir == nil {
		return nil, false
	}
	r, ok := ir.byID[refusedIDOf(c)]
	if !ok || l.fsm.hasOutcome(c.ID.Session, c.ID.Seq) {
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
	ir := l.identityRefusalsLocked(o, c.Identity, true)
	id := refusedIDOf(c)
	if _, ok := ir.byID[id]; ok {
		return
	}
	if len(ir.order) >= maxRefusedPerIdentity {
		ir.forgetOldest()
	}
	ir.byID[id] = refusal{res: res, at: l.clock.Now()}
	ir.order = append(ir.order, id)
}

// identityRefusalsLocked returns identity's refusals in o, the ones given
// refusedKept or more ago forgotten; nil when it has none, unless create.
func (l *lessor) identityRefusalsLocked(o *office, identity string, create bool) *identityRefusals {
	ir := o.refused.byIdentity[identity]
	if ir != nil {
		now := l.clock.Now()
		for len(ir.order) > 0 && now.Sub(ir.byID[ir.order[0]].at) >= refusedKept {
			ir.forgetOldest()
		}
		if len(ir.order) == 0 && !create {
			delete(o.refused.byIdentity, identity)
			return nil
		}
	}
	if ir == nil && create {
		if o.refused.byIdentity == nil {
			o.refused.byIdentity = map[string]*identityRefusals{}
		}
		ir = &identityRefusals{byID: map[refusedID]refusal{}}
		o.refused.byIdentity[identity] = ir
	}
	return ir
}

// forgetOldest forgets the oldest refusal of ir.
func (ir *identityRefusals) forgetOldest() {
	delete(ir.byID, ir.order[0])
	ir.order = ir.order[1:]
}
