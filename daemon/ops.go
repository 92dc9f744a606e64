package daemon

import (
	"context"
	"strconv"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// status lists the held leases. It checks deadlines itself rather than
// trust the renew loop to have run: no reply ever shows a lease past its
// deadline.
func (d *Daemon) status() *ipc.Response {
	now := d.checkSuspend()
	d.mu.Lock()
	grants := make([]ipc.Grant, 0, len(d.leases))
	for _, l := range d.leases {
		if l.pending {
			continue
		}
		if !now.Before(l.deadline) {
			d.loseLocked(l, d.lostReason(l, false))
			continue
		}
		grants = append(grants, *l.grant(now))
	}
	d.mu.Unlock()
	return &ipc.Response{Leases: &grants, Clock: d.clockStatus(false)}
}

// validLocked returns the named lease if it is held and valid now, ending
// it first if its deadline has passed. The caller holds d.mu.
func (d *Daemon) validLocked(name string, now clockwatch.Instant) *lease {
	l := d.leases[name]
	if l != nil && l.pending {
		return nil // not confirmed yet; nobody holds it as far as callers know
	}
	if l != nil && !now.Before(l.deadline) {
		d.loseLocked(l, d.lostReason(l, false))
		return nil
	}
	return l
}

// ownerID names the owner of a grant to the grantor, unique within the
// daemon's session: a connection, a process (pid and start time, so that a
// reused pid is another owner), or, for detached leases, the acquire
// itself: two detached acquires are two owners, and the second is refused.
func (d *Daemon) ownerID(c *ipc.Conn, req *ipc.Request) (string, *ipc.Error) {
	switch req.Owner {
	case ipc.OwnerPID:
		start, uid, err := processIdentity(req.OwnerPID)
		if err != nil {
			return "", ipc.Errorf(ipc.CodeBadRequest, "owner_pid: %v", err)
		}
		if c.Cred.UID != 0 && c.Cred.UID != uid {
			return "", ipc.Errorf(ipc.CodePermissionDenied, "owner_pid %d belongs to uid %d, not to the caller (uid %d)", req.OwnerPID, uid, c.Cred.UID)
		}
		return "pid:" + strconv.Itoa(req.OwnerPID) + ":" + strconv.FormatUint(start, 10), nil
	case ipc.OwnerDetached:
		return "detached:" + strconv.FormatUint(d.detached.Add(1), 10), nil
	}
	return "conn:" + strconv.FormatUint(c.ID, 10), nil
}

func (d *Daemon) acquire(ctx context.Context, c *ipc.Conn, req *ipc.Request) (*ipc.Grant, *ipc.Error) {
	if req.TTLMs < d.cfg.MinTTL.Milliseconds() || req.TTLMs > d.cfg.MaxTTL.Milliseconds() {
		return nil, ipc.TTLError(req.TTLMs, d.cfg.MinTTL, d.cfg.MaxTTL) // the server checked already; this is for other callers
	}
	ttl := req.TTL()
	owner := req.Owner
	if owner == "" {
		owner = ipc.OwnerConnection
	}
	id, ierr := d.ownerID(c, req)
	if ierr != nil {
		return nil, ierr
	}

	now := d.checkSuspend()
	d.mu.Lock()
	if l := d.validLocked(req.Lease, now); l != nil && l.ownerID == id && l.uid == c.Cred.UID && l.releaseAt == never {
		defer d.mu.Unlock()
		if l.ttl != ttl || l.lockDelay != req.LockDelay() || l.noRenew != req.NoRenew {
			return nil, ipc.Errorf(ipc.CodeBadRequest, "this owner holds %q already, with other options (ttl, lock_delay, no_renew); release it first", req.Lease)
		}
		return l.grant(now), nil // this owner holds it already: a no-op
	}
	d.mu.Unlock()

	l := &lease{name: req.Lease, ttl: ttl, owner: owner, ownerID: id, ownerPID: req.OwnerPID, uid: c.Cred.UID,
		conn: c, lockDelay: req.LockDelay(), releaseAt: never, noRenew: req.NoRenew, renewed: make(chan struct{}), stopWatch: func() {}}
	if owner == ipc.OwnerPID {
		stop, err := watchPID(req.OwnerPID, func() { d.ownerEnded(l, ipc.ReasonOwnerExited) })
		if err != nil {
			return nil, ipc.Errorf(ipc.CodeBadRequest, "owner_pid: %v", err)
		}
		l.stopWatch = stop
	}
	fail := func(e *ipc.Error) (*ipc.Grant, *ipc.Error) {
		l.stopWatch()
		return nil, e
	}

	rctx, cancel := context.WithTimeout(ctx, req.Wait()+d.cfg.RequestTimeout)
	defer cancel()
	t0 := d.clock.Now() // rule 1: read before the request is sent
	resp, err := d.g.acquire(rctx, req.Lease, id, ttl, req.Wait(), &d.metrics.acquireRPCs)
	if err != nil {
		return fail(grantorError(err))
	}
	if !resp.Granted {
		d.metrics.refusals.Add(1)
		by := "another owner"
		if resp.HolderName != "" {
			by = "another owner (sidecar " + strconv.Quote(resp.HolderName) + ")"
		}
		e := ipc.Errorf(ipc.CodeLeaseHeld, "lease %q is held by %s with token %d", req.Lease, by, resp.Token)
		e.HolderToken = strconv.FormatUint(resp.Token, 10)
		return fail(e)
	}
	return d.granted(ctx, l, resp, t0)
}

// granted enters the grant of resp, whose request left at t0, as lease l
// and answers the acquire. The term is the one the grantor states it
// stored, and rho and epsilon the larger of the daemon's and the
// grantor's (TEAM.md decision 2). A grant's identity is its token: a
// reply for a name whose listed grant has a higher token was superseded
// at the grantor (tokens only grow), so it is dropped.
func (d *Daemon) granted(ctx context.Context, l *lease, resp *grantorpb.AcquireResponse, t0 clockwatch.Instant) (*ipc.Grant, *ipc.Error) {
	d.metrics.grants.Add(1)
	d.learnTiming(resp.Rho, resp.EpsilonNs)
	if resp.TtlNs > 0 {
		l.ttl = time.Duration(resp.TtlNs)
	}
	l.token = resp.Token
	l.t0 = t0
	l.deadline = d.timing().HolderDeadline(t0, l.ttl) // rule 3
	l.scheduleRenewal(t0)
	// A grant that came after a wait in the queue, or after slow retries,
	// was made at an unknown point after t0: its deadline may be short or
	// already gone. Such a grant is pending: nobody is told it is valid,
	// and it is not expired, until a renewal sent after the grant gives it
	// a deadline of its own (below).
	l.pending = clockwatch.Until(d.clock, l.deadline) < 2*l.ttl/3
	d.mu.Lock()
	switch old := d.leases[l.name]; {
	case old != nil && old.token >= l.token:
		// The same grant (a concurrent acquire's retry got there first),
		// or a later one: this reply's grant is the listed one or over.
		d.mu.Unlock()
		l.stopWatch()
		l = old
	default:
		if old != nil {
			// A new grant while the old one is still listed: the old one
			// is over.
			d.loseLocked(old, ipc.ReasonRevoked)
		}
		d.leases[l.name] = l
		d.emitWatchersLocked(l, &ipc.Event{Event: ipc.EventAcquired})
		d.mu.Unlock()
		d.wake()
	}

	if l.pending {
		if err := d.renewNow(ctx, l); err != nil {
			// Nobody was told of this grant: give it back.
			d.mu.Lock()
			forgot := d.leases[l.name] == l
			if forgot {
				d.forgetLocked(l)
			}
			d.mu.Unlock()
			if forgot {
				d.background(func(ctx context.Context) { d.g.release(ctx, l.name, l.ownerID, l.token) })
			}
			return nil, ipc.Errorf(ipc.CodeUnavailable, "%q was granted, but the grantor did not confirm it in time, so it was given back: %s", l.name, err.Message)
		}
	}
	now := d.checkSuspend()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.validLocked(l.name, now) != l {
		return nil, ipc.Errorf(ipc.CodeLost, "lease %q was lost before the reply could be sent", l.name)
	}
	return l.grant(now), nil
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
	return d.check(name, token)
}

// heldByLocked returns the named lease if it is valid now, has the token
// (unless token is ""), and the caller may act on it: the uid that
// acquired it, or root. The caller holds d.mu.
func (d *Daemon) heldByLocked(c *ipc.Conn, name, token string, now clockwatch.Instant) (*lease, *ipc.Error) {
	l := d.validLocked(name, now)
	if l == nil {
		return nil, ipc.Errorf(ipc.CodeNotHeld, "this host does not hold %q", name)
	}
	if token != "" && token != strconv.FormatUint(l.token, 10) {
		return nil, ipc.Errorf(ipc.CodeTokenMismatch, "this host holds %q with token %d, not %s", name, l.token, token)
	}
	if c.Cred.UID != 0 && c.Cred.UID != l.uid {
		return nil, ipc.Errorf(ipc.CodePermissionDenied, "%q was acquired by uid %d; only it or root may act on it", name, l.uid)
	}
	return l, nil
}

// check returns the grant of a lease this host holds and that is valid
// now, with the given token unless token is "".
func (d *Daemon) check(name, token string) (*ipc.Grant, *ipc.Error) {
	now := d.checkSuspend()
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.validLocked(name, now)
	if l == nil {
		return nil, ipc.Errorf(ipc.CodeNotHeld, "this host does not hold %q", name)
	}
	if token != "" && token != strconv.FormatUint(l.token, 10) {
		return nil, ipc.Errorf(ipc.CodeTokenMismatch, "this host holds %q with token %d, not %s", name, l.token, token)
	}
	return l.grant(now), nil
}

// renewNow asks the renew loop for an immediate renewal of l and waits
// for its outcome.
func (d *Daemon) renewNow(ctx context.Context, l *lease) *ipc.Error {
	d.mu.Lock()
	l.renewAt = 0
	done := l.renewed
	d.mu.Unlock()
	d.wake()
	select {
	case <-done:
	case <-ctx.Done():
		return ipc.Errorf(ipc.CodeUnavailable, "renewing %q: %v", l.name, ctx.Err())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !l.renewOK {
		return ipc.Errorf(ipc.CodeUnavailable, "renewing %q failed: the grantor did not answer in time; the lease is valid until its deadline", l.name)
	}
	return nil
}

func (d *Daemon) release(ctx context.Context, c *ipc.Conn, name, token string) *ipc.Error {
	now := d.checkSuspend()
	d.mu.Lock()
	l, err := d.heldByLocked(c, name, token, now)
	if err != nil {
		d.mu.Unlock()
		return err
	}
	d.forgetLocked(l)
	if l.conn != nil && l.conn != c {
		// Somebody else ended the owner's lease: it must stop now.
		l.conn.Send(&ipc.Event{Event: ipc.EventLost, Lease: l.name, Token: strconv.FormatUint(l.token, 10), Reason: ipc.ReasonReleasedByAdmin})
		l.conn = nil
	}
	d.emitLocked(l, &ipc.Event{Event: ipc.EventReleased, Reason: ipc.ReasonExplicitRelease})
	d.mu.Unlock()

	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	if _, err := d.g.release(rctx, l.name, l.ownerID, l.token); err != nil {
		// The lease is already out of the table, so nobody here acts on
		// it; the grantor frees it when its term runs out.
		return grantorError(err)
	}
	return nil
}

// ownerStopped handles an owner process found stopped too long: it cannot
// act on the lease now, but it may be continued and still believe it
// holds the lease until its deadline. So the lease is not released early:
// renewals stop and it lapses at its deadline.
func (d *Daemon) ownerStopped(l *lease) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.leases[l.name] != l || l.noRenew {
		return
	}
	l.noRenew, l.renewAt = true, never
	d.log.Warn("owner process stopped; the lease is no longer renewed and lapses at its deadline", "lease", l.name, "pid", l.stoppedPID)
	d.emitLocked(l, &ipc.Event{Event: ipc.EventOwnerGone, Reason: ipc.ReasonOwnerStopped})
}

// ownerEnded handles the end of l's owner (why is an ipc.Reason
// constant): release now, or after the lease's lock-delay, during which
// it stays held and renewed.
func (d *Daemon) ownerEnded(l *lease, why string) {
	if l.lockDelay <= 0 {
		d.releaseLease(l, why)
		return
	}
	d.mu.Lock()
	if d.leases[l.name] == l && l.releaseAt == never {
		l.releaseAt = d.clock.Now().Add(l.lockDelay)
		d.log.Info("owner ended; holding the lease for its lock-delay", "lease", l.name, "why", why, "lock_delay", l.lockDelay)
		d.emitLocked(l, &ipc.Event{Event: ipc.EventOwnerGone, Reason: why})
	}
	d.mu.Unlock()
	d.wake()
}

// releaseLease ends l because its owner is gone, and tells the grantor.
func (d *Daemon) releaseLease(l *lease, why string) {
	d.mu.Lock()
	if d.leases[l.name] != l {
		d.mu.Unlock()
		return
	}
	d.forgetLocked(l)
	d.emitLocked(l, &ipc.Event{Event: ipc.EventReleased, Reason: why})
	d.mu.Unlock()
	d.log.Info("releasing lease", "lease", l.name, "token", l.token, "why", why)
	d.background(func(ctx context.Context) {
		if _, err := d.g.release(ctx, l.name, l.ownerID, l.token); err != nil {
			d.log.Warn("release failed; the grantor frees the lease when its term ends", "lease", l.name, "err", err)
		}
	})
}

// forgetLocked takes l out of the table. The caller holds d.mu.
func (d *Daemon) forgetLocked(l *lease) {
	delete(d.leases, l.name)
	l.stopWatch()
}

// loseLocked ends l at once and tells its owner (rule 5). The caller
// holds d.mu.
func (d *Daemon) loseLocked(l *lease, reason string) {
	if d.leases[l.name] != l {
		return
	}
	d.forgetLocked(l)
	d.metrics.lostOne(reason)
	d.log.Warn("lease lost", "lease", l.name, "token", l.token, "reason", reason)
	d.emitLocked(l, &ipc.Event{Event: ipc.EventLost, Reason: reason})
	l.signalRenewed(false)
	// Best effort: the lease is over for us, so freeing it at the grantor
	// is safe and lets the next owner in sooner.
	d.background(func(ctx context.Context) { d.g.release(ctx, l.name, l.ownerID, l.token) })
}
