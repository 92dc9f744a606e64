package grantor

import (
	"errors"
	"fmt"
	"slices"
)

// Shared (read/write) locks (issue 24 point 6; flock -s, Curator's
// InterProcessReadWriteLock).
//
// An Acquire with Shared asks for a shared grant of a name: any number of
// shared grants stand together, an exclusive grant stands alone. Shared
// grants of a name are kept as a semaphore record with Shared set and no
// limit (fsmState.Sems), so a release, an expiry, a revoke or a lock-delay
// ends one of them as it ends a semaphore's slot; an exclusive grant is in
// fsmState.Leases as always. Every grant takes the global counter's next
// token, so a shared grant's token is above every earlier exclusive
// grant's of the name, and an exclusive grant's above every earlier
// shared grant's: a writer fences every reader before it.
//
// Lock-delays: a shared grant's delay (it ended without a release) keeps
// writers out until it ends, not readers; an exclusive grant's delay keeps
// everyone out.
//
// Writers do not starve: the leader's queue is first come first served
// (waiters.go), and an Acquire of a name others wait for stays behind them
// (queuedBehindLocked), so once a writer waits, new readers queue behind it
// until it is served or gives up. The FSM only decides who may hold the
// name together, which is the safety rule and never depends on a leader's
// memory.
//
// A reader asking to become the writer (its session and owner ask
// exclusive while others hold the name shared) waits only at the head of
// the queue: with others waiting, it is refused at once, for good, and
// keeps its shared grant (waiters.go, errWaitForOwnGrant). Whoever waits
// ahead of it waits for its grant to go (a writer; or the first of two
// readers asking to write), so it would wait for itself and hold every
// later waiter back until the waits ran out.
//
// A shared grant has no limit: --shared with --limit above 1 is refused at
// the edge (validate.go), and a shared Acquire of a semaphore's name, or a
// semaphore's Acquire of a name held shared, is refused with a
// *SharedMismatchError, as a semaphore of another limit is.
//
// Only an entry that asks for a shared grant (its own, or a waiter's it
// carries) is written with a shared command type; entries of older types
// never carry one: a shared flag in such an entry is dropped on apply
// (dropShared), so every replica applies the same. A leader writes shared Acquires only
// once every server applies them (sharedCmd; ErrSharedNotSupported
// before); a grantor too old to know them refuses the AcquireShared call
// itself (UNIMPLEMENTED), so it cannot take a shared request for an
// exclusive one.

// sharedCmd is the command type from which shared grants are applied:
// cmdAcquire9, cmdRelease7, cmdExpireSession3, cmdEndDelay2 and
// cmdEndGrant2 came in one binary.
const sharedCmd = cmdEndGrant2

// ErrSharedNotSupported is returned for a shared Acquire while not every
// grantor of the cluster applies shared grants.
var ErrSharedNotSupported = errors.New("grantor: not every grantor of the cluster has registered that it applies shared (read/write) locks: one is older (upgrade it) or has only just joined (it registers within seconds)")

// SharedMismatchError says that a shared Acquire named a semaphore, or a
// semaphore's Acquire named a name held shared. It matches
// ErrInvalidArgument.
type SharedMismatchError struct {
	Lease string
	// Shared says the Acquire was shared (and the name a semaphore of
	// Limit); else the Acquire asked for a semaphore of Limit and the
	// name is held shared.
	Shared bool
	Limit  int
}

// Error names the mode asked and the one in force.
func (e *SharedMismatchError) Error() string {
	if e.Shared {
		return fmt.Sprintf("grantor: lease %q is a semaphore of limit %d; a shared acquire cannot join it (shared and semaphore are different kinds of lock)", e.Lease, e.Limit)
	}
	return fmt.Sprintf("grantor: lease %q is held shared; an acquire with limit %d cannot join it (shared and semaphore are different kinds of lock)", e.Lease, e.Limit)
}

// Is makes errors.Is(err, ErrInvalidArgument) true.
func (e *SharedMismatchError) Is(target error) bool { return target == ErrInvalidArgument }

