package daemon

import (
	"context"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// How grants this daemon holds end at the grantor when no owner released
// them (issue 22 item 3).
//
// A grant nobody was told of (its answer came after its owner or
// requester was gone, it was not confirmed in time, or only the retry
// after a call gave up learned it: settleAcquire) is untold: the daemon
// names it in its session's keepalives (SessionRenewal.untold) until a
// reply shows the session no longer holds it, and the grantor ends it,
// without lock-delay (grantor/untold.go). A release that did not get
// there is named the same way: untold when its owner released it,
// owner-ended when it reported its owner's end. The daemon never gives
// back a grant it does not know: every grant of its sessions is one it
// was answered with, or one an acquire still in flight or settling may
// answer it with.
//
// A lost lease, or one whose owner ended, is released with owner_ended
// (the grantor keeps its lock-delay: its owner may still act on what it
// protects). That release is a request of the lease's owner for its name,
// so it takes that owner's turn like its acquires: it can never land
// after the same owner's next grant of the name. It is queued under d.mu
// (queueReleaseLocked) and sent by whoever holds the turn next: a
// background sender started for it, or the owner's next acquire, which
// sends it before anything else.

// sessionEnds are the grants of one session the daemon names in its
// keepalives, to be ended by the grantor.
type sessionEnds struct {
	untold, ownerEnded []grantKey
	// probeAt is when the session's next keepalive is due for them.
	probeAt clockwatch.Instant
}

// endRetryPause is how long after a keepalive reply that still lists a
// named grant the session is asked after again: the grantor ends it with
// a raft entry after that reply, so the next keepalive finds it gone.
const endRetryPause = time.Second

// endAtGrantorLocked names grant k of session s in its keepalives until
// the grantor no longer holds it: as untold (no lock-delay), or with its
// owner ended (its lock-delay kept). The caller holds d.mu.
func (d *Daemon) endAtGrantorLocked(s *gsession, k grantKey, ownerEnded bool) {
	if s.refused {
		return // the grantors refuse this sidecar the session: its grants end at their expiry
	}
	if d.ends == nil {
		d.ends = map[*gsession]*sessionEnds{}
	}
	e := d.ends[s]
	if e == nil {
		e = &sessionEnds{}
		d.ends[s] = e
	}
	if ownerEnded {
		e.ownerEnded = append(e.ownerEnded, k)
	} else {
		e.untold = append(e.untold, k)
	}
	e.probeAt = d.clock.Now()
	d.wake()
}

// untoldLocked ends grant token of name in s, of which nobody was told.
// The caller holds d.mu.
func (d *Daemon) untoldLocked(s *gsession, name string, token uint64) {
	d.metrics.givenBack.Add(1)
	d.endAtGrantorLocked(s, grantKey{name, token}, false)
}

// endsDueLocked returns the sessions whose named grants are due in a
// keepalive at now. The caller holds d.mu.
func (d *Daemon) endsDueLocked(now clockwatch.Instant, due map[*gsession]bool) {
	for s, e := range d.ends {
		if !now.Before(d.endsAtLocked(e)) {
			due[s] = true
		}
	}
}

// endsAtLocked returns when e's named grants are next due in a keepalive:
// its probeAt, or, when all it names are owner's ends held back then
// (heldBack), the earliest deadline that holds one back. The caller holds
// d.mu.
func (d *Daemon) endsAtLocked(e *sessionEnds) clockwatch.Instant {
	if len(e.untold) > 0 || d.previous == nil {
		return e.probeAt
	}
	var first clockwatch.Instant
	for _, k := range e.ownerEnded {
		dl, ok := d.previous.told[k]
		if !ok || !e.probeAt.Before(dl) {
			return e.probeAt
		}
		if first == 0 || dl.Before(first) {
			first = dl
		}
	}
	if first == 0 {
		return e.probeAt
	}
	return first
}

// endsOfLocked fills sb's named grants from s's, as the keepalive sends
// them at now, leaving out a restored grant's owner's end while the
// deadline a previous process told of it has not passed (heldBack). The
// caller holds d.mu.
func (d *Daemon) endsOfLocked(sb *sessionBatch, now clockwatch.Instant) {
	if e := d.ends[sb.s]; e != nil {
		sb.untold = append([]grantKey(nil), e.untold...)
		sb.ownerEnded = make([]grantKey, 0, len(e.ownerEnded))
		for _, k := range e.ownerEnded {
			if !d.previous.heldBack(k, now) {
				sb.ownerEnded = append(sb.ownerEnded, k)
			}
		}
	}
}

// endRefs is grants as a keepalive names them.
func endRefs(ks []grantKey) []*grantorpb.LeaseRef {
	if len(ks) == 0 {
		return nil
	}
	out := make([]*grantorpb.LeaseRef, len(ks))
	for i, k := range ks {
		out[i] = &grantorpb.LeaseRef{Lease: k.lease, Token: k.token}
	}
	return out
}

// endsAnsweredLocked takes in the reply for sb: a grant it named that the
// session no longer holds (the session was not renewed: it holds
// nothing; or listed names it no longer) is done with; the rest are named
// again after endRetryPause. listed is nil when the grantor's digest
// matched the daemon's, which leaves out every named grant. The caller
// holds d.mu.
func (d *Daemon) endsAnsweredLocked(sb *sessionBatch, renewed bool, listed map[grantKey]*grantorpb.LeaseRef, now clockwatch.Instant) {
	e := d.ends[sb.s]
	if e == nil || len(sb.untold)+len(sb.ownerEnded) == 0 {
		return
	}
	gone := func(k grantKey) bool { return !renewed || listed[k] == nil }
	drop := func(have, sent []grantKey) []grantKey {
		out := have[:0]
		for _, k := range have {
			if !(gone(k) && contains(sent, k)) {
				out = append(out, k)
			}
		}
		return out
	}
	e.untold = drop(e.untold, sb.untold)
	e.ownerEnded = drop(e.ownerEnded, sb.ownerEnded)
	if len(e.untold)+len(e.ownerEnded) == 0 {
		delete(d.ends, sb.s)
		return
	}
	e.probeAt = now.Add(endRetryPause)
}

func contains(ks []grantKey, k grantKey) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// queueReleaseLocked ends l at the grantor once it left the table
// without a release by its owner. ownerEnded says its owner ended, or l
// was lost, without the owner releasing it: its release, with
// owner_ended, is queued for the owner's turn by a sender started for it
// (the grantor keeps the name for l's lock-delay; its owner may still act
// on what l protects; a lost l goes as lapsed, so watchers are told it
// expired). Else nobody was told of l: it is named untold in
// its session's keepalives, and the daemon keeps nothing else of it. The
// caller holds d.mu.
func (d *Daemon) queueReleaseLocked(l *lease, why string, ownerEnded bool) {
	if l.sess.refused {
		return // the grantors would refuse it (sessionRefusedLocked)
	}
	if !ownerEnded {
		d.untoldLocked(l.sess, l.name, l.token)
		return
	}
	g := grantKey{l.name, l.token}
	if l.state == stateLost {
		d.previous.holdLost(g, l.ttl)
	}
	if d.previous.heldBack(g, d.clock.Now()) {
		// Restored with an earlier deadline than its owner may have been
		// told: named in the keepalives once that one has passed.
		d.endAtGrantorLocked(l.sess, g, true)
		return
	}
	k := turnKey{l.ownerID, l.name}
	if d.unreleased == nil {
		d.unreleased = map[turnKey][]queuedRelease{}
	}
	how := endOwnerEnded
	if l.state == stateLost {
		how = endLapsed
	}
	d.unreleased[k] = append(d.unreleased[k], queuedRelease{l, why, how})
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		done, err := d.turns.take(d.life, k.owner, k.name)
		if err != nil {
			return // the daemon stops: the grantor frees it at its expiry
		}
		defer done()
		ctx, cancel := context.WithTimeout(d.life, d.cfg.RequestTimeout)
		defer cancel()
		d.sendReleases(ctx, k.owner, k.name)
	}()
}

// queuedRelease is a release waiting for its owner's turn.
type queuedRelease struct {
	l   *lease
	why string
	how endKind // endOwnerEnded, or endLapsed for a lost lease
}

// sendReleases sends the queued releases of owner and name, each with
// owner_ended. One that fails is named in its session's keepalives
// instead. The caller holds their turn.
func (d *Daemon) sendReleases(ctx context.Context, owner, name string) {
	k := turnKey{owner, name}
	d.mu.Lock()
	qs := d.unreleased[k]
	delete(d.unreleased, k)
	d.mu.Unlock()
	for _, q := range qs {
		_, err := d.g.release(ctx, q.l.sess, q.l.name, q.l.ownerID, q.l.token, q.how)
		d.mu.Lock()
		d.stepLocked(q.l, evReleaseDone, "", d.clock.Now())
		if err != nil {
			d.endAtGrantorLocked(q.l.sess, grantKey{q.l.name, q.l.token}, true)
		}
		d.mu.Unlock()
		if err != nil {
			d.log.Warn("release failed; this host's keepalives name the grant until the grantor has ended it",
				"lease", q.l.name, "token", q.l.token, "why", q.why, "err", err)
		}
	}
}
