package daemon

import (
	"context"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// batch is a keepalive in flight: the grantor sessions it renews, each
// with the leases it held when the keepalive was sent.
type batch struct {
	id       uint64
	t0       clockwatch.Instant // read before the keepalive was handed on
	timeout  clockwatch.Instant
	sessions []*sessionBatch
}

// sessionBatch is one session of a batch.
type sessionBatch struct {
	s      *gsession
	leases []*lease
	// digest is of the leases' tokens: what the grantor compares.
	digest uint64
	// soonest is the soonest deadline of its leases settled (not
	// pending), 0 when none: it bounds a retry's backoff (retry.go).
	soonest clockwatch.Instant
	// untold and ownerEnded are the grants the keepalive names to end
	// (ends.go).
	untold, ownerEnded []grantKey
}

// renewLoop is rule 4 and 5 of the timing model, on a goroutine of its own
// that no request handler can hold up. A keepalive renews whole grantor
// sessions (issue 13): each session is renewed every d/3 of its term, at
// the instant its oldest renewal (or grant) t0 + d/3 comes, and every lease
// in it gets the deadline t0 + d(1-rho) - eps from the t0 of that
// keepalive. One message carries every session due, so a message costs the
// same for 1 lease or 10,000; each session is in one keepalive in flight
// at most, beside those of other sessions (inflight.go). Failed keepalives
// are retried with jittered backoff, and a lease is lost the moment its
// deadline passes.
func (d *Daemon) renewLoop(ctx context.Context) {
	out := make(chan *grantorpb.KeepAliveRequest, 16)
	reset := make(chan struct{}, 1)
	in := make(chan kaResult, 16)
	go d.g.keepAliveSender(ctx, out, reset, in)

	timer := d.clock.NewTimer(time.Hour)
	defer timer.Stop()
	f := newKAFlight()
	var (
		ownerCheckAt clockwatch.Instant
		leader       string // where the last keepalive reply came from
	)
	kaLog := &rateLog{log: d.log, every: warnEvery} // no grantor in reach: ~1.5 failures a second
	heldLog := &rateLog{log: d.log, every: warnEvery}
	fail := func(b *batch, now clockwatch.Instant) {
		d.metrics.keepalivesFailed.Add(1)
		d.finishBatch(b)
		f.failed(b, now)
	}
	// failAll fails every batch in flight: the stream they went on is
	// gone, and their replies with it.
	failAll := func(now clockwatch.Instant) {
		for _, b := range f.all() {
			fail(b, now)
		}
	}
	for {
		now := d.checkSuspend()
		if b := f.overdue(now); b != nil {
			kaLog.warn(now, "keepalive unanswered; trying another grantor", "batch", b.id)
			select {
			case reset <- struct{}{}:
			default:
			}
			failAll(now)
		}
		// Deadlines next: after a suspend or a stall, whatever passed is
		// lost before anything is renewed. A keepalive still unanswered
		// at the deadline is a failed renewal too.
		d.expire(now, f.failing)
		if !now.Before(ownerCheckAt) {
			d.checkStoppedOwners(now)
			ownerCheckAt = now.Add(ownerCheckInterval)
		}
		if due := d.dueSessions(now, func(s *gsession) bool { return f.ready(s, now) }); len(due) > 0 {
			t0 := d.clock.Now() // rule 1, for renewals
			b := &batch{t0: t0, timeout: t0.Add(batchTimeout(d.cfg.RenewTimeout, due)), sessions: due}
			f.start(b)
			select {
			case out <- keepAliveRequest(b.id, due):
				d.renewalSent(t0) // it stands for the leader probe (leader.go)
			default:
				fail(b, now) // the sender is stuck on earlier batches
			}
		}

		timer.Reset(min(d.nextWake(now, f), ownerCheckAt).Sub(now))
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		case <-d.kick:
		case ev := <-d.watcher.Events():
			d.clockEvent(ev)
		case r := <-in:
			now := d.clock.Now()
			if r.resp != nil && r.addr != leader {
				d.watcher.ResetDrift() // every grantor has its own BOOTTIME
				leader = r.addr
			}
			if r.err != nil {
				if len(f.batches) > 0 {
					kaLog.warn(now, "keepalive failed", "batches", len(f.batches), "err", r.err)
					failAll(now)
				}
				continue
			}
			switch b := f.batches[r.resp.Batch]; {
			case b == nil:
				// The reply to a batch that failed already.
			case len(r.resp.Sessions) != len(b.sessions):
				d.log.Error("the grantor did not renew sessions: it is older than this sidecar (upgrade every grantor before the sidecars)", "grantor", r.addr)
				fail(b, now)
			default:
				d.watcher.ObserveKeepAlive(clockwatch.Sample{Sent: b.t0, Received: now, Remote: clockwatch.Instant(r.resp.GrantorTimeNs)})
				withheld := d.applyRenewal(b, r.resp)
				d.metrics.keepalivesOK.Add(1)
				kaLog.ok(now, "keepalives answered again")
				if len(withheld) > 0 {
					heldLog.warn(now, "the grantor withheld the list of grants of sessions whose digest differs: this sidecar's queued_bytes at the grantors is at its limit; their leases keep the deadlines they had, and are renewed again after a pause",
						"sessions", len(withheld))
				} else {
					heldLog.ok(now, "the grantor lists sessions again")
				}
				f.answered(b, withheld, now)
			}
		}
	}
}