// dropShared clears the shared flag of the Acquires an entry of type t
// carries when t is older than the shared types: such an entry never
// granted shared, and must apply the same on every replica.
func dropShared(t cmdType, body any) {
	switch c := body.(type) {
	case *acquireCmd:
		if t < cmdAcquire9 && t != cmdWithdraw {
			c.Shared = false
		}
	case *releaseCmd:
		if t < cmdRelease7 && c.Next != nil {
			c.Next.Shared = false
		}
	case *expireSessionCmd:
		if t < cmdExpireSession3 {
			for i := range c.Next {
				c.Next[i].Shared = false
			}
		}
	case *endDelayCmd:
		if t < cmdEndDelay2 && c.Next != nil {
			c.Next.Shared = false
		}
	case *endGrantCmd:
		if t < cmdEndGrant2 && c.Next != nil {
			c.Next.Shared = false
		}
	}
}

// unshared returns a copy of next without its shared flag, for an entry
// of a type older than the shared ones; nil stays nil.
func unshared(next *acquireCmd) *acquireCmd {
	if next == nil || !next.Shared {
		return next
	}
	n := *next
	n.Shared = false
	return &n
}

// endDelayEntry is the log entry that ends a lock-delay: cmdEndDelay2
// when the waiter's Acquire it carries is shared and every server applies
// that, else cmdEndDelay, whose waiter's Acquire is carried exclusive
// (stricter, never weaker).
func endDelayEntry(c endDelayCmd, allowed cmdType) []byte {
	if c.Next != nil && c.Next.Shared && allowed >= sharedCmd {
		return encodeCmd(cmdEndDelay2, c)
	}
	c.Next = unshared(c.Next)
	return encodeCmd(cmdEndDelay, c)
}

// endGrantEntry is the log entry that ends a grant a keepalive named (see
// endDelayEntry).
func endGrantEntry(c endGrantCmd, allowed cmdType) []byte {
	if c.Next != nil && c.Next.Shared && allowed >= sharedCmd {
		return encodeCmd(cmdEndGrant2, c)
	}
	c.Next = unshared(c.Next)
	return encodeCmd(cmdEndGrant, c)
}

// sharedLocked reports whether lease is held shared: by shared grants, or
// by nobody but the lock-delays of shared grants.
func (f *fsm) sharedLocked(lease string) bool {
	if sem := f.st.Sems[lease]; sem != nil {
		return sem.Shared
	}
	if _, held := f.st.Leases[lease]; held {
		return false
	}
	ds := f.st.Delays[lease]
	return len(ds) > 0 && ds[0].Shared
}

// semaphoreLimitLocked returns the limit of the semaphore lease is (its
// grants', else its delays'), 0 when it is none.
func (f *fsm) semaphoreLimitLocked(lease string) int {
	if sem := f.st.Sems[lease]; sem != nil && !sem.Shared {
		return sem.Limit
	}
	if _, held := f.st.Leases[lease]; held {
		return 0
	}
	if ds := f.st.Delays[lease]; len(ds) > 0 && ds[0].Limit > 1 {
		return ds[0].Limit
	}
	return 0
}

// mismatchLocked returns the *SharedMismatchError for c, nil when c's
// kind of lock fits the name's.
func (f *fsm) mismatchLocked(c *acquireCmd) error {
	switch {
	case c.Shared:
		if limit := f.semaphoreLimitLocked(c.Lease); limit > 1 {
			return &SharedMismatchError{Lease: c.Lease, Shared: true, Limit: limit}
		}
		if c.MaxHolders > 1 {
			return invalid("limit", "a shared acquire has no limit (got %d)", c.MaxHolders)
		}
	case c.MaxHolders > 1 && f.sharedLocked(c.Lease):
		return &SharedMismatchError{Lease: c.Lease, Limit: c.MaxHolders}
	}
	return nil
}

// rwRoomLocked reports whether c, shared or exclusive, can be granted
// lease beside what stands, leaving out the grant skip (the holder's own,
// which a re-acquire replaces; 0: none): a shared grant beside shared
// grants and shared grants' delays only, an exclusive one beside nothing.
func (f *fsm) rwRoomLocked(c *acquireCmd, skip uint64) bool {
	_, holders := f.inForceLocked(c.Lease)
	others := 0
	for _, h := range holders {
		if h.Token != skip {
			others++
		}
	}
	ds := f.st.Delays[c.Lease]
	if !c.Shared {
		return others == 0 && len(ds) == 0
	}
	sharedHolders := others == 0 || (f.st.Sems[c.Lease] != nil && f.st.Sems[c.Lease].Shared)
	sharedDelays := !slices.ContainsFunc(ds, func(d delayRecord) bool { return !d.Shared })
	return sharedHolders && sharedDelays
}

