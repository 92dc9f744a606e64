package daemon

import (
	"context"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// batch is a keepalive in flight.
type batch struct {
	id      uint64
	t0      clockwatch.Instant // read before the keepalive was handed on
	timeout clockwatch.Instant
	leases  []*lease
}

// renewLoop is rule 4 and 5 of the timing model, on a goroutine of its own
// that no request handler can hold up: it sends one keepalive per tick for
// every lease that is due, sets deadlines from the t0 of the batch that
// renewed them, retries failed keepalives with jittered backoff, and
// declares a lease lost the moment its deadline passes.
func (d *Daemon) renewLoop(ctx context.Context) {
	out := make(chan *grantorpb.KeepAliveRequest, 1)
	reset := make(chan struct{}, 1)
	in := make(chan kaResult, 16)
	go d.g.keepAliveSender(ctx, out, reset, in)

	timer := d.clock.NewTimer(time.Hour)
	defer timer.Stop()
	var (
		inflight     *batch
		nextID       uint64
		failures     int
		retryAt      clockwatch.Instant
		ownerCheckAt clockwatch.Instant
		leader       string // where the last keepalive reply came from
	)
	fail := func(now clockwatch.Instant) {
		d.metrics.keepalivesFailed.Add(1)
		d.finishBatch(inflight)
		inflight = nil
		failures++
		retryAt = now.Add(jitter(backoff(failures)))
	}
	for {
		now := d.checkSuspend()
		if inflight != nil && !now.Before(inflight.timeout) {
			d.log.Warn("keepalive unanswered; trying another grantor", "batch", inflight.id)
			fail(now)
			select {
			case reset <- struct{}{}:
			default:
			}
		}
		// Deadlines next: after a suspend or a stall, whatever passed is
		// lost before anything is renewed. A keepalive still unanswered
		// at the deadline is a failed renewal too.
		d.expire(now, failures > 0 || inflight != nil)
		if !now.Before(ownerCheckAt) {
			d.checkStoppedOwners(now)
			ownerCheckAt = now.Add(ownerCheckInterval)
		}
		if inflight == nil && !now.Before(retryAt) {
			if due := d.due(now); len(due) > 0 {
				nextID++
				t0 := d.clock.Now() // rule 1, for renewals
				inflight = &batch{id: nextID, t0: t0, timeout: t0.Add(batchTimeout(d.cfg.RenewTimeout, due)), leases: due}
				select {
				case out <- &grantorpb.KeepAliveRequest{Batch: nextID, Leases: keepAliveRefs(due)}:
				default:
					fail(now) // the sender is stuck on an earlier batch
				}
			}
		}

		timer.Reset(min(d.nextWake(now, inflight, retryAt), ownerCheckAt).Sub(now))
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
			switch {
			case r.err != nil:
				if inflight != nil {
					d.log.Warn("keepalive failed", "batch", inflight.id, "err", r.err)
					fail(now)
				}
			case inflight != nil && r.resp.Batch == inflight.id:
				d.watcher.ObserveKeepAlive(clockwatch.Sample{Sent: inflight.t0, Received: now, Remote: clockwatch.Instant(r.resp.GrantorTimeNs)})
				d.applyRenewal(inflight, r.resp)
				d.metrics.keepalivesOK.Add(1)
				inflight = nil
				failures = 0
				retryAt = 0
			}
		}
	}
}

// due returns the leases whose renewal is due now, together with those
// due within half an interval, so that leases share keepalives.
func (d *Daemon) due(now clockwatch.Instant) []*lease {
	d.mu.Lock()
	defer d.mu.Unlock()
	var due []*lease
	for _, l := range d.leases {
		if l.renewAt != never && l.renewAt.Sub(now) <= renewInterval(l.ttl)/2 {
			due = append(due, l)
		}
	}
	return due
}

