package daemon

import (
	"context"
	"strconv"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// status lists the held leases the caller may see (visible). It checks
// deadlines itself rather than trust the renew loop to have run: no reply
// ever shows a lease past its deadline.
func (d *Daemon) status(cred ipc.Cred) *ipc.Response {
	now := d.checkSuspend()
	r := new(statusReply) // one allocation for the reply's parts
	r.resp = ipc.Response{Leases: &r.grants, Clock: &r.clock}
	d.mu.Lock()
	if len(d.leases) > 0 {
		r.grants = make([]ipc.Grant, 0, len(d.leases))
	} else {
		r.grants = []ipc.Grant{} // [], not null
	}
	for _, l := range d.leases {
		if !l.state.valid() || !d.visible(cred, l) {
			continue
		}
		if !now.Before(l.deadline) {
			d.stepLocked(l, evExpired, d.lostReason(l, false), now)
			continue
		}
		r.grants = append(r.grants, *l.grant(now))
	}
	d.mu.Unlock()
	d.fillClockStatus(&r.clock, false)
	d.grantorStatus(&r.grantor, r.known[:0], now)
	r.resp.Grantor = &r.grantor
	return &r.resp
}

// statusReply holds a status reply and the parts it points to, which
// live as long as it does: one allocation for all of them, the list of
// grants aside (and the grantors known, when there are more than three).
type statusReply struct {
	resp    ipc.Response
	grants  []ipc.Grant
	clock   ipc.ClockStatus
	grantor ipc.GrantorStatus
	known   [3]string
}

// validLocked returns the lease with table key key (a name, or a
// semaphore's slot key) if it is held and valid now, ending it first if
// its deadline has passed. The caller holds d.mu.
func (d *Daemon) validLocked(key string, now clockwatch.Instant) *lease {
	l := d.leases[key]
	if l != nil && l.state == statePending {
		return nil // not confirmed yet; nobody holds it as far as callers know
	}
	if l != nil && !now.Before(l.deadline) {
		d.stepLocked(l, evExpired, d.lostReason(l, false), now)
		return nil
	}
	return l
}

// renew renews a lease this host holds at once, and returns its new grant.
// It is how leases acquired with no_renew are kept.
func (d *Daemon) renew(ctx context.Context, c *ipc.Conn, name, token string) (*ipc.Grant, *ipc.Error) {
	now := d.checkSuspend()
	d.mu.Lock()
	l, err := d.heldByLocked(c, name, token, now)
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	if err := d.renewNow(rctx, l); err != nil {
		return nil, err
	}
	return d.check(c, name, token)
}

// heldByLocked returns the named lease if it is valid now, has the token
// (unless token is ""), and the caller may act on it: the uid that
// acquired it, or root. The caller holds d.mu.
func (d *Daemon) heldByLocked(c *ipc.Conn, name, token string, now clockwatch.Instant) (*lease, *ipc.Error) {
	l := d.findLocked(c, name, token, now)
	if l == nil {
		return nil, ipc.Errorf(ipc.CodeNotHeld, "this host does not hold %q", name)
	}
	if token != "" && token != strconv.FormatUint(l.token, 10) {
		return nil, ipc.Errorf(ipc.CodeTokenMismatch, "this host holds %q with token %d, not %s", name, l.token, token)
	}
	if c.Cred.UID != 0 && c.Cred.UID != int(l.uid) {
		return nil, ipc.Errorf(ipc.CodePermissionDenied, "%q was acquired by uid %d; only it or root may act on it", name, l.uid)
	}
	return l, nil
}

// check returns the grant of a lease this host holds and that is valid
// now, with the given token unless token is "". A lease the caller may
// not see (visible: status hides it from them) is not held, as far as
// they are told.
func (d *Daemon) check(c *ipc.Conn, name, token string) (*ipc.Grant, *ipc.Error) {
	now := d.checkSuspend()
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.findLocked(nil, name, token, now)
	if l == nil || !d.visible(c.Cred, l) {
		return nil, ipc.Errorf(ipc.CodeNotHeld, "this host does not hold %q", name)
	}
	if token != "" && token != strconv.FormatUint(l.token, 10) {
		return nil, ipc.Errorf(ipc.CodeTokenMismatch, "this host holds %q with token %d, not %s", name, l.token, token)
	}
	return l.grant(now), nil
}

// renewNow asks the renew loop for an immediate renewal of l and waits
// for its outcome: the next keepalive of l to complete renewed it, or not.
func (d *Daemon) renewNow(ctx context.Context, l *lease) *ipc.Error {
	d.mu.Lock()
	l.renewAt = 0
	done, before := l.renewWaitLocked(), l.renewals
	d.mu.Unlock()
	d.wake()
	select {
	case <-done:
	case <-ctx.Done():
		return ipc.Errorf(ipc.CodeUnavailable, "renewing %q: %v", l.name, ctx.Err())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if l.renewals == before {
		return ipc.Errorf(ipc.CodeUnavailable, "renewing %q failed: the grantor did not answer in time; the lease is valid until its deadline", l.name)
	}
	return nil
}

// release ends a lease this host holds at a caller's request. It takes
// the turn of the lease's owner for the name, as the owner's acquires do,
// so that it cannot land after a newer grant of the same owner. An
// explicit release frees the name at once: no lock-delay applies (its
// owner is done with it). A release with reason ipc.ReasonRenewFailed (its
// owner gave the lease up because it could not be renewed in time) is
// reported as the loss it is.
//
// It returns the token of the grant it ended: one of a semaphore's slots
// that this host holds more than once, when the caller named no token.
func (d *Daemon) release(ctx context.Context, c *ipc.Conn, name, token, reason string) (uint64, *ipc.Error) {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	d.mu.Lock()
	l, err := d.heldByLocked(c, name, token, d.checkSuspend())
	d.mu.Unlock()
	if err != nil {
		return 0, err
	}
	done, terr := d.turns.take(rctx, l.ownerID, name)
	if terr != nil {
		return 0, ipc.Errorf(ipc.CodeUnavailable, "an earlier request for %q did not finish in time", name)
	}
	defer done()
	d.sendReleases(rctx, l.ownerID, name)
	d.mu.Lock()
	if cur, err := d.heldByLocked(c, name, token, d.checkSuspend()); err != nil || cur != l {
		d.mu.Unlock()
		if err != nil {
			return 0, err
		}
		return 0, ipc.Errorf(ipc.CodeNotHeld, "the grant of %q changed while the release waited; nothing was released", name)
	}
	d.stepLocked(l, evRelease, reason, d.clock.Now())
	if l.conn != nil && l.conn != c {
		// Somebody else ended the owner's lease: it must stop now.
		l.conn.Send(&ipc.Event{Event: ipc.EventLost, Lease: l.name, Token: strconv.FormatUint(l.token, 10), Reason: ipc.ReasonReleasedByAdmin})
		l.conn = nil
	}
	if reason == ipc.ReasonRenewFailed {
		d.metrics.lostOne(reason)
		d.log.Warn("lease lost", "lease", l.name, "token", l.token, "reason", reason, "by", "its owner, as the deadline came near")
		d.emitLocked(l, &ipc.Event{Event: ipc.EventLost, Reason: reason})
	} else {
		d.emitLocked(l, &ipc.Event{Event: ipc.EventReleased, Reason: ipc.ReasonExplicitRelease})
	}
	d.mu.Unlock()

	_, gerr := d.g.release(rctx, l.sess, l.name, l.ownerID, l.token, endReleased)
	d.mu.Lock()
	d.stepLocked(l, evReleaseDone, "", d.clock.Now())
	d.mu.Unlock()
	if gerr != nil {
		// The lease is already out of the table, so nobody here acts on
		// it; the session's keepalives name it until the grantor has
		// ended it (ends.go).
		d.mu.Lock()
		d.endAtGrantorLocked(l.sess, grantKey{l.name, l.token}, false)
		d.mu.Unlock()
		return l.token, grantorError(gerr)
	}
	return l.token, nil
}

// ownerStopped handles an owner process found stopped too long: it cannot
// act on the lease now, but it may be continued and still believe it
// holds the lease until its deadline. So the lease is not released early:
// it lapses (renewals stop) and is lost at its deadline.
func (d *Daemon) ownerStopped(l *lease) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if (l.state != stateHeld && l.state != stateJeopardy) || l.noRenew {
		return
	}
	d.stepLocked(l, evOwnerStopped, ipc.ReasonOwnerStopped, d.clock.Now())
}

// ownerEnded handles the end of l's owner (why is an ipc.Reason
// constant): l ends now, and the grantor is told that its owner ended,
// so that it keeps the name for l's lock-delay.
func (d *Daemon) ownerEnded(l *lease, why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ownerEndedLocked(l, why)
}

// ownerEndedLocked ends l because its owner is gone, if it is still in
// the table (stepLocked tells the grantor). The caller holds d.mu.
func (d *Daemon) ownerEndedLocked(l *lease, why string) {
	if l.state.inTable() {
		d.stepLocked(l, evOwnerEnded, why, d.clock.Now())
	}
}
