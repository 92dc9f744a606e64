package daemon

import (
	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// A lost lease with a lock-delay is not released (ops.go loseLocked): its
// owner may still be acting on a resource that does not check tokens, so
// its name stays held at the grantor until the lock-delay is over: the
// daemon keeps a delay for it, per session, name and owner, and keeps that
// session renewed while a delay in it lasts (while the grantors can be
// reached; if they cannot, the grantor's own expiry frees the name). While the delay lasts, what the grantor
// lists in that session for that name and owner is not a grant to give
// back: the lost grant, or a later grant of the same owner that the owner
// was never told of (when an owner asks again, the grantor ends its lost
// grant and the new grant holds the name in its place; an owner that
// crashed before the answer came is the case a lock-delay is for). A
// delay counts as a lease of its user (max_leases_per_uid), and the grant
// standing for it is in its session's digest, so that keepalive replies
// do not list the whole session while it lasts. It ends when its time is
// over, or when its owner is told a new grant of the name, which takes it
// over (an end of that grant, by its owner or by a release, keeps the
// name held until it is over).

// delayKey names the delay of one owner's lost grant of one name in a
// session.
type delayKey struct{ name, owner string }

// delayEntry is a lost grant sitting out its lock-delay.
type delayEntry struct {
	until clockwatch.Instant
	// token is the grant standing for it at the grantor as far as the
	// daemon knows (the lost one, or its owner's later grant nobody was
	// told of), 0 when the grantor listed none.
	token uint64
	uid   int
	// renewAt is when its session's next keepalive is due for it: the
	// session must stay renewed for the grantor to keep the name (zero:
	// at once).
	renewAt clockwatch.Instant
}

// delayLocked starts the lock-delay of the lost lease l, to end at until.
// The caller holds d.mu.
func (d *Daemon) delayLocked(l *lease, until clockwatch.Instant) {
	m := d.delayed[l.sess]
	if m == nil {
		m = map[delayKey]*delayEntry{}
		d.delayed[l.sess] = m
	}
	k := delayKey{l.name, l.ownerID}
	if dl := m[k]; dl != nil {
		dl.until, dl.token = max(dl.until, until), l.token
		return
	}
	m[k] = &delayEntry{until: until, token: l.token, uid: l.uid}
	d.uidUse(l.uid).held++
}

// delayingLocked returns the delay of owner's lost grant of name in s,
// if it still runs at now. The caller holds d.mu.
func (d *Daemon) delayingLocked(s *gsession, name, owner string, now clockwatch.Instant) *delayEntry {
	if dl := d.delayed[s][delayKey{name, owner}]; dl != nil && now.Before(dl.until) {
		return dl
	}
	return nil
}

// keptForDelayLocked reports whether l, a grant nobody was told of that is
// about to be given back, is kept instead: its owner's lost grant of the
// name sits out its lock-delay, which l now stands for at the grantor.
// The caller holds d.mu.
func (d *Daemon) keptForDelayLocked(l *lease) bool {
	dl := d.delayingLocked(l.sess, l.name, l.ownerID, d.clock.Now())
	if dl == nil {
		return false
	}
	dl.token = l.token
	d.log.Info("keeping a grant nobody was told of until the lock-delay of its owner's lost grant is over", "lease", l.name, "token", l.token)
	return true
}

// toldLocked hands the delay of l's owner for l's name over to l: the
// owner was told l, a new grant of the name, which holds it at the grantor
// now. When l ends, its own lock-delay applies, and not before the delay
// it took over is over. The caller holds d.mu.
func (d *Daemon) toldLocked(l *lease) {
	k := delayKey{l.name, l.ownerID}
	if dl := d.delayed[l.sess][k]; dl != nil {
		l.delayFloor = max(l.delayFloor, dl.until)
		if l.releaseAt != never {
			// Its owner ended between the listing and the telling.
			l.releaseAt = max(l.releaseAt, dl.until)
		}
		dl.token = 0 // l's token is in the digest as a lease's
		d.endDelayLocked(l.sess, k, dl)
	}
}

// endDelayLocked forgets delay dl, k in s. A grant still standing for it
// is given back once a keepalive reply lists it: the session is asked
// after at once. The caller holds d.mu.
func (d *Daemon) endDelayLocked(s *gsession, k delayKey, dl *delayEntry) {
	delete(d.delayed[s], k)
	if len(d.delayed[s]) == 0 {
		delete(d.delayed, s)
	}
	d.uidUse(dl.uid).held--
	d.dropUIDLocked(dl.uid)
	if dl.token != 0 {
		d.unsettledLocked(s, 0)
	}
}

// delaysDueLocked adds to due the sessions whose delays need a keepalive
// at now. The caller holds d.mu.
func (d *Daemon) delaysDueLocked(now clockwatch.Instant, due map[*gsession]bool) {
	for s, m := range d.delayed {
		for _, dl := range m {
			if !now.Before(dl.renewAt) {
				due[s] = true
			}
		}
	}
}

// delaysAskedLocked takes in that a keepalive of s, sent at t0, was
// answered: its delays are due again a renewal interval later (renewed
// or not: a session the grantor ended is asked after at that pace, not
// in a loop, until the delays are over). The caller holds d.mu.
func (d *Daemon) delaysAskedLocked(s *gsession, t0 clockwatch.Instant) {
	for _, dl := range d.delayed[s] {
		dl.renewAt = max(dl.renewAt, t0.Add(renewInterval(s.ttl)))
	}
}

// delaysWakeLocked lowers deadline and renew to the earliest end and
// keepalive due of the delays. The caller holds d.mu.
func (d *Daemon) delaysWakeLocked(deadline, renew *clockwatch.Instant) {
	for _, m := range d.delayed {
		for _, dl := range m {
			*deadline, *renew = min(*deadline, dl.until), min(*renew, dl.renewAt)
		}
	}
}

// sweepDelayedLocked ends the delays that are over at now. The caller
// holds d.mu.
func (d *Daemon) sweepDelayedLocked(now clockwatch.Instant) {
	for s, m := range d.delayed {
		for k, dl := range m {
			if !now.Before(dl.until) {
				d.endDelayLocked(s, k, dl)
			}
		}
	}
}

// delayedDigestLocked is the part of s's digest for the grants standing
// for its delays. The caller holds d.mu.
func (d *Daemon) delayedDigestLocked(s *gsession) uint64 {
	var sum uint64
	for _, dl := range d.delayed[s] {
		if dl.token != 0 {
			sum += grantorpb.TokenDigest(dl.token)
		}
	}
	return sum
}

// delayedListedLocked takes in what a keepalive reply listed for s's
// delays: the grant each one's owner holds there, by name, or none
// (seen lacks it). The caller holds d.mu.
func (d *Daemon) delayedListedLocked(s *gsession, seen map[*delayEntry]uint64) {
	for _, dl := range d.delayed[s] {
		dl.token = seen[dl]
	}
}
