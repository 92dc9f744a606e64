package daemon

import (
	"fmt"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// A lease's life in the sidecar is one state machine (issue 22.5;
// docs/design.md section 5, "A lease in the sidecar"): the states below,
// and one transition function, stepLocked, that every event goes through
// (the acquire's reply, a renewal, a keepalive listing, the owner's end, a
// deadline, a release, a clock event), by the table leaseTable. The
// lease's persistent facts (name, token, owner, t0, deadline, term) stay
// plain fields; what was a lifecycle spread over flags (listed,
// endedEarly, pending, jeopardy, renewOK, an owner-stopped lease's
// noRenew) is its state.

// leaseState is where a lease is in its life.
type leaseState uint8

const (
	// stateAsking: the acquire is with the grantors. Not in the table;
	// nobody has been told of it.
	stateAsking leaseState = iota
	// statePending: granted, in the table, but the deadline from t0 was
	// too short to tell anyone (the grant came after a long wait or slow
	// retries): invisible to callers and never expired until its first
	// renewal gives it a deadline of its own.
	statePending
	// stateHeld: valid until its deadline, renewed every d/3.
	stateHeld
	// stateJeopardy: still valid, but no renewal has succeeded for a
	// third of the term (jeopardy.go).
	stateJeopardy
	// stateLapsing: valid until its deadline, and no longer renewed: its
	// owner process was stopped too long (checkStoppedOwners).
	stateLapsing
	// stateReleasing: ended by its owner (a release, the owner's end) or
	// given back; its release is on its way to the grantors. Out of the
	// table.
	stateReleasing
	// stateLost: ended without its owner: the deadline passed, or the
	// grantors ended it; the owner was told. Out of the table; its
	// release is on its way, best effort.
	stateLost
	// stateGone: forgotten: nothing more to tell the grantors.
	stateGone
)

var stateNames = [...]string{"asking", "pending", "held", "jeopardy", "lapsing", "releasing", "lost", "gone"}

func (s leaseState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", s)
}

// inTable reports whether a lease in state s is in the lease table:
// granted and not ended.
func (s leaseState) inTable() bool {
	return s == statePending || s == stateHeld || s == stateJeopardy || s == stateLapsing
}

// valid reports whether callers are told of a lease in state s as held.
func (s leaseState) valid() bool {
	return s == stateHeld || s == stateJeopardy || s == stateLapsing
}

// leaseEvent is what happens to a lease.
type leaseEvent uint8

const (
	// evGranted: the acquire's reply is a grant with time to tell.
	evGranted leaseEvent = iota
	// evGrantedShort: the acquire's reply is a grant whose deadline from
	// t0 is too short to tell anyone.
	evGrantedShort
	// evNoGrant: the acquire ended without a grant to hold: refused, its
	// wait over, failed, or its grant is another's or superseded.
	evNoGrant
	// evRenewed: a keepalive renewed it.
	evRenewed
	// evJeopardy: no renewal succeeded for a third of its term.
	evJeopardy
	// evShortened: a clock event (drift) moved its deadline earlier.
	evShortened
	// evExpired: its deadline passed (or a suspend carried it past).
	evExpired
	// evRevoked: the grantors no longer hold it: its session was not
	// renewed, the keepalive listing lacks it, or a newer grant came.
	evRevoked
	// evOwnerEnded: its owner ended (connection closed, process exited),
	// or the requester left.
	evOwnerEnded
	// evOwnerStopped: its owner process was stopped too long.
	evOwnerStopped
	// evRelease: a caller released it.
	evRelease
	// evGiveBack: a grant nobody was told of is given back (its first
	// renewal did not come in time, or its owner ended before it came).
	evGiveBack
	// evReleaseDone: its release was sent (answered or given up).
	evReleaseDone
)

var eventNames = [...]string{"granted", "granted_short", "no_grant", "renewed", "jeopardy", "shortened", "expired", "revoked",
	"owner_ended", "owner_stopped", "release", "give_back", "release_done"}

func (e leaseEvent) String() string {
	if int(e) < len(eventNames) {
		return eventNames[e]
	}
	return fmt.Sprintf("event(%d)", e)
}

// leaseTable is every transition there is: from a state, on an event, to
// a state. A pair not in it does not happen (stepLocked).
var leaseTable = map[leaseState]map[leaseEvent]leaseState{
	stateAsking: {
		evGranted:      stateHeld,
		evGrantedShort: statePending,
		evNoGrant:      stateGone,
		evOwnerEnded:   stateReleasing, // the acquire gives back what it gets
		evGiveBack:     stateReleasing, // the requester left before the grant came
	},
	statePending: {
		evRenewed:    stateHeld,
		evRevoked:    stateLost,
		evOwnerEnded: stateReleasing,
		evGiveBack:   stateReleasing,
	},
	stateHeld: {
		evRenewed:      stateHeld,
		evJeopardy:     stateJeopardy,
		evShortened:    stateHeld,
		evExpired:      stateLost,
		evRevoked:      stateLost,
		evOwnerEnded:   stateReleasing,
		evOwnerStopped: stateLapsing,
		evRelease:      stateReleasing,
		evGiveBack:     stateReleasing, // confirmed after its acquire gave up waiting
	},
	stateJeopardy: {
		evRenewed:      stateHeld,
		evShortened:    stateJeopardy,
		evExpired:      stateLost,
		evRevoked:      stateLost,
		evOwnerEnded:   stateReleasing,
		evOwnerStopped: stateLapsing,
		evRelease:      stateReleasing,
		evGiveBack:     stateReleasing,
	},
	stateLapsing: {
		evRenewed:    stateLapsing, // renewed on request only
		evShortened:  stateLapsing,
		evExpired:    stateLost,
		evRevoked:    stateLost,
		evOwnerEnded: stateReleasing,
		evRelease:    stateReleasing,
		evGiveBack:   stateReleasing,
	},
	stateReleasing: {
		evNoGrant:     stateGone,
		evGiveBack:    stateReleasing,
		evReleaseDone: stateGone,
	},
	stateLost: {
		evReleaseDone: stateGone,
	},
}

// strictTransitions makes a transition not in the table panic, so that a
// test that drives one fails loudly (the package's tests set it); in
// production it is counted (leaseside_sidecar_lease_state_errors_total),
// logged, and ignored.
var strictTransitions bool

// stepLocked moves l along the table on ev, and does what entering the
// new state means: a grant enters the table; leaving the table wakes
// whoever waits on l's renewal; jeopardy, safe and lost are told to the
// owner and watchers; a lost lease and an ended owner's lease are
// released at the grantors (queueReleaseLocked: the grantor keeps the
// name for the lock-delay, unless nobody was told of the grant). why is
// the reason of an end (an ipc.Reason* for evExpired, evRevoked and
// evOwnerEnded); now is when the event was seen. It reports whether the
// transition is in the table. The caller holds d.mu.
func (d *Daemon) stepLocked(l *lease, ev leaseEvent, why string, now clockwatch.Instant) bool {
	from := l.state
	to, ok := leaseTable[from][ev]
	if !ok {
		d.metrics.stateErrors.Add(1)
		d.log.Error("lease: a transition not in the state table", "lease", l.name, "token", l.token, "state", from, "event", ev)
		if strictTransitions {
			panic(fmt.Sprintf("lease %q (token %d): no transition from %s on %s", l.name, l.token, from, ev))
		}
		return false
	}
	l.state = to
	d.logStepLocked(l, from, ev) // persist.go
	if why != "" && !to.inTable() {
		l.why = why
	}
	if !from.inTable() && to.inTable() {
		d.listLocked(l)
	}
	if from.inTable() && !to.inTable() {
		d.forgetLocked(l)
	}
	switch {
	case ev == evJeopardy:
		d.jeopardyLocked(l, now)
	case from == stateJeopardy && to == stateHeld:
		d.safeLocked(l, now)
	case ev == evShortened:
		d.log.Warn("deadline shortened: the drift observed against the grantor, or the timing a grantor stated, exceeds what it was computed with",
			"lease", l.name, "token", l.token, "valid", l.deadline.Sub(now))
		d.emitLocked(l, &ipc.Event{Event: ipc.EventShortened, Reason: why,
			DeadlineBoottimeNs: l.deadline.Nanoseconds(), ValidMs: max(l.deadline.Sub(now).Milliseconds(), 0)})
	case ev == evOwnerStopped:
		l.renewAt = never
		d.log.Warn("owner process stopped; the lease is no longer renewed and lapses at its deadline", "lease", l.name, "pid", l.stoppedPID)
		d.emitLocked(l, &ipc.Event{Event: ipc.EventOwnerGone, Reason: why})
	case to == stateLost:
		d.lostLocked(l, from, why)
	case from.inTable() && ev == evOwnerEnded:
		d.emitLocked(l, &ipc.Event{Event: ipc.EventReleased, Reason: why})
		l.signalRenewed()
		d.queueReleaseLocked(l, why, from != statePending)
		d.log.Info("releasing lease", "lease", l.name, "token", l.token, "why", why, "lock_delay", l.lockDelay)
	case from.inTable() && !to.inTable():
		l.signalRenewed() // a release, a give back: whoever waits on a renewal of it
	}
	return true
}

// lostLocked is entering lost from state from (rule 5): the owner and
// watchers are told at once, and the lease is released at the grantors.
// The caller holds d.mu.
func (d *Daemon) lostLocked(l *lease, from leaseState, reason string) {
	d.metrics.lostOne(reason)
	ev := &ipc.Event{Event: ipc.EventLost, Reason: reason}
	// Declared after the deadline (a stall of the daemon, a suspend):
	// say how late, so that an owner can tell how long it may have acted
	// on a lease it no longer held.
	if late := d.clock.Now().Sub(l.deadline); late > 0 && from != statePending {
		ev.LateMs = max(late.Milliseconds(), 1)
	}
	d.log.Warn("lease lost", "lease", l.name, "token", l.token, "reason", reason, "late_ms", ev.LateMs)
	d.emitLocked(l, ev)
	l.signalRenewed()
	// Best effort: the lease is over for us, so ending it at the grantor
	// is safe and lets the next owner in sooner. Its owner may still be
	// acting on a resource that does not check tokens: the grantor keeps
	// the name for its lock-delay (if the release does not get there, from
	// the grantor's own expiry of the grant).
	d.queueReleaseLocked(l, "lost: "+reason, from != statePending)
}