// dueSessions returns the grantor sessions to renew now: those with a
// lease whose renewal is due (renewAt passed: d/3 after the t0 of its
// last renewal or grant, or at once when asked for), and those with
// grants to end at the grantor that are due (ends.go), each with every
// lease it holds and the grants it names; only those ready says may go
// (not in flight, not backing off; nil: all).
func (d *Daemon) dueSessions(now clockwatch.Instant, ready func(*gsession) bool) []*sessionBatch {
	d.mu.Lock()
	defer d.mu.Unlock()
	due := map[*gsession]bool{}
	count := map[*gsession]int{} // leases a session: its batch's size
	for _, l := range d.leases {
		count[l.sess]++
		if l.renewAt != never && !now.Before(l.renewAt) {
			due[l.sess] = true
		}
	}
	d.endsDueLocked(now, due)
	if ready != nil {
		for s := range due {
			if !ready(s) {
				delete(due, s)
			}
		}
	}
	if len(due) == 0 {
		return nil
	}
	bySession := map[*gsession]*sessionBatch{}
	var out []*sessionBatch
	batchOf := func(s *gsession) *sessionBatch {
		sb := bySession[s]
		if sb == nil {
			// At its size: grown by appends, a batch of 10,000 leases
			// allocated 310 KB every round, not 80 (issue 25 item 6).
			sb = &sessionBatch{s: s, leases: make([]*lease, 0, count[s])}
			bySession[s] = sb
			out = append(out, sb)
		}
		return sb
	}
	for _, l := range d.leases {
		if !due[l.sess] {
			continue
		}
		sb := batchOf(l.sess)
		sb.leases = append(sb.leases, l)
		sb.digest += grantorpb.TokenDigest(l.token)
		if l.state != statePending && (sb.soonest == 0 || l.deadline < sb.soonest) {
			sb.soonest = l.deadline
		}
	}
	for s := range due {
		d.endsOfLocked(batchOf(s), now) // also a session in which the daemon knows no lease
	}
	return out
}

// keepAliveRequest is the keepalive of a batch for the wire: each session
// with its term and the digest of the grants the daemon knows in it.
func keepAliveRequest(id uint64, ss []*sessionBatch) *grantorpb.KeepAliveRequest {
	req := &grantorpb.KeepAliveRequest{Batch: id, Sessions: make([]*grantorpb.SessionRenewal, len(ss))}
	for i, sb := range ss {
		req.Sessions[i] = &grantorpb.SessionRenewal{Session: sb.s.id, TtlNs: int64(sb.s.ttl), LeaseSetVersion: sb.digest,
			Untold: endRefs(sb.untold), OwnerEnded: endRefs(sb.ownerEnded)}
	}
	return req
}

