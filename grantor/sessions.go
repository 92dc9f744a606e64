package grantor

import (
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// The FSM's view of sessions as lease holders (issue 13 item 1).
//
// A session renews as a whole: the leader keeps one expiry per session
// (lessor.go) and a keepalive names the session and the version of its
// lease set, not every lease. The version is a digest of the set: the sum
// of a mix of each grant's token. It is derived from the lease table alone,
// so every replica, whatever snapshot it started from, computes the same
// one, and so does the sidecar from the grants it holds: when the two
// differ, the keepalive's reply lists the session's leases and the sidecar
// reconciles (gives back grants it does not know, drops those the grantor
// no longer has). Tokens are unique, so two sets with the same digest are
// the same set but for a 64-bit collision; and a collision can only hide
// a grant the session itself made, never another session's.

// sessionLeases indexes the grants one session holds, by lease and token
// (a session may hold several grants of one semaphore); derived state.
type sessionLeases struct {
	grants map[grantRef]struct{}
	digest uint64
	// name is the session's name as its first grant stored it; later
	// grants store this copy (internSession), not one of their own.
	name string
	// owner is the identity name the grants are charged to (usage.go).
	owner string
}

// internSession returns session's name as the grants it holds store it,
// so that a session's grants share one copy of its name (a decoded entry
// brings a copy of its own); session itself when it holds none.
func (f *fsm) internSession(session string) string {
	if sl := f.bySession[session]; sl != nil {
		return sl.name
	}
	return session
}

func (s *sessionLeases) count() int {
	if s == nil {
		return 0
	}
	return len(s.grants)
}

// hold enters a new grant of lease name in its session's index and charges
// it, with its value, to the session's owner.
func (f *fsm) hold(name string, cur leaseRecord) {
	sl := f.bySession[cur.Session]
	if sl == nil {
		sl = &sessionLeases{grants: map[grantRef]struct{}{}, name: cur.Session, owner: f.ownerOf(cur.Session)}
		f.bySession[cur.Session] = sl
	}
	sl.grants[grantRef{name, cur.Token}] = struct{}{}
	sl.digest += grantorpb.TokenDigest(cur.Token)
	f.chargeGrant(sl.owner, 1, len(cur.Value))
}

// unhold takes a grant that ended out of the index, and its charge.
func (f *fsm) unhold(name string, cur leaseRecord) {
	sl := f.bySession[cur.Session]
	if sl == nil {
		return
	}
	delete(sl.grants, grantRef{name, cur.Token})
	sl.digest -= grantorpb.TokenDigest(cur.Token)
	if len(sl.grants) == 0 {
		delete(f.bySession, cur.Session)
	}
	f.chargeGrant(sl.owner, -1, len(cur.Value))
}

// sessionGrant is one lease of a session as a keepalive reply lists it.
type sessionGrant struct {
	Lease string
	Token uint64
	TTL   time.Duration
	Owner string
}

// sessionDigest returns the digest of session's lease set.
func (f *fsm) sessionDigest(session string) uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if sl := f.bySession[session]; sl != nil {
		return sl.digest
	}
	return 0
}

// sessionListing returns session's grants and their digest, if reserve
// takes the bytes they make in a keepalive answer (listedSize), measured
// first and listed under the same read lock, so that what is listed is
// what was reserved; ok is false, and nothing is listed, when reserve
// refuses (before anything is built for the listing).
func (f *fsm) sessionListing(session string, reserve func(n int) bool) (grants []sessionGrant, digest uint64, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	sl := f.bySession[session]
	if sl == nil {
		return nil, 0, reserve(0)
	}
	n := 0
	for g := range sl.grants {
		rec, _ := f.grantLocked(g.Lease, g.Token)
		n += listedSize(g.Lease, rec.Token, rec.TTL, rec.Owner)
	}
	if !reserve(n) {
		return nil, 0, false
	}
	grants = make([]sessionGrant, 0, len(sl.grants))
	for g := range sl.grants {
		rec, _ := f.grantLocked(g.Lease, g.Token)
		grants = append(grants, sessionGrant{Lease: g.Lease, Token: rec.Token, TTL: rec.TTL, Owner: rec.Owner})
	}
	return grants, sl.digest, true
}

// listedSize is the bytes one grant adds to a keepalive answer that
// lists it: a grantorpb.LeaseRef in SessionRenewed.leases (field 6), as
// proto.Size counts them.
func listedSize(lease string, token uint64, ttl time.Duration, owner string) int {
	n := 0
	if lease != "" {
		n += 1 + protowire.SizeBytes(len(lease))
	}
	if token != 0 {
		n += 1 + protowire.SizeVarint(token)
	}
	if ttl != 0 {
		n += 1 + protowire.SizeVarint(uint64(ttl))
	}
	if owner != "" {
		n += 1 + protowire.SizeBytes(len(owner))
	}
	return 1 + protowire.SizeBytes(n)
}

// sessionHeld returns session's grants as refs (lease, token), the
// largest term among them, and whether it holds any.
func (f *fsm) sessionHeld(session string) (refs []grantRef, maxTTL time.Duration) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	sl := f.bySession[session]
	if sl == nil {
		return nil, 0
	}
	refs = make([]grantRef, 0, len(sl.grants))
	for g := range sl.grants {
		rec, _ := f.grantLocked(g.Lease, g.Token)
		refs = append(refs, g)
		maxTTL = max(maxTTL, rec.TTL)
	}
	return refs, maxTTL
}

// sessionTerms returns, for every session holding leases, the largest
// term among its grants.
func (f *fsm) sessionTerms() map[string]time.Duration {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make(map[string]time.Duration, len(f.bySession))
	for _, rec := range f.st.Leases {
		out[rec.Session] = max(out[rec.Session], rec.TTL)
	}
	for _, sem := range f.st.Sems {
		for _, rec := range sem.Holders {
			out[rec.Session] = max(out[rec.Session], rec.TTL)
		}
	}
	return out
}

// sessionLeaseCount returns how many leases session holds.
func (f *fsm) sessionLeaseCount(session string) int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.bySession[session].count()
}

// stillHeld returns those of refs that session still holds with their
// tokens.
func (f *fsm) stillHeld(session string, refs []grantRef) []grantRef {
	f.mu.RLock()
	defer f.mu.RUnlock()
	sl := f.bySession[session]
	if sl == nil {
		return nil
	}
	var out []grantRef
	for _, g := range refs {
		if _, ok := sl.grants[g]; ok {
			out = append(out, g)
		}
	}
	return out
}
