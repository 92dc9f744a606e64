package grantor

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
)

// Semaphores and election values (issue 12).
//
// A lease name is exclusive (one grant at a time, fsmState.Leases) or a
// semaphore (fsmState.Sems): up to Limit grants at once, each a grant of
// its own with the next token, renewed with its session and freed by a
// release or its session's expiry like any grant. The limit is in force
// while the name has holders; an Acquire that asks for another (1 for an
// exclusive one) is refused with a *LimitMismatchError naming both, and
// changes nothing. Waiters queue first come first served in the leader's
// memory as for exclusive leases, and a freeing entry hands the slot to
// the first waiter that is not already carried by another entry (the
// lessor's claim). Tokens stay strictly increasing per name: every grant
// takes the global counter's next value.
//
// A holder (session, owner) holds at most one grant of a name: asking
// again ends its grant and starts a new one with the next token, in one
// entry, as for exclusive leases (TEAM.md decision 1).
//
// Every grant may carry a value (an election candidate's address, say):
// set by the Acquire that made it, changed by its holder with a Proclaim
// entry that names the grant's token (no new token), and shown to
// watchers (watch.go). Values and semaphores are applied in cmdAcquire5,
// cmdRelease5, cmdExpireSession2 and cmdProclaim entries only, which a
// leader proposes once every server applies them; until then it refuses
// them with ErrNotSupported.

// Bounds of what a semaphore and a value may be; checked at the gRPC edge
// (validate.go) before anything reaches raft.
const (
	// MaxHolders is the largest limit a semaphore may have.
	MaxHolders = 256
	// MaxValueBytes is the longest value a grant may carry.
	MaxValueBytes = 1024
)

// semRecord is a semaphore in force: a name its holders were granted with
// a limit above 1.
type semRecord struct {
	// Limit is 0 for shared grants (Shared), which have none.
	Limit int `json:"limit"`
	// Shared marks the shared grants of a read/write lock (shared.go).
	Shared bool `json:"shared,omitempty"`
	// Holders are its grants, oldest first (tokens increase).
	Holders []leaseRecord `json:"holders"`
}

func (s *semRecord) index(token uint64) int {
	return slices.IndexFunc(s.Holders, func(r leaseRecord) bool { return r.Token == token })
}

func (s *semRecord) remove(token uint64) {
	if i := s.index(token); i >= 0 {
		s.Holders = slices.Delete(s.Holders, i, i+1)
	}
}

// proclaimCmd changes the value of the grant (Lease, Token) that the
// request's session and Owner hold (cmdProclaim).
type proclaimCmd struct {
	ID       requestID `json:"id"`
	Lease    string    `json:"lease"`
	Owner    string    `json:"owner"`
	Token    uint64    `json:"token"`
	Value    string    `json:"value"`
	Identity string    `json:"identity,omitempty"`
}

// proclaimResult is what the FSM returns for a Proclaim.
type proclaimResult struct {
	// Proclaimed is false when the grant does not stand (or is another
	// holder's): nothing changed.
	Proclaimed bool
}

// ErrNotSupported is returned for a semaphore, a value or a Proclaim while
// some server of the raft configuration does not apply them yet.
var ErrNotSupported = errors.New("grantor: not every grantor of the cluster has registered that it applies semaphores and election values: one is older (upgrade it) or has only just joined (it registers within seconds)")

// LimitMismatchError says that an Acquire asked for another limit than
// the one in force for the name. It matches ErrInvalidArgument.
type LimitMismatchError struct {
	Lease          string
	Asked, InForce int
}

// Error names both limits.
func (e *LimitMismatchError) Error() string {
	return fmt.Sprintf("grantor: lease %q is held with limit %d; this acquire asks for limit %d (every holder of a name asks with the same limit; 1 is exclusive)",
		e.Lease, e.InForce, e.Asked)
}

// Is makes errors.Is(err, ErrInvalidArgument) true.
func (e *LimitMismatchError) Is(target error) bool { return target == ErrInvalidArgument }

// oldAcquire drops what an Acquire of an entry older than cmdAcquire5
// does not apply.
func oldAcquire(c *acquireCmd) { c.MaxHolders, c.Value = 0, "" }

