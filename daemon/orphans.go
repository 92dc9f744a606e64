package daemon

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// Grants a previous process of these sessions made and this one does not
// know (review rev1 open finding 4): an acquire whose reply it did not
// live to see, or a grant it told while its state writes failed, or one
// whose deadline passed while no daemon ran. The grantor lists them in
// the session's keepalive replies and keeps them for as long as the
// session is renewed, so their names stayed held for good.
//
// This process ends them as their owner's end (ends.go: the grantor keeps
// the name for the grant's lock-delay, as for a lease that expired: an
// owner that was told may have acted on a resource that checks no token)
// once every deadline a previous process can have told of them has
// passed: such a deadline came from a t0 before this process started, so
// it is before the start plus the session's term. Only grants whose owner
// id a previous process gave are ended (detached:N up to the counter
// restored, conn:START.ID of an earlier START): this process never tells
// those, so no acquire of its own in flight is ended under it. A pid
// owner's id names the owner process, not the daemon's, so such grants
// are left to the session's end as before; and so are the grants this
// process restored (its own releases, with their lock-delays, end them).

// previousOwners is what restore learned to tell a previous process's
// grants by.
type previousOwners struct {
	// start is when this process restored the sessions.
	start clockwatch.Instant
	// detached is the highest detached owner number a previous process
	// can have given; conn the lowest process number this one's
	// connection owners take (persister.start).
	detached, conn uint64
	// restored are the grants this process took in from the state.
	restored map[grantKey]bool
	// told are the deadlines the previous process wrote of the restored
	// grants whose deadline the timing floor made earlier here
	// (restore.go): its owner may have been told the later one.
	told map[grantKey]clockwatch.Instant
}

// heldBack reports whether the owner's end of grant k must not reach the
// grantor yet at now: k was restored with a deadline earlier than the one
// the previous process wrote of it (the timing floor's file keeps the
// highest floor of that process's life, and after a reset_rho it told
// deadlines that floor does not give), which has not passed. Lost here
// at the earlier deadline, the lease's release would otherwise let the
// grantor grant its name while its owner still acts on the later one. Its
// lock-delay is kept after that, as after any owner's end. p may be nil.
func (p *previousOwners) heldBack(k grantKey, now clockwatch.Instant) bool {
	if p == nil {
		return false
	}
	dl, ok := p.told[k]
	return ok && now.Before(dl)
}

// holdLost holds back the owner's end of restored grant k, lost here,
// until this process's start plus its term: a follower lease is restored
// with its session's earliest deadline (the deadline rule, statefile.go),
// which may be earlier than its own, and what a previous process told of
// it came from a t0 before this process started. The grantor's own expiry
// of a lost grant comes about then too. p may be nil.
func (p *previousOwners) holdLost(k grantKey, term time.Duration) {
	if p == nil || !p.restored[k] {
		return
	}
	p.told[k] = max(p.told[k], p.start.Add(term))
}

// gave reports whether owner id was given by a previous process.
func (p *previousOwners) gave(id string) bool {
	if rest, ok := strings.CutPrefix(id, "detached:"); ok {
		n, err := strconv.ParseUint(rest, 10, 64)
		return err == nil && n <= p.detached
	}
	if rest, ok := strings.CutPrefix(id, "conn:"); ok {
		s, _, _ := strings.Cut(rest, ".")
		n, err := strconv.ParseUint(s, 10, 64)
		return err == nil && n < p.conn
	}
	return false
}

// endOrphansLocked names owner-ended the grants of s the keepalive reply
// listed (refs) that a previous process made and this one neither knows
// nor restored, once now is past this process's start plus s's term. The
// caller holds d.mu.
func (d *Daemon) endOrphansLocked(s *gsession, refs []*grantorpb.LeaseRef, now clockwatch.Instant) {
	p := d.previous
	if p == nil || now.Before(p.start.Add(s.ttl)) {
		return
	}
	var named []grantKey
	if e := d.ends[s]; e != nil {
		named = slices.Concat(e.untold, e.ownerEnded)
	}
	for _, ref := range refs {
		k := grantKey{ref.Lease, ref.Token}
		if p.restored[k] || !p.gave(ref.Owner) || slices.Contains(named, k) {
			continue
		}
		d.log.Info("ending a grant a previous daemon process made and this one does not know", "lease", k.lease, "token", k.token,
			"owner", ref.Owner, "session", s.id)
		d.endAtGrantorLocked(s, k, true) // as its owner's end: its lock-delay kept
		named = append(named, k)
	}
}
