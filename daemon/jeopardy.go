package daemon

import (
	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// Jeopardy (issue 12; Chubby's jeopardy, Curator's SUSPENDED): the middle
// state between held and lost, timed. A lease is renewed every d/3 of its
// term (rule 4); when no renewal has succeeded for a third of the term
// after the one that was due, that is 2d/3 after the t0 of its last grant
// or renewal, its owner and watchers get a jeopardy event with the
// validity left (valid_ms: about d/3 - d*rho - eps). The lease is still
// held; it is a warning that the deadline may come without a renewal, so
// that a holder can finish or pause what must not be cut off. A renewal
// that succeeds again brings a safe event with the new deadline; a lease
// whose deadline passes is lost as before (rule 5), jeopardy or not.
// Leases the daemon does not renew (no_renew, an owner stopped too long)
// are never in jeopardy.

// jeopardyAt is when l enters jeopardy if no renewal succeeds before:
// 2d/3 after the t0 of its last grant or renewal, or, when the deadline
// comes earlier than that or close after it (d*rho + eps above d/6: a
// short term, a large epsilon stated by a grantor, a drift that raised
// rho and shortened the deadline), two thirds of the way from the renewal
// due at t0 + d/3 to the deadline, leaving the owner a third of that
// window; never later than halfway from t0 to the deadline: jeopardy
// always comes before lost (review 9/12/13 S6).
// It reads l.deadline, so a shortened deadline moves it too. never for a
// lease that is not held (not confirmed yet, in jeopardy already, no
// longer renewed), or that the daemon does not renew (no_renew).
func (l *lease) jeopardyAt() clockwatch.Instant {
	if l.state != stateHeld || l.noRenew {
		return never
	}
	due := l.t0.Add(l.ttl / 3)
	at := min(l.t0.Add(2*l.ttl/3), due.Add(2*l.deadline.Sub(due)/3))
	if !at.Before(l.deadline) {
		at = l.t0.Add(l.deadline.Sub(l.t0) / 2)
	}
	return at
}

// checkJeopardyLocked puts l in jeopardy when its time has come (and its
// deadline has not). The caller holds d.mu.
func (d *Daemon) checkJeopardyLocked(l *lease, now clockwatch.Instant) {
	if now.Before(l.jeopardyAt()) || !now.Before(l.deadline) {
		return
	}
	d.stepLocked(l, evJeopardy, "", now)
}

// jeopardyLocked is entering jeopardy: the owner and watchers are told,
// with the validity left. The caller holds d.mu.
func (d *Daemon) jeopardyLocked(l *lease, now clockwatch.Instant) {
	d.metrics.jeopardies.Add(1)
	d.log.Warn("lease in jeopardy: renewals have failed for a third of its term", "lease", l.name, "token", l.token,
		"valid", l.deadline.Sub(now))
	d.emitLocked(l, &ipc.Event{Event: ipc.EventJeopardy, DeadlineBoottimeNs: l.deadline.Nanoseconds(), ValidMs: l.deadline.Sub(now).Milliseconds()})
}

// safeLocked is leaving jeopardy after a renewal succeeded: the owner and
// watchers are told the new deadline. The caller holds d.mu.
func (d *Daemon) safeLocked(l *lease, now clockwatch.Instant) {
	d.log.Info("lease safe again: a renewal succeeded", "lease", l.name, "token", l.token)
	d.emitLocked(l, &ipc.Event{Event: ipc.EventSafe, DeadlineBoottimeNs: l.deadline.Nanoseconds(), ValidMs: l.deadline.Sub(now).Milliseconds()})
}
