package daemon

import (
	"context"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

// Releases the daemon sends on its own (a lost lease, an owner that
// ended, a grant nobody was told of) are requests of the lease's owner for
// its name, so they take that owner's turn like its acquires: a release
// still in flight can then never land after the same owner's next grant
// of the name and end it. Each is queued under d.mu (queueReleaseLocked)
// and sent by whoever holds the turn next: a background sender started
// for it, or the owner's next acquire, which sends it before anything
// else.

// queueReleaseLocked queues l's release at the grantor and starts a sender
// that waits for the turn. ownerEnded says l's owner ended, or l was
// lost, without the owner releasing it: the grantor keeps the name for
// l's lock-delay (its owner may still act on what l protects); false for
// a grant nobody was told of. The caller holds d.mu.
func (d *Daemon) queueReleaseLocked(l *lease, why string, ownerEnded bool) {
	k := turnKey{l.ownerID, l.name}
	if d.unreleased == nil {
		d.unreleased = map[turnKey][]queuedRelease{}
	}
	d.unreleased[k] = append(d.unreleased[k], queuedRelease{l, why, ownerEnded})
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
	l          *lease
	why        string
	ownerEnded bool
}

// sendReleases sends the queued releases of owner and name. The caller
// holds their turn.
func (d *Daemon) sendReleases(ctx context.Context, owner, name string) {
	k := turnKey{owner, name}
	d.mu.Lock()
	qs := d.unreleased[k]
	delete(d.unreleased, k)
	d.mu.Unlock()
	for _, q := range qs {
		_, err := d.g.release(ctx, q.l.sess, q.l.name, q.l.ownerID, q.l.token, q.ownerEnded)
		d.mu.Lock()
		d.stepLocked(q.l, evReleaseDone, "", d.clock.Now())
		d.mu.Unlock()
		if err != nil {
			d.log.Warn("release failed; the grantor lists the grant in this host's session's next keepalive reply, and it is given back then",
				"lease", q.l.name, "token", q.l.token, "why", q.why, "err", err)
			d.releaseFailed(q.l.sess)
		}
	}
}

// accountedLocked reports whether a grant of name that the grantor lists
// in session s for owner, and that the table does not hold, may still be
// accounted for by a request of this daemon: an acquire of name in s by
// that owner in flight (its reply will list it, or give it back), or a
// queued release. Another owner's acquire does not account for it: it
// would keep the grant, which nobody holds, standing for as long as that
// owner waits for it. The caller holds d.mu.
func (d *Daemon) accountedLocked(s *gsession, name, owner string) bool {
	return d.acquiring[acquireKey{s, name, owner}] > 0 || len(d.unreleased[turnKey{owner, name}]) > 0
}

// acquireKey names the acquires of one owner for one lease name in one
// grantor session.
type acquireKey struct {
	s     *gsession
	name  string
	owner string
}

// A grantor session may hold grants the daemon does not know: an acquire
// whose answer never came (the grantor may have granted it), a release
// that failed. Keepalive replies list such grants, and they are given
// back (renewer.go); but a session in which the daemon knows no lease is
// never renewed, so nothing would list them, and they would stand until
// the grantor expires the session: a term in one office, far longer while
// leadership flaps (chaos finding F6). Such a session is settling: the
// renew loop sends it in keepalives, known leases or not, until a reply
// lists nothing the daemon does not know.

// settling is a session that may hold grants the daemon does not know.
type settling struct {
	// since is when the last request that may have left one ended.
	since clockwatch.Instant
	// probeAt is when the session's next keepalive is due.
	probeAt clockwatch.Instant
}

// settleMargin is how long after a request was given up its grant may
// still be applied at the grantor: a keepalive reply only settles the
// session when the keepalive left this long after since.
const settleMargin = attemptTimeout

// releasePause is how long after a failed release its session is asked
// after: the reply lists the grant again and it is released again, so a
// release that keeps failing is tried once a second, not in a loop.
const releasePause = time.Second

// unsettledLocked marks s settling from now, to be asked after once
// pause is over, and wakes the renew loop. The caller holds d.mu.
func (d *Daemon) unsettledLocked(s *gsession, pause time.Duration) {
	if d.settling == nil {
		d.settling = map[*gsession]*settling{}
	}
	now := d.clock.Now()
	d.settling[s] = &settling{since: now, probeAt: now.Add(pause)}
	d.wake()
}

// releaseFailed marks the session of a release that failed settling.
func (d *Daemon) releaseFailed(s *gsession) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.unsettledLocked(s, releasePause)
}

// settledLocked takes in a keepalive reply for a settling session s, sent
// at t0: clean says it listed nothing the daemon does not know or may
// still account for. The caller holds d.mu.
func (d *Daemon) settledLocked(s *gsession, t0 clockwatch.Instant, clean bool) {
	st := d.settling[s]
	if st == nil {
		return
	}
	switch {
	case clean && !t0.Before(st.since.Add(settleMargin)):
		delete(d.settling, s)
	case clean:
		st.probeAt = st.since.Add(settleMargin)
	default:
		// Given back now, or still accounted for: ask again.
		st.probeAt = t0.Add(renewInterval(s.ttl))
	}
}
