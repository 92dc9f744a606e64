package grantor

import (
	"errors"
	"slices"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

// Lock-delay is grantor state (Chubby's lock-delay, DESIGN.md "Grantor
// cluster safety").
//
// A grant may carry a lock-delay (acquireCmd.LockDelay, stored in its
// leaseRecord). When such a grant ends without its holder releasing it
// (its session expires, it is revoked, or its sidecar reports that its
// owner ended: releaseCmd.OwnerEnded), its holder may still have writes in
// flight to a resource that does not check tokens; so a delay takes its
// place (fsmState.Delays): an exclusive lease's name is granted to nobody,
// a semaphore's slot to nobody, and waiters stay queued. The FSM reads no
// clock, so the delay has no end in the
// replicated state: the leader decides it, on its own clock, as it decides
// expiries. The office that applies the entry that ended the grant counts
// the delay from then; a new leader counts every delay in the table from
// its own tE, as it waits out sessions; both count it as they count a term
// (Timing.GrantorExpiry: d(1+rho)+eps), so a delay is never shorter than
// asked on any clock within the drift bound. When it is over the leader
// proposes one cmdEndDelay entry, which ends the delay and grants the name
// to the first waiter in the same entry (FIFO kept, as a handoff). So a
// lock-delay costs one raft entry of its own; the entry that started it is
// the one that ended the grant, which was written anyway.
//
// A delay names the grant whose end started it (its token); an end that
// names another grant changes nothing. A sidecar keeps nothing for a
// delay: it survives the sidecar's restart, and its death.

// delayRecord is a lock-delay in the FSM.
type delayRecord struct {
	// Token is the grant whose end started the delay.
	Token uint64 `json:"token"`
	// Delay is its lock-delay, as stored with the grant.
	Delay time.Duration `json:"delay_ns"`
	// Owner is the identity name of the grant's session: the delay
	// counts against its leases until it ends (usage.go).
	Owner string `json:"owner,omitempty"`
	// Limit is the limit of the semaphore the grant was a slot of; 0 for
	// an exclusive lease.
	Limit int `json:"limit,omitempty"`
	// Shared says the grant was shared (shared.go): the delay keeps
	// exclusive grants out, not shared ones.
	Shared bool `json:"shared,omitempty"`
}

// endDelayCmd ends the lock-delay of Lease started by the end of grant
// Token (cmdEndDelay); Next is the Acquire of the name's first waiter,
// applied in the same entry once the delay is over, if the name has room
// then (handoff.go).
type endDelayCmd struct {
	Lease string      `json:"lease"`
	Token uint64      `json:"token"`
	Next  *acquireCmd `json:"next,omitempty"`
}

// endDelayResult is what the FSM returns for an endDelayCmd.
type endDelayResult struct {
	// Ended is false when the name was not in that delay: nothing changed.
	Ended bool
	Next  *handoff
}

// lockDelayCmd is the command type from which lock-delays are applied
// (cmdAcquire7, cmdRelease6 and cmdEndDelay came in one binary): a leader
// accepts an Acquire with a lock-delay only when every server applies it.
const lockDelayCmd = cmdEndDelay

// ErrLockDelayNotSupported is returned for an Acquire with a lock-delay
// while not every grantor of the cluster applies lock-delays.
var ErrLockDelayNotSupported = errors.New("grantor: not every grantor of the cluster has registered that it applies lock-delays: one is older (upgrade it) or has only just joined (it registers within seconds)")

// end ends the grant cur of lease (free); when delay is set (it ended
// without a release) and cur has a lock-delay, the delay takes its place.
// The caller holds f.mu, in Apply.
func (f *fsm) end(lease string, cur leaseRecord, why freeWhy, delay bool) {
	limit, _ := f.inForceLocked(lease)
	shared := f.sharedLocked(lease)
	f.free(lease, cur, why)
	if !delay || cur.LockDelay <= 0 {
		return
	}
	d := delayRecord{Token: cur.Token, Delay: cur.LockDelay, Owner: f.ownerOf(cur.Session)}
	if limit > 1 {
		d.Limit = limit
	}
	d.Shared = shared
	f.st.Delays[lease] = append(f.st.Delays[lease], d)
	f.chargeDelay(d.Owner, 1)
	f.event(fsmEvent{Kind: evDelayed, Lease: lease, Rec: cur})
}

// delayedRefusal answers an Acquire of a name in its lock-delay d.
func delayedRefusal(d delayRecord) *acquireResult {
	if d.Shared {
		return &acquireResult{Delayed: true, Token: d.Token, Shared: true}
	}
	return &acquireResult{Delayed: true, Token: d.Token, Limit: max(d.Limit, 1)}
}

func (f *fsm) applyEndDelay(c *endDelayCmd) any {
	ds := f.st.Delays[c.Lease]
	i := slices.IndexFunc(ds, func(d delayRecord) bool { return d.Token == c.Token })
	if i < 0 {
		return &endDelayResult{}
	}
	f.chargeDelay(ds[i].Owner, -1)
	if ds = slices.Delete(ds, i, i+1); len(ds) == 0 {
		delete(f.st.Delays, c.Lease)
	} else {
		f.st.Delays[c.Lease] = ds
	}
	f.event(fsmEvent{Kind: evUndelayed, Lease: c.Lease, Rec: leaseRecord{Token: c.Token}})
	return &endDelayResult{Ended: true, Next: f.handOff(c.Lease, c.Next)}
}

// delays returns the lock-delays in force, by the grant each stands for.
func (f *fsm) delays() map[grantRef]delayRecord {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := map[grantRef]delayRecord{}
	for name, ds := range f.st.Delays {
		for _, d := range ds {
			out[grantRef{name, d.Token}] = d
		}
	}
	return out
}

// delayState is the leader's view of one lock-delay.
type delayState struct {
	// until is when this office ends the delay.
	until clockwatch.Instant
	// ending is set while its cmdEndDelay is in flight.
	ending bool
}

// delayJob is a lock-delay the expiry loop decided to end (the one that
// stands for grant g), with the name's head waiter, claimed for the
// handoff, if no other entry carries it.
type delayJob struct {
	g      grantRef
	waiter *waiter
}

// delayUntilLocked records that this office ends the lock-delay standing
// for grant g, of length delay, no earlier than from + the delay counted
// as a term. The caller holds l.mu.
func (l *lessor) delayUntilLocked(o *office, g grantRef, delay time.Duration, from clockwatch.Instant) {
	until := l.timing.GrantorExpiry(from, delay)
	if d := o.delays[g]; d != nil {
		d.until = maxInstant(d.until, until)
		return
	}
	o.delays[g] = &delayState{until: until}
}

// syncDelaysLocked brings the office's delays in step with the FSM's
// when it takes office (from is tE) and after a restore (from is now): a
// delay it did not know is counted from then, one the state no longer
// has is dropped. The caller holds l.mu.
func (l *lessor) syncDelaysLocked(o *office, from clockwatch.Instant) {
	fsmDelays := l.fsm.delays()
	for g := range o.delays {
		if _, ok := fsmDelays[g]; !ok {
			delete(o.delays, g)
		}
	}
	for g, d := range fsmDelays {
		l.delayUntilLocked(o, g, d.Delay, from)
	}
}

// scanDelays decides to end the lock-delays that are over at now, and
// returns when to look again (no later than next). An ending carries the
// head waiter of its name unless another entry in flight carries it
// (claimLocked: only the head is ever carried, so FIFO holds whatever
// order the entries apply in); the head, once settled, wakes the next.
func (l *lessor) scanDelays(o *office, now, next clockwatch.Instant) ([]delayJob, clockwatch.Instant) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !o.active {
		return nil, next
	}
	var jobs []delayJob
	for g, d := range o.delays {
		switch {
		case d.ending:
		case now.Before(d.until):
			next = minInstant(next, d.until)
		default:
			d.ending = true
			jobs = append(jobs, delayJob{g: g, waiter: l.claimLocked(o, g.Lease, 0)})
		}
	}
	return jobs, next
}

