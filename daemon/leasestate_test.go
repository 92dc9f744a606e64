package daemon

import (
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

func init() { strictTransitions = true } // a transition not in the table fails the test that drove it

// The lease state machine (leasestate.go), table-driven, written from the
// rules of the timing model (DESIGN.md section 2) and the sidecar's
// additions: rule 3, the holder believes a lease only until t0 + d(1-rho)
// - eps; rule 5, past it the lease is lost and the app told at once, and
// nothing brings it back; owner binding, an owner's end releases the
// lease and the grantor keeps the name for its lock-delay; clock events
// only shorten validity; a grant nobody was told of is given back with no
// lock-delay.

// stateRig is a Daemon that is not Run, with one lease put in a state by
// hand, and the releases stepLocked queues caught before they are sent.
type stateRig struct {
	t     *testing.T
	d     *Daemon
	clock *clockwatch.Fake
	l     *lease
	done  func() // the lease's owner turn, held so that no release leaves
}

func newStateRig(t *testing.T, s leaseState) *stateRig {
	t.Helper()
	clock := clockwatch.NewFake(start)
	d := newGrantDaemon(t, clock, "127.0.0.1:1", clockwatch.DefaultTiming())
	l := newTestLease(d, "jobs/a", "conn:1", ttl)
	l.token = 7
	t0 := clock.Now()
	l.t0, l.deadline = t0, d.timing().HolderDeadline(t0, ttl)
	l.scheduleRenewal(t0)
	l.state = s
	d.mu.Lock()
	if s.inTable() {
		d.listLocked(l)
	}
	d.mu.Unlock()
	done, err := d.turns.take(ctxT(t), l.ownerID, l.name)
	if err != nil {
		t.Fatal(err)
	}
	r := &stateRig{t: t, d: d, clock: clock, l: l, done: done}
	t.Cleanup(r.release)
	return r
}

// release lets the queued releases' sender have the turn, once they are
// taken out of the queue (queued): nothing is sent.
func (r *stateRig) release() {
	r.queued()
	if r.done != nil {
		r.done()
		r.done = nil
	}
}

// step drives ev (why its reason) at now.
func (r *stateRig) step(ev leaseEvent, why string) bool {
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	return r.d.stepLocked(r.l, ev, why, r.clock.Now())
}

// queuedEnd is an end of the lease at the grantor: a release queued
// with owner_ended, or the grant named untold in its session's
// keepalives (ends.go).
type queuedEnd struct{ ownerEnded bool }

// queued takes the ends of the lease queued: its owner's releases of the
// name, and the grant named untold.
func (r *stateRig) queued() []queuedEnd {
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	k := turnKey{r.l.ownerID, r.l.name}
	var qs []queuedEnd
	for range r.d.unreleased[k] {
		qs = append(qs, queuedEnd{ownerEnded: true})
	}
	delete(r.d.unreleased, k)
	if e := r.d.ends[r.l.sess]; e != nil {
		for _, g := range e.untold {
			if g == (grantKey{r.l.name, r.l.token}) {
				qs = append(qs, queuedEnd{ownerEnded: false})
			}
		}
		delete(r.d.ends, r.l.sess)
	}
	return qs
}

func (r *stateRig) inTable() bool {
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	return r.d.leases[r.l.tableKey()] == r.l
}

// release wants: none (nothing queued), told (queued, and the grantor
// keeps the lock-delay: its owner may act on it still) or untold (named
// untold, for the grantor to end: no lock-delay).
type release int

const (
	noRelease release = iota
	releaseTold
	releaseUntold
)

func TestLeaseTransitionsFromTheRules(t *testing.T) {
	tests := []struct {
		name    string
		from    leaseState
		ev      leaseEvent
		why     string
		advance time.Duration // the clock moves this much before the event
		want    leaseState
		release release
		lost    string // the lost reason counted, if any
	}{
		{name: "a grant with time to tell is held and in the table", from: stateAsking, ev: evGranted, want: stateHeld},
		{name: "a grant whose deadline from t0 is too short is pending, in the table, told to nobody", from: stateAsking, ev: evGrantedShort, want: statePending},
		{name: "a refusal leaves nothing", from: stateAsking, ev: evNoGrant, want: stateGone},
		{name: "an owner that ends before the reply: the acquire gives back what it gets", from: stateAsking, ev: evOwnerEnded, why: ipc.ReasonOwnerExited, want: stateReleasing},
		{name: "the first renewal confirms a pending grant", from: statePending, ev: evRenewed, want: stateHeld},
		{name: "a pending grant the grantors no longer hold is lost, with no lock-delay (nobody was told)", from: statePending, ev: evRevoked, why: ipc.ReasonRevoked,
			want: stateLost, release: releaseUntold, lost: ipc.ReasonRevoked},
		{name: "a pending grant whose owner ended is released with no lock-delay", from: statePending, ev: evOwnerEnded, why: ipc.ReasonOwnerDisconnected,
			want: stateReleasing, release: releaseUntold},
		{name: "rule 4: a renewal keeps it held", from: stateHeld, ev: evRenewed, want: stateHeld},
		{name: "jeopardy: no renewal for a third of the term", from: stateHeld, ev: evJeopardy, advance: 2 * ttl / 3, want: stateJeopardy},
		{name: "a renewal in jeopardy makes it safe again", from: stateJeopardy, ev: evRenewed, want: stateHeld},
		{name: "rule 5: the deadline passed: lost, and released with the lock-delay kept", from: stateHeld, ev: evExpired, why: ipc.ReasonDeadlinePassed,
			advance: ttl, want: stateLost, release: releaseTold, lost: ipc.ReasonDeadlinePassed},
		{name: "rule 5 in jeopardy", from: stateJeopardy, ev: evExpired, why: ipc.ReasonRenewFailed, advance: ttl,
			want: stateLost, release: releaseTold, lost: ipc.ReasonRenewFailed},
		{name: "a suspend past the deadline: lost", from: stateHeld, ev: evExpired, why: ipc.ReasonSuspended, advance: ttl,
			want: stateLost, release: releaseTold, lost: ipc.ReasonSuspended},
		{name: "the grantors ended it: lost", from: stateHeld, ev: evRevoked, why: ipc.ReasonRevoked, want: stateLost, release: releaseTold, lost: ipc.ReasonRevoked},
		{name: "owner binding: the owner's end releases it, the grantor keeps the lock-delay", from: stateHeld, ev: evOwnerEnded, why: ipc.ReasonOwnerDisconnected,
			want: stateReleasing, release: releaseTold},
		{name: "owner binding in jeopardy", from: stateJeopardy, ev: evOwnerEnded, why: ipc.ReasonOwnerExited, want: stateReleasing, release: releaseTold},
		{name: "an owner stopped too long: not released early, it lapses", from: stateHeld, ev: evOwnerStopped, why: ipc.ReasonOwnerStopped, want: stateLapsing},
		{name: "a lapsing lease is lost at its deadline", from: stateLapsing, ev: evExpired, why: ipc.ReasonExpired, advance: ttl,
			want: stateLost, release: releaseTold, lost: ipc.ReasonExpired},
		{name: "a lapsing lease renewed on request still lapses", from: stateLapsing, ev: evRenewed, want: stateLapsing},
		{name: "a release ends it (the release is sent by its caller)", from: stateHeld, ev: evRelease, want: stateReleasing},
		{name: "a grant its acquire gave up on is given back", from: statePending, ev: evGiveBack, why: "grant not confirmed", want: stateReleasing},
		{name: "clock events only shorten: held stays held", from: stateHeld, ev: evShortened, why: ipc.ReasonDrift, want: stateHeld},
		{name: "clock events only shorten: jeopardy stays jeopardy", from: stateJeopardy, ev: evShortened, why: ipc.ReasonDrift, want: stateJeopardy},
		{name: "a release sent: gone", from: stateReleasing, ev: evReleaseDone, want: stateGone},
		{name: "a lost lease's release sent: gone", from: stateLost, ev: evReleaseDone, want: stateGone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newStateRig(t, tt.from)
			r.clock.Advance(tt.advance)
			lostBefore := r.d.metrics.lost[tt.lost]
			if !r.step(tt.ev, tt.why) {
				t.Fatalf("%s on %s: not in the table", tt.from, tt.ev)
			}
			if r.l.state != tt.want {
				t.Fatalf("%s on %s: %s, want %s", tt.from, tt.ev, r.l.state, tt.want)
			}
			if in := r.inTable(); in != tt.want.inTable() {
				t.Fatalf("%s: in the table %v, want %v", tt.want, in, tt.want.inTable())
			}
			qs := r.queued()
			switch {
			case tt.release == noRelease && len(qs) > 0:
				t.Fatalf("a release was queued: %+v", qs)
			case tt.release != noRelease && len(qs) != 1:
				t.Fatalf("%d releases queued, want 1", len(qs))
			case tt.release != noRelease && qs[0].ownerEnded != (tt.release == releaseTold):
				t.Fatalf("release with ownerEnded %v, want %v (the lock-delay is kept only for a grant its owner was told of)", qs[0].ownerEnded, tt.release == releaseTold)
			}
			if tt.lost != "" {
				if got := r.d.metrics.lost[tt.lost] - lostBefore; got != 1 {
					t.Fatalf("lost %q counted %d times, want once", tt.lost, got)
				}
				if r.l.why != tt.lost {
					t.Fatalf("why %q, want %q", r.l.why, tt.lost)
				}
			}
		})
	}
}