// validValue checks a grant's value: at most MaxValueBytes of UTF-8
// without control characters.
func validValue(field, v string) error {
	if len(v) > MaxValueBytes {
		return invalid(field, "value is %d bytes, more than %d", len(v), MaxValueBytes)
	}
	if !utf8.ValidString(v) {
		return invalid(field, "value is not valid UTF-8")
	}
	for i, r := range v {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return invalid(field, "value has control character %U at byte %d", r, i)
		}
	}
	return nil
}

// acquireSlot is applyAcquire for a semaphore: c asks for a limit above 1,
// or the name is a semaphore in force.
func (f *fsm) acquireSlot(s *sessionRecord, c *acquireCmd) any {
	limit := max(c.MaxHolders, 1)
	if r, ok := f.remembered(s, c); ok {
		return r
	}
	if len(s.Outcomes) >= maxOutstanding {
		return fmt.Errorf("%w: session %q has %d", ErrTooManyOutstanding, c.ID.Session, len(s.Outcomes))
	}
	inForce, holders := f.inForceLocked(c.Lease)
	if ds := f.st.Delays[c.Lease]; inForce == 0 && len(ds) > 0 {
		inForce = max(ds[0].Limit, 1) // the limit of the grants whose delays stand
	}
	if inForce != 0 && inForce != limit {
		return f.refuse(s, c, &LimitMismatchError{Lease: c.Lease, Asked: limit, InForce: inForce})
	}
	mine := slices.IndexFunc(holders, func(r leaseRecord) bool { return r.Session == c.ID.Session && r.Owner == c.Owner })
	if mine < 0 {
		if len(holders) >= limit || !f.hasRoomLocked(c.Lease) {
			return f.refuse(s, c, f.refusalLocked(c.Lease))
		}
		if err := f.checkLimit(s.Owner, c.Limit); err != nil {
			return err
		}
	}
	sem := f.st.Sems[c.Lease]
	if sem == nil {
		sem = &semRecord{Limit: limit}
		f.st.Sems[c.Lease] = sem
	}
	var replaced uint64
	if mine >= 0 {
		// The holder asks again: its old grant ends, a new one starts.
		old := sem.Holders[mine]
		f.unhold(c.Lease, old)
		sem.remove(old.Token)
		replaced = old.Token
	}
	f.st.LastToken++
	rec := leaseRecord{Session: f.internSession(c.ID.Session), Owner: c.Owner, Token: f.st.LastToken, TTL: c.TTL, Value: c.Value, LockDelay: c.LockDelay}
	sem.Holders = append(sem.Holders, rec)
	f.hold(c.Lease, rec)
	s.Outcomes[c.ID.Seq] = outcome{Kind: cmdAcquire, Lease: c.Lease, Owner: c.Owner, Token: rec.Token}
	f.event(fsmEvent{Kind: evGranted, Lease: c.Lease, Rec: rec, Replaced: replaced})
	return f.grantedLocked(c.Lease, rec)
}

// grantedLocked is the result of a granted Acquire of lease.
func (f *fsm) grantedLocked(lease string, rec leaseRecord) *acquireResult {
	limit, holders := f.inForceLocked(lease)
	return &acquireResult{Granted: true, Token: rec.Token, TTL: rec.TTL, Limit: limit, Holders: len(holders), Shared: f.sharedLocked(lease)}
}

// refusalLocked answers an Acquire that is not granted: the oldest
// holder's token and identity name (token 0 when the lease is free).
func (f *fsm) refusalLocked(lease string) *acquireResult {
	limit, holders := f.inForceLocked(lease)
	if ds := f.st.Delays[lease]; len(holders) == 0 && len(ds) > 0 {
		return delayedRefusal(ds[0])
	}
	if len(holders) == 0 {
		return &acquireResult{Limit: max(limit, 1)}
	}
	r := f.notGranted(holders[0])
	r.Limit, r.Holders, r.Shared = limit, len(holders), f.sharedLocked(lease)
	return r
}

// inForceLocked returns the limit in force for lease (0 when free, 1 for
// an exclusive grant) and its grants, oldest first. The slice must not be
// changed.
func (f *fsm) inForceLocked(lease string) (int, []leaseRecord) {
	if sem := f.st.Sems[lease]; sem != nil {
		return sem.Limit, sem.Holders
	}
	if cur, held := f.st.Leases[lease]; held {
		return 1, []leaseRecord{cur}
	}
	return 0, nil
}