// applyRenewal takes in the reply to batch b, session by session, and
// returns the sessions the grantor withheld the listing of: each is as
// good as not answered (finishSessionLocked), and is sent again after a
// pause, as after a failed keepalive.
func (d *Daemon) applyRenewal(b *batch, resp *grantorpb.KeepAliveResponse) (withheld []*sessionBatch) {
	d.learnTiming(resp.Rho, resp.EpsilonNs)
	now := d.clock.Now()
	timing := d.timing()
	d.mu.Lock()
	for i, sb := range b.sessions {
		if r := resp.Sessions[i]; r.Withheld || (r.Renewed && !r.Listed && r.LeaseSetVersion != sb.digest) {
			// Not renewed, whatever else it says (review K2): the
			// grantor's grants of the session differ from those the
			// daemon knows and it did not say which still stand, so no
			// deadline of it moves, and nothing of it ends; its named
			// grants stay named.
			d.finishSessionLocked(sb)
			withheld = append(withheld, sb)
			continue
		}
		d.applySessionLocked(b, sb, resp.Sessions[i], timing, now)
	}
	d.mu.Unlock()
	d.persistLater() // the new deadlines
	return withheld
}

// applySessionLocked applies one session's reply. When the grantor
// renewed the session, every lease the daemon knew in it when the
// keepalive left gets the deadline t0 + d(1-rho) - eps (rule 3; the token
// is unchanged, rule 6), d the smaller of its own term and the one the
// grantor applied; unless the grantor's list shows that it no longer holds
// that grant, which ends it. Grants the list shows and the daemon does not
// know are left alone: each is one an acquire in flight or settling may
// still answer, or one the daemon names to end (ends.go); but for a
// previous process's, ended a term after the restart (orphans.go). A session not
// renewed has ended at the grantor: its leases are lost. The caller holds
// d.mu.
func (d *Daemon) applySessionLocked(b *batch, sb *sessionBatch, r *grantorpb.SessionRenewed, timing clockwatch.Timing, now clockwatch.Instant) {
	// Listed grants by lease and token: a session may hold several
	// grants of one semaphore (semaphore.go).
	var listed map[grantKey]*grantorpb.LeaseRef
	if r.Listed {
		listed = make(map[grantKey]*grantorpb.LeaseRef, len(r.Leases))
		for _, ref := range r.Leases {
			listed[grantKey{ref.Lease, ref.Token}] = ref
		}
	}
	if r.Refused {
		d.sessionRefusedLocked(sb.s)
	}
	applied := time.Duration(r.TtlNs)
	timing = d.atLeastFloorLocked(timing) // risen since it was read? (rho.go)
	for _, l := range sb.leases {
		if d.leases[l.tableKey()] != l {
			continue // released or lost meanwhile
		}
		if l.state != statePending && !now.Before(l.deadline) {
			// Its deadline passed while the reply was on its way (or the
			// host slept): it was lost then, and stays lost.
			d.stepLocked(l, evExpired, d.lostReason(l, true), now)
			continue
		}
		if !r.Renewed {
			d.stepLocked(l, evRevoked, ipc.ReasonRevoked, now)
			continue
		}
		if listed != nil {
			if listed[grantKey{l.name, l.token}] == nil {
				d.stepLocked(l, evRevoked, ipc.ReasonRevoked, now) // the grantor no longer holds this grant
				continue
			}
		}
		explicit := l.renewAt == 0
		if (l.noRenew || l.state == stateLapsing) && !explicit {
			continue // renewed only on request: it lapses at its deadline
		}
		if l.state != statePending {
			d.metrics.renewed(l.deadline.Sub(now), l.ttl)
		}
		term := l.ttl
		if applied > 0 {
			term = min(term, applied) // the term the grantor applied
		}
		if dl := timing.HolderDeadline(b.t0, term); dl.After(l.deadline) {
			l.t0, l.deadline = b.t0, dl
		}
		l.renewals++
		l.renewLatency = now.Sub(b.t0)
		l.scheduleRenewal(b.t0)
		if d.listenedLocked(l) {
			d.emitLocked(l, &ipc.Event{Event: ipc.EventRenewed, DeadlineBoottimeNs: l.deadline.Nanoseconds(), ValidMs: l.deadline.Sub(now).Milliseconds()})
		}
		d.stepLocked(l, evRenewed, "", now) // pending or jeopardy: held
		if !l.follower() {
			d.logPutLocked(l) // renewed on request: a deadline of its own
		}
		l.signalRenewed()
	}
	d.endsAnsweredLocked(sb, r.Renewed, listed, now)
	if r.Renewed && r.Listed {
		d.endOrphansLocked(sb.s, r.Leases, now) // orphans.go
	}
}

