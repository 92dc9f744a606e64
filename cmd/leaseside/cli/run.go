package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// Environment given to the command that `run` starts.
const (
	EnvLease    = "LEASESIDE_LEASE"
	EnvToken    = "LEASESIDE_TOKEN"
	EnvDeadline = "LEASESIDE_DEADLINE_BOOTTIME_NS"
	EnvSocket   = "LEASESIDE_SOCKET"
)

const runUsage = `NAME [--ttl 15s] [--wait 0s] [--margin D] [--grace D] -- CMD [ARGS...]

Runs CMD, in its own process group, while holding the lease NAME. CMD gets
LEASESIDE_LEASE, LEASESIDE_TOKEN, LEASESIDE_DEADLINE_BOOTTIME_NS and
LEASESIDE_SOCKET. If the lease is lost, or its deadline comes within
--margin without a renewal, the group gets SIGTERM, then SIGKILL after
--grace: both before the lease could be granted elsewhere. SIGINT, SIGTERM
and SIGHUP sent to run are forwarded to the group.

Exit codes: CMD's status (128+N if a signal N ended it); 75 if the lease is
held elsewhere and --wait ran out; 79 if the lease was lost and CMD was
stopped; 69 if the daemon or grantors are unreachable; 127 if CMD could not
be started; 2 for usage errors.`

func runRun(ctx context.Context, e *env) int {
	fs := newFlags(e, "run", runUsage)
	var cf clientFlags
	cf.register(fs)
	ttl := fs.Duration("ttl", 15*time.Second, "lease term")
	wait := fs.Duration("wait", 0, "how long to wait when the lease is held elsewhere")
	margin := fs.Duration("margin", 0, "stop CMD this long before the deadline if no renewal came (default 10% of --ttl)")
	grace := fs.Duration("grace", 0, "time between SIGTERM and SIGKILL (default half the margin, so both land before the deadline)")
	pos, argv, err := parse(fs, e.args)
	if err != nil {
		return parseExit(err)
	}
	if len(pos) != 1 || len(argv) == 0 {
		fs.Usage()
		return ExitUsage
	}
	if *margin <= 0 {
		*margin = *ttl / 10
	}
	if *grace <= 0 {
		*grace = *margin / 2
	}
	if *margin >= *ttl {
		fmt.Fprintln(e.stderr, "leaseside: --margin must be shorter than --ttl")
		return ExitUsage
	}
	name := pos[0]

	c := cf.client()
	defer c.Close()
	events := make(chan *ipc.Event, 64)
	c.Notify(events)
	actx, cancel := context.WithTimeout(ctx, *wait+cf.timeout)
	defer cancel()
	l, err := c.Acquire(actx, name, ipc.AcquireOptions{TTL: *ttl, Wait: *wait})
	if err != nil {
		return fail(e, err)
	}
	release := func(limit time.Duration) {
		rctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		c.Release(rctx, name)
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, e.stdout, e.stderr
	cmd.Env = append(os.Environ(),
		EnvLease+"="+name,
		EnvToken+"="+l.Token,
		EnvDeadline+"="+strconv.FormatInt(l.DeadlineBoottimeNs, 10),
		EnvSocket+"="+cf.socketPath(),
	)
	// Its own process group, so that stopping it stops its children too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		release(cf.timeout)
		fmt.Fprintf(e.stderr, "leaseside: %v\n", err)
		return 127
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	group := -cmd.Process.Pid

	// The watchdog: the deadline moves only with renewals of this grant;
	// BOOTTIME decides, the timer only wakes us.
	clock := clockwatch.System
	deadline := clockwatch.Instant(l.DeadlineBoottimeNs)
	timer := time.NewTimer(clockwatch.Until(clock, deadline.Add(-*margin)))
	defer timer.Stop()
	stop := func(why string) int {
		fmt.Fprintf(e.stderr, "leaseside: lease %s (token %s): %s; stopping the command\n", name, l.Token, why)
		syscall.Kill(group, syscall.SIGTERM)
		killer := time.AfterFunc(*grace, func() { syscall.Kill(group, syscall.SIGKILL) })
		<-exited
		killer.Stop()
		// The lease is lost or about to be, likely because the grantor is
		// out of reach: try to free it, but do not linger.
		release(time.Second)
		return ExitLost
	}
	for {
		select {
		case s := <-sigs:
			syscall.Kill(group, s.(syscall.Signal))
		case err := <-exited:
			release(cf.timeout)
			return exitStatus(err)
		case ev := <-events:
			if ev.Event == ipc.EventRenewed && ev.Lease == name && ev.Token == l.Token {
				deadline = max(deadline, clockwatch.Instant(ev.DeadlineBoottimeNs))
				timer.Reset(clockwatch.Until(clock, deadline.Add(-*margin)))
			}
		case <-timer.C:
			if left := clockwatch.Until(clock, deadline); left > *margin {
				timer.Reset(left - *margin)
				continue
			}
			return stop("no renewal and the deadline is near")
		case <-l.Done():
			return stop("lost (" + l.Reason() + ")")
		}
	}
}

// exitStatus maps a command's end to an exit code the way shells do.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return ExitError
}