// endDelay proposes the end of j's lock-delay, which grants the name to
// its first waiter in the same entry. A failed proposal is retried after
// revokeRetry while this office lasts.
func (l *lessor) endDelay(o *office, j delayJob) {
	defer l.wg.Done()
	c := endDelayCmd{Lease: j.g.Lease, Token: j.g.Token}
	if j.waiter != nil {
		next := j.waiter.cmd
		c.Next = &next
	}
	res, err := l.proposeEnd(o, j.waiter, endDelayEntry(c, l.prop.allowed()), func(res any) *handoff {
		if r, ok := res.(*endDelayResult); ok && r != nil {
			return r.Next
		}
		return nil
	})
	r, _ := res.(*endDelayResult)
	l.mu.Lock()
	if d := o.delays[j.g]; d != nil {
		if r != nil {
			delete(o.delays, j.g) // ended, or ended already
		} else {
			d.ending, d.until = false, l.clock.Now().Add(revokeRetry)
			l.test(testEvent{what: "delay end failed", lease: j.g.Lease})
		}
	}
	l.mu.Unlock()
	poke(o.kick)
	if err != nil && !errors.Is(err, ErrNotLeader) {
		l.log.Warn("grantor: ending a lock-delay failed", "lease", j.g.Lease, "token", j.g.Token, "err", err)
	}
	if r != nil && r.Ended {
		l.audit.delayEnded(j.g.Lease, j.g.Token)
		l.test(testEvent{what: "delay ended", lease: j.g.Lease})
	}
}

func maxInstant(a, b clockwatch.Instant) clockwatch.Instant {
	if a.Before(b) {
		return b
	}
	return a
}

// proposeEnd proposes cmd, an entry that ends a grant or a lock-delay and
// grants the name to waiter (nil: nobody) in the same entry, while office
// o lasts; next reads the handoff from the entry's result. It counts the
// waiter's grant and settles its call, and returns the result (nil when o
// has ended or the proposal failed) and the proposal's error.
func (l *lessor) proposeEnd(o *office, waiter *waiter, cmd []byte, next func(any) *handoff) (any, error) {
	var res any
	var err error
	if l.current(o) {
		res, err = l.prop.apply(cmd)
	}
	var h *handoff
	if res != nil {
		h = next(res)
	}
	if h != nil && h.Tried {
		if g, ok := h.Res.(*acquireResult); ok && g.Granted {
			l.granted(o, waiter.cmd.ID.Session, g.TTL)
		}
	}
	l.settle(o, waiter, h)
	return res, err
}