// sessionRefusedLocked takes in a grantor's refusal of session s as
// another identity's (this host's certificate was renamed since it opened
// the session, or another sidecar opened its id first; review finding
// K3): nothing of s can be renewed or ended by this sidecar any more. The
// reply's renewed is false, so its leases are lost (revoked) as they are
// for a session that ended; nothing of it is released or named to end
// (the grantors would refuse that too, and end its grants at their own
// expiry); the term's next acquire opens a new session. Logged once per
// session: the other sessions renew on. The caller holds d.mu.
func (d *Daemon) sessionRefusedLocked(s *gsession) {
	s.refused = true
	delete(d.ends, s)
	if d.g.dropSession(s) {
		d.log.Error("grantor refused this sidecar's session as another identity's (was this host's certificate renamed?): its leases are lost, and the term's next acquire opens a new session",
			"session", s.id, "ttl", s.ttl)
	}
}

// finishBatch wakes whoever waits on the renewal of a failed batch.
func (d *Daemon) finishBatch(b *batch) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, sb := range b.sessions {
		d.finishSessionLocked(sb)
	}
}

// finishSessionLocked wakes whoever waits on the renewal of sb's leases
// when it failed. The caller holds d.mu.
func (d *Daemon) finishSessionLocked(sb *sessionBatch) {
	for _, l := range sb.leases {
		if d.leases[l.tableKey()] == l {
			if l.noRenew || l.state == stateLapsing {
				l.renewAt = never // a failed renew request is not retried on its own
			}
			l.signalRenewed()
		}
	}
}

// expire ends every lease whose deadline has passed (rule 5); failing
// says whether a session's renewal is failing (the reason the loss names).
func (d *Daemon) expire(now clockwatch.Instant, failing func(*gsession) bool) {
	d.mu.Lock()
	for _, l := range d.leases {
		switch {
		case l.state == statePending:
			// Settled by its first renewal (acquire waits for it).
		case !now.Before(l.deadline):
			d.stepLocked(l, evExpired, d.lostReason(l, failing(l.sess)), now)
		default:
			d.checkJeopardyLocked(l, now) // jeopardy.go
		}
	}
	d.mu.Unlock()
}

// nextWake is the earliest instant the loop has something to do: a
// deadline, a session's renewal coming due (not while it is in flight,
// not before its backoff ends), or a keepalive timing out. f is nil when
// nothing is in flight or backing off.
func (d *Daemon) nextWake(now clockwatch.Instant, f *kaFlight) clockwatch.Instant {
	notBefore := func(*gsession) clockwatch.Instant { return 0 }
	next := now.Add(time.Hour)
	if f != nil {
		notBefore = f.notBefore
		next = min(next, f.wake())
	}
	d.mu.Lock()
	for _, l := range d.leases {
		if l.state != statePending {
			next = min(next, l.deadline, l.jeopardyAt())
		}
		next = min(next, max(l.renewAt, notBefore(l.sess)))
	}
	for s, e := range d.ends {
		next = min(next, max(d.endsAtLocked(e), notBefore(s)))
	}
	d.mu.Unlock()
	return max(next, now)
}

// ownerCheckInterval is how often owner processes are checked for being
// stopped.
const ownerCheckInterval = time.Second

// batchTimeout is how long a keepalive of ss may take: limit, and no
// more than a quarter of the shortest term of a session with a lease in
// it; a session in the batch only to be asked after does not shorten the
// renewal of live leases. A batch of such sessions alone takes a quarter of their shortest term,
// so that a lost reply is retried before the grantor's expiry.
func batchTimeout(limit time.Duration, ss []*sessionBatch) time.Duration {
	live, all, hasLive := limit, limit, false
	for _, sb := range ss {
		if len(sb.leases) > 0 {
			live, hasLive = min(live, sb.s.ttl/4), true
		}
		all = min(all, sb.s.ttl/4)
	}
	if hasLive {
		return live
	}
	return all
}

func backoff(failures int) time.Duration {
	d := 50 * time.Millisecond << min(failures, 5)
	return min(d, time.Second)
}