// grantLocked returns the grant of lease with token, exclusive or a
// semaphore's.
func (f *fsm) grantLocked(lease string, token uint64) (leaseRecord, bool) {
	if sem := f.st.Sems[lease]; sem != nil {
		if i := sem.index(token); i >= 0 {
			return sem.Holders[i], true
		}
		return leaseRecord{}, false
	}
	cur, held := f.st.Leases[lease]
	return cur, held && cur.Token == token
}

// setGrantLocked replaces a grant that stands by rec (same token).
func (f *fsm) setGrantLocked(lease string, rec leaseRecord) {
	if sem := f.st.Sems[lease]; sem != nil {
		if i := sem.index(rec.Token); i >= 0 {
			sem.Holders[i] = rec
		}
		return
	}
	f.st.Leases[lease] = rec
}

// hasRoomLocked reports whether lease can take one more grant: it is
// free, or a semaphore below its limit, its grants and lock-delays
// (lockdelay.go) counted.
func (f *fsm) hasRoomLocked(lease string) bool {
	limit, holders := f.inForceLocked(lease)
	if ds := f.st.Delays[lease]; len(ds) > 0 {
		// A delay takes its ended grant's place (lockdelay.go).
		return len(holders)+len(ds) < max(limit, ds[0].Limit, 1)
	}
	return limit == 0 || len(holders) < limit
}

// applyProclaim sets the value of a grant that the request's session and
// owner hold with the token named; a grant that has ended (or is another
// holder's) changes nothing. The outcome is remembered under the
// request's (session, seq), so a retry cannot undo a later Proclaim.
func (f *fsm) applyProclaim(c *proclaimCmd) any {
	s, err := f.session(c.ID, c.Identity)
	if err != nil {
		return err
	}
	if o, dup := s.Outcomes[c.ID.Seq]; dup {
		if o.Kind != cmdProclaim || o.Lease != c.Lease || o.Owner != c.Owner || o.Token != c.Token {
			return fmt.Errorf("%w: seq %d was %v of %q", ErrSeqReused, c.ID.Seq, o.Kind, o.Lease)
		}
		return &proclaimResult{Proclaimed: o.Released}
	}
	if len(s.Outcomes) >= maxOutstanding {
		return fmt.Errorf("%w: session %q has %d", ErrTooManyOutstanding, c.ID.Session, len(s.Outcomes))
	}
	cur, held := f.grantLocked(c.Lease, c.Token)
	ok := held && cur.Session == c.ID.Session && cur.Owner == c.Owner
	if ok {
		if sl := f.bySession[cur.Session]; sl != nil {
			f.ownerUsageLocked(sl.owner).valueBytes += len(c.Value) - len(cur.Value)
			f.dropUsageIfEmpty(sl.owner)
		}
		cur.Value = c.Value
		f.setGrantLocked(c.Lease, cur)
		f.event(fsmEvent{Kind: evProclaimed, Lease: c.Lease, Rec: cur})
	}
	s.Outcomes[c.ID.Seq] = outcome{Kind: cmdProclaim, Lease: c.Lease, Owner: c.Owner, Token: c.Token, Released: ok}
	return &proclaimResult{Proclaimed: ok}
}

// Read accessors for the lessor, watchers and token checks.

// isSemaphore reports whether lease is a semaphore in force.
func (f *fsm) isSemaphore(lease string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.Sems[lease] != nil
}

// heldBy reports whether session and owner hold a grant of lease.
func (f *fsm) heldBy(lease, session, owner string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, holders := f.inForceLocked(lease)
	return slices.ContainsFunc(holders, func(r leaseRecord) bool { return r.Session == session && r.Owner == owner })
}

// grant returns the grant of lease with token, if it stands.
func (f *fsm) grant(lease string, token uint64) (leaseRecord, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.grantLocked(lease, token)
}

// holderView is one grant of a name as watchers and checks see it.
type holderView struct {
	Token      uint64
	HolderName string
	Value      string
	Session    string // for the leader's own checks; never sent
}

// holders returns the limit in force for lease (0 when free or shared),
// whether its grants are shared, its grants oldest first, and the index
// of the last entry applied.
func (f *fsm) holders(lease string) (int, bool, []holderView, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	limit, hs := f.inForceLocked(lease)
	out := make([]holderView, len(hs))
	for i, r := range hs {
		out[i] = holderView{Token: r.Token, HolderName: f.ownerOf(r.Session), Value: r.Value, Session: r.Session}
	}
	return limit, f.sharedLocked(lease), out, f.applied
}