// Rule 5, and the sidecar's side of rule 3: once a lease has left the
// table (lost, released, given back, gone) no event brings it back, and
// no state outside the table is ever believed valid. Walked over the
// whole table: from every state out of the table, no sequence of events
// reaches a state in it.
func TestNoWayBackIntoTheTable(t *testing.T) {
	for _, from := range []leaseState{stateReleasing, stateLost, stateGone} {
		seen := map[leaseState]bool{from: true}
		todo := []leaseState{from}
		for len(todo) > 0 {
			s := todo[0]
			todo = todo[1:]
			if s.inTable() || s.valid() {
				t.Fatalf("from %s, %s is reachable", from, s)
			}
			for _, to := range leaseTable[s] {
				if !seen[to] {
					seen[to] = true
					todo = append(todo, to)
				}
			}
		}
	}
	// Only a grant enters the table.
	for from, evs := range leaseTable {
		for ev, to := range evs {
			if !from.inTable() && to.inTable() && ev != evGranted && ev != evGrantedShort {
				t.Errorf("%s on %s enters the table", from, ev)
			}
			if ev == evShortened && to != from {
				t.Errorf("a clock event moves %s to %s: it may only shorten the deadline", from, to)
			}
			if ev == evRenewed && to.inTable() && !to.valid() {
				t.Errorf("a renewal leaves %s not valid (%s)", from, to)
			}
		}
	}
}

