package cli

import (
	"fmt"
	"io"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// runWatchdog is run's watchdog over its command. Every instant is on
// CLOCK_BOOTTIME: the stop is due margin before the lease's deadline
// (SIGTERM), and SIGKILL follows grace later, still before the deadline.
// Timers only wake it; the clock decides. A watchdog that wakes past the
// kill time (run itself was stalled or stopped) kills at once and only
// then says how late it was.
type runWatchdog struct {
	name, token   string
	group         int // the command's process group
	margin, grace time.Duration
	clock         clockwatch.Clock
	stderr        io.Writer
	// deadline follows the renewals (and shortenings) of the grant.
	deadline clockwatch.Instant
}

// termAt is when the command is to be stopped if no renewal came;
// killAt is when it must be gone.
func (w *runWatchdog) termAt() clockwatch.Instant { return w.deadline.Add(-w.margin) }
func (w *runWatchdog) killAt() clockwatch.Instant { return w.termAt().Add(w.grace) }

// follow applies a lease event to the deadline, and reports whether it
// moved.
func (w *runWatchdog) follow(ev *ipc.Event) bool {
	if ev.Lease != w.name || ev.Token != w.token {
		return false
	}
	dl := clockwatch.Instant(ev.DeadlineBoottimeNs)
	switch ev.Event {
	case ipc.EventRenewed:
		if dl.After(w.deadline) {
			w.deadline = dl
			return true
		}
	case ipc.EventShortened:
		if dl.Before(w.deadline) {
			w.deadline = dl
			return true
		}
	}
	return false
}

// stop ends the command's group because of why, noticed at woke, and
// waits for it to exit (exited). Before killAt it sends SIGTERM and
// SIGKILL at killAt (or grace from now, if sooner); at or past killAt it
// sends SIGKILL first. It reports on stderr, with how late it acted when
// it woke past the stop time.
func (w *runWatchdog) stop(why string, woke clockwatch.Instant, exited <-chan error) {
	late := woke.Sub(w.termAt())
	switch {
	case !woke.Before(w.killAt()):
		syscall.Kill(w.group, syscall.SIGKILL)
		fmt.Fprintf(w.stderr, "leaseside: lease %s (token %s): %s; run woke %v after the command's stop time (%s the deadline) and killed it at once\n",
			w.name, w.token, why, late.Round(time.Millisecond), relative(w.deadline.Sub(woke)))
	default:
		fmt.Fprintf(w.stderr, "leaseside: lease %s (token %s): %s; stopping the command\n", w.name, w.token, why)
		syscall.Kill(w.group, syscall.SIGTERM)
		wait := min(w.grace, clockwatch.Until(w.clock, w.killAt()))
		killer := time.AfterFunc(wait, func() { syscall.Kill(w.group, syscall.SIGKILL) })
		defer killer.Stop()
	}
	<-exited
	syscall.Kill(w.group, syscall.SIGKILL) // whatever the leader left behind
	if gone := w.clock.Now(); !gone.Before(w.deadline) && woke.Before(w.killAt()) {
		// Stalled between the signals (or the kernel was slow to end
		// the group): say so, as for a late wake-up.
		fmt.Fprintf(w.stderr, "leaseside: lease %s (token %s): the command was gone only %v after the deadline: run was stalled\n",
			w.name, w.token, gone.Sub(w.deadline).Round(time.Millisecond))
	}
}

// jeopardy tells of ev when it puts this grant in jeopardy (renewals have
// failed for a third of its term) or takes it out again, and on jeopardy
// sends sig, if one was asked for, to the command's own process (pid; not
// its group, whose other members may not expect it).
func (w *runWatchdog) jeopardy(ev *ipc.Event, pid int, sig syscall.Signal) {
	if ev.Lease != w.name || ev.Token != w.token {
		return
	}
	switch ev.Event {
	case ipc.EventJeopardy:
		msg := fmt.Sprintf("leaseside: lease %s (token %s) in jeopardy: renewals have failed for a third of its term, %s left",
			w.name, w.token, fmtDuration(time.Duration(ev.ValidMs)*time.Millisecond))
		if sig != 0 {
			syscall.Kill(pid, sig)
			msg += "; sent " + signalName(sig) + " to the command"
		}
		fmt.Fprintln(w.stderr, msg)
	case ipc.EventSafe:
		fmt.Fprintf(w.stderr, "leaseside: lease %s (token %s) safe again: a renewal succeeded\n", w.name, w.token)
	}
}

// signalName is SIGUSR1, or "signal 40" for one without a name.
func signalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return fmt.Sprintf("signal %d", int(sig))
}

// whyDeadlineNear is the stop reason when no renewal came in time.
const whyDeadlineNear = "no renewal and the deadline is near"

func relative(left time.Duration) string {
	if left >= 0 {
		return left.Round(time.Millisecond).String() + " before"
	}
	return (-left).Round(time.Millisecond).String() + " after"
}