// hasRoomForLocked reports whether c could be granted its lease now (its
// kind of lock counted). An Acquire whose kind does not fit the name's has
// room: applied, it is refused for good with the mismatch.
func (f *fsm) hasRoomForLocked(c *acquireCmd) bool {
	if f.mismatchLocked(c) != nil {
		return true
	}
	if c.Shared || f.sharedLocked(c.Lease) {
		return f.rwRoomLocked(c, 0)
	}
	return f.hasRoomLocked(c.Lease)
}

// hasRoomFor reports whether c could be granted its lease now, for the
// leader's wake-ups: the grant c's own holder (same session and owner)
// has is left out, as acquireRW leaves it out, so a reader waiting to
// become the writer is woken once the other readers leave. (handOff, in
// Apply, keeps hasRoomForLocked as it is: replicas must apply alike; a
// waiter it does not try is woken by this.)
func (f *fsm) hasRoomFor(c *acquireCmd) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.mismatchLocked(c) == nil && (c.Shared || f.sharedLocked(c.Lease)) {
		return f.rwRoomLocked(c, f.ownTokenLocked(c))
	}
	return f.hasRoomForLocked(c)
}

// ownTokenLocked returns the token of the grant of c's lease that c's
// session and owner hold, 0 when none.
func (f *fsm) ownTokenLocked(c *acquireCmd) uint64 {
	_, holders := f.inForceLocked(c.Lease)
	if i := slices.IndexFunc(holders, func(r leaseRecord) bool { return r.Session == c.ID.Session && r.Owner == c.Owner }); i >= 0 {
		return holders[i].Token
	}
	return 0
}

// sharedOf reports whether lease is held shared (watchers, listings).
func (f *fsm) sharedOf(lease string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.sharedLocked(lease)
}

// acquireRW is applyAcquire for a shared Acquire, or an exclusive one of
// a name held shared. The holder asking again (same session and owner)
// ends its grant and starts a new one, of the kind asked, when that kind
// has room beside the other grants; else nothing changes.
func (f *fsm) acquireRW(s *sessionRecord, c *acquireCmd) any {
	if r, ok := f.remembered(s, c); ok {
		return r
	}
	if len(s.Outcomes) >= maxOutstanding {
		return fmt.Errorf("%w: session %q has %d", ErrTooManyOutstanding, c.ID.Session, len(s.Outcomes))
	}
	if err := f.mismatchLocked(c); err != nil {
		return f.refuse(s, c, err)
	}
	_, holders := f.inForceLocked(c.Lease)
	var mine *leaseRecord
	if i := slices.IndexFunc(holders, func(r leaseRecord) bool { return r.Session == c.ID.Session && r.Owner == c.Owner }); i >= 0 {
		m := holders[i]
		mine = &m
	}
	var skip uint64
	if mine != nil {
		skip = mine.Token
	}
	if !f.rwRoomLocked(c, skip) {
		return f.refuse(s, c, f.refusalLocked(c.Lease))
	}
	var replaced uint64
	if mine != nil {
		f.removeGrantLocked(c.Lease, *mine)
		replaced = mine.Token
	} else if err := f.checkLimit(s.Owner, c.Limit); err != nil {
		return err // nothing changed: not remembered
	}
	f.st.LastToken++
	rec := leaseRecord{Session: f.internSession(c.ID.Session), Owner: c.Owner, Token: f.st.LastToken, TTL: c.TTL, Value: c.Value, LockDelay: c.LockDelay}
	if c.Shared {
		sem := f.st.Sems[c.Lease]
		if sem == nil {
			sem = &semRecord{Shared: true}
			f.st.Sems[c.Lease] = sem
		}
		sem.Holders = append(sem.Holders, rec)
	} else {
		f.st.Leases[c.Lease] = rec
	}
	f.hold(c.Lease, rec)
	s.Outcomes[c.ID.Seq] = outcome{Kind: cmdAcquire, Lease: c.Lease, Owner: c.Owner, Token: rec.Token}
	f.event(fsmEvent{Kind: evGranted, Lease: c.Lease, Rec: rec, Replaced: replaced})
	return f.grantedLocked(c.Lease, rec)
}

// removeGrantLocked takes the standing grant rec of lease out of the
// table, exclusive or shared, without an event: the caller replaces it.
func (f *fsm) removeGrantLocked(lease string, rec leaseRecord) {
	f.unhold(lease, rec)
	if sem := f.st.Sems[lease]; sem != nil {
		sem.remove(rec.Token)
		if len(sem.Holders) == 0 {
			delete(f.st.Sems, lease)
		}
		return
	}
	delete(f.st.Leases, lease)
}