// Every pair not in the table fails loudly: it panics under the tests'
// strict flag; in production it is counted, and the lease stays put.
func TestTransitionNotInTheTable(t *testing.T) {
	for s := stateAsking; s <= stateGone; s++ {
		for ev := evGranted; ev <= evReleaseDone; ev++ {
			if _, ok := leaseTable[s][ev]; ok {
				continue
			}
			r := newStateRig(t, s)
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s on %s: no panic", s, ev)
					}
				}()
				r.step(ev, "")
			}()
			strictTransitions = false
			before := r.d.metrics.stateErrors.Load()
			ok := r.step(ev, "")
			strictTransitions = true
			if ok || r.l.state != s || r.d.metrics.stateErrors.Load() != before+1 {
				t.Errorf("%s on %s in production: ok %v, state %s, errors counted %d", s, ev, ok, r.l.state, r.d.metrics.stateErrors.Load()-before)
			}
		}
	}
}

// Entering lapsing stops renewals and jeopardy; the lost reason at its
// deadline is expired, as for a lease nobody renews.
func TestLapsingStopsRenewals(t *testing.T) {
	r := newStateRig(t, stateHeld)
	if r.l.jeopardyAt() == never {
		t.Fatal("a held lease is never in jeopardy")
	}
	r.step(evOwnerStopped, ipc.ReasonOwnerStopped)
	if r.l.renewAt != never || r.l.jeopardyAt() != never {
		t.Fatalf("lapsing: renewal at %v, jeopardy at %v; want never for both", r.l.renewAt, r.l.jeopardyAt())
	}
	if got := r.d.lostReason(r.l, true); got != ipc.ReasonExpired {
		t.Fatalf("lost reason %q, want %q", got, ipc.ReasonExpired)
	}
	if g := r.l.grant(r.clock.Now()); !g.NoRenew {
		t.Fatal("the grant of a lapsing lease does not say it is not renewed")
	}
}