// applyRenewal sets the deadline of every lease the grantor renewed to
// t0 + d(1-rho) - eps (rule 3; the token is unchanged, rule 6) and ends
// those it reports lost.
func (d *Daemon) applyRenewal(b *batch, resp *grantorpb.KeepAliveResponse) {
	renewed := map[string]*grantorpb.LeaseRef{}
	for _, r := range resp.Renewed {
		renewed[r.Lease] = r
	}
	d.learnTiming(resp.Rho, resp.EpsilonNs)
	now := d.clock.Now()
	timing := d.timing()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range b.leases {
		if d.leases[l.name] != l {
			continue // released or lost meanwhile
		}
		if !l.pending && !now.Before(l.deadline) {
			// Its deadline passed while the reply was on its way (or the
			// host slept): it was lost then, and stays lost.
			d.loseLocked(l, d.lostReason(l, true))
			continue
		}
		if r, ok := renewed[l.name]; ok && r.Token == l.token {
			if !l.pending {
				d.metrics.renewed(l.deadline.Sub(now), l.ttl)
			}
			if r.TtlNs > 0 {
				l.ttl = time.Duration(r.TtlNs) // the term the grantor applied
			}
			if dl := timing.HolderDeadline(b.t0, l.ttl); dl.After(l.deadline) {
				l.t0, l.deadline = b.t0, dl
			}
			l.pending = false
			l.renewals++
			l.renewLatency = now.Sub(b.t0)
			l.scheduleRenewal(b.t0)
			d.emitLocked(l, &ipc.Event{Event: ipc.EventRenewed, DeadlineBoottimeNs: l.deadline.Nanoseconds(), ValidMs: l.deadline.Sub(now).Milliseconds()})
			l.signalRenewed(true)
			continue
		}
		d.loseLocked(l, ipc.ReasonRevoked)
	}
}

// finishBatch wakes whoever waits on the renewal of a failed batch.
func (d *Daemon) finishBatch(b *batch) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range b.leases {
		if d.leases[l.name] == l {
			if l.noRenew {
				l.renewAt = never // a failed renew request is not retried on its own
			}
			l.signalRenewed(false)
		}
	}
}

// expire ends every lease whose deadline has passed (rule 5), and
// releases those whose owner ended and whose lock-delay is over.
func (d *Daemon) expire(now clockwatch.Instant, failing bool) {
	var release []*lease
	d.mu.Lock()
	for _, l := range d.leases {
		switch {
		case l.pending:
			// Settled by its first renewal (acquire waits for it).
		case !now.Before(l.deadline):
			d.loseLocked(l, d.lostReason(l, failing))
		case !now.Before(l.releaseAt):
			release = append(release, l)
		}
	}
	d.mu.Unlock()
	for _, l := range release {
		d.releaseLease(l, ipc.ReasonLockDelayOver)
	}
}

// nextWake is the earliest instant the loop has something to do: a
// deadline, a renewal coming due (not before a backoff ends), or a
// keepalive timing out.
func (d *Daemon) nextWake(now clockwatch.Instant, inflight *batch, retryAt clockwatch.Instant) clockwatch.Instant {
	deadline, renew := now.Add(time.Hour), now.Add(time.Hour)
	d.mu.Lock()
	for _, l := range d.leases {
		if !l.pending {
			deadline = min(deadline, l.deadline, l.releaseAt)
		}
		if l.renewAt != never {
			renew = min(renew, l.renewAt.Add(-renewInterval(l.ttl)/2))
		}
	}
	d.mu.Unlock()
	next := deadline
	if inflight != nil {
		next = min(next, inflight.timeout)
	} else {
		next = min(next, max(renew, retryAt))
	}
	return max(next, now)
}

// ownerCheckInterval is how often owner processes are checked for being
// stopped.
const ownerCheckInterval = time.Second

func batchTimeout(limit time.Duration, ls []*lease) time.Duration {
	for _, l := range ls {
		limit = min(limit, l.ttl/4)
	}
	return limit
}

func backoff(failures int) time.Duration {
	d := 50 * time.Millisecond << min(failures, 5)
	return min(d, time.Second)
}

// keepAliveRefs lists the leases of a batch for the wire.
func keepAliveRefs(ls []*lease) []*grantorpb.LeaseRef {
	refs := make([]*grantorpb.LeaseRef, len(ls))
	for i, l := range ls {
		refs[i] = &grantorpb.LeaseRef{Lease: l.name, Token: l.token, TtlNs: int64(l.ttl)}
	}
	return refs
}
