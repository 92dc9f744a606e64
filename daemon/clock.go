package daemon

import (
	"context"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// checkSuspend reads the daemon's own suspend detector, so that a request
// answered right after a resume, before the watcher's next tick, still
// knows that the host slept. It returns the current BOOTTIME.
func (d *Daemon) checkSuspend() clockwatch.Instant {
	now := d.clock.Now()
	if s := d.susp.Check(); s > 0 {
		d.suspendedAt.Store(int64(now))
		d.log.Warn("host was suspended", "length", s)
	}
	return now
}

// lostReason says why l, whose deadline passed, is lost.
func (d *Daemon) lostReason(l *lease, failing bool) string {
	switch {
	case clockwatch.Instant(d.suspendedAt.Load()).After(l.t0):
		return ipc.ReasonSuspended
	case l.noRenew || l.state == stateLapsing:
		return ipc.ReasonExpired // nobody renewed it: it lapsed, as asked (or its owner was stopped)
	case failing:
		return ipc.ReasonRenewFailed
	}
	return ipc.ReasonDeadlinePassed
}

// clockEvent reacts to what the watcher noticed: a suspend ends the
// leases it carried past their deadline (the renew loop's next pass does
// that, before it renews anything); every event goes to the socket.
func (d *Daemon) clockEvent(ev clockwatch.Event) {
	if ev.Kind == clockwatch.EventSuspend {
		d.suspendedAt.Store(int64(ev.At))
	}
	d.log.Warn("clock event", "kind", ev.Kind, "length", ev.Length, "rate_ppm", ev.RatePPM)
	out := &ipc.Event{Event: string(ev.Kind), LengthMs: ev.Length.Milliseconds(), RatePPM: ev.RatePPM}
	d.mu.Lock()
	defer d.mu.Unlock()
	sent := map[*ipc.Conn]bool{}
	for c := range d.watchers {
		c.Send(out)
		sent[c] = true
	}
	for _, l := range d.leases {
		if l.conn != nil && !sent[l.conn] {
			l.conn.Send(out)
			sent[l.conn] = true
		}
	}
}

// checkStoppedOwners finds owner processes stopped (SIGSTOP, a debugger,
// a frozen cgroup) for longer than OwnerStoppedLimit: such an owner cannot
// act on its lease, so the lease is no longer renewed and lapses at its
// deadline (ownerStopped). /proc is read outside the table's lock.
func (d *Daemon) checkStoppedOwners(now clockwatch.Instant) {
	if d.cfg.OwnerStoppedLimit <= 0 {
		return
	}
	type owned struct {
		l   *lease
		pid int
	}
	var check []owned
	d.mu.Lock()
	for _, l := range d.leases {
		pid := l.ownerPID
		if l.owner == ownerConnection && l.conn != nil {
			pid = l.conn.Cred.PID
		}
		if pid > 0 && !l.noRenew && (l.state == stateHeld || l.state == stateJeopardy) {
			check = append(check, owned{l, pid})
		}
	}
	d.mu.Unlock()
	stoppedPIDs := map[int]bool{}
	for _, o := range check {
		if _, seen := stoppedPIDs[o.pid]; !seen {
			stopped, err := clockwatch.ProcessStopped(o.pid)
			stoppedPIDs[o.pid] = err == nil && stopped
		}
	}
	var over []*lease
	d.mu.Lock()
	for _, o := range check {
		l := o.l
		switch {
		case !stoppedPIDs[o.pid]:
			l.stoppedSince = 0
		case l.stoppedSince == 0:
			l.stoppedSince, l.stoppedPID = now, int32(o.pid)
		case now.Sub(l.stoppedSince) >= d.cfg.OwnerStoppedLimit:
			over = append(over, l)
		}
	}
	d.mu.Unlock()
	for _, l := range over {
		d.ownerStopped(l)
	}
}

// clockStatus renders the watcher's view for the socket.
func (d *Daemon) clockStatus(histogram bool) *ipc.ClockStatus {
	cs := new(ipc.ClockStatus)
	d.fillClockStatus(cs, histogram)
	return cs
}

// fillClockStatus sets cs to what clockStatus returns.
func (d *Daemon) fillClockStatus(cs *ipc.ClockStatus, histogram bool) {
	var v clockwatch.View
	if histogram {
		v = d.watcher.View()
	} else {
		v = d.watcher.Brief()
	}
	*cs = ipc.ClockStatus{
		KernelSynced:         v.Kernel.Synced,
		KernelFreqPPM:        v.Kernel.FreqPPM,
		KernelMaxErrorMs:     v.Kernel.MaxError.Milliseconds(),
		DriftSamples:         v.Drift.Samples,
		RhoPPM:               v.Rho * 1e6,
		EffectiveRhoPPM:      d.timing().Rho * 1e6,
		LongestRecentPauseMs: v.LongestRecentPause.Milliseconds(),
		PauseWindowMs:        v.PauseWindow.Milliseconds(),
		Pauses:               v.Pauses,
		Suspends:             v.Suspend.Count,
		SuspendedMs:          v.Suspend.Total.Milliseconds(),
	}
	if v.DriftKnown {
		ppm := v.Drift.PPM
		cs.DriftPPM = &ppm
	}
	if histogram {
		h := v.PauseHistogram
		for i, n := range h.Counts {
			le := -1.0
			if i < len(h.Bounds) {
				le = float64(h.Bounds[i]) / float64(time.Millisecond)
			}
			cs.PauseHistogram = append(cs.PauseHistogram, ipc.Bucket{LeMs: le, Count: n})
		}
	}
}

// runWatcher runs the clock watcher for the daemon's lifetime.
func (d *Daemon) runWatcher(ctx context.Context) {
	if err := d.watcher.Run(ctx); err != nil {
		d.log.Error("clock watcher stopped", "err", err)
	}
}
