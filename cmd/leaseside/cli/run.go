package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// Environment given to the command that `run` starts.
const (
	EnvLease    = "LEASESIDE_LEASE"
	EnvToken    = "LEASESIDE_TOKEN"
	EnvDeadline = "LEASESIDE_DEADLINE_BOOTTIME_NS"
	EnvSocket   = "LEASESIDE_SOCKET"
	// EnvValue is the candidate's value, for the command `elect` starts.
	EnvValue = "LEASESIDE_VALUE"
)

// runOptions are the flags of `leaseside run` and `leaseside elect`.
type runOptions struct {
	client    clientFlags
	ttl       time.Duration
	wait      time.Duration
	margin    time.Duration
	grace     time.Duration
	lockDelay time.Duration
	quiet     bool
	// limit (run) makes the lease a semaphore; shared (run) a shared
	// grant of a read/write lock.
	limit  int
	shared bool
	// jeopardySignal names the signal CMD gets on jeopardy ("": none).
	jeopardySignal string
	// value (elect) is the candidate's value; nil for run.
	value *string
}

// register adds the flags run and elect share.
func (o *runOptions) register(fs *pflag.FlagSet) {
	o.client.register(fs, true)
	fs.DurationVar(&o.ttl, "ttl", 15*time.Second, "lease term")
	fs.DurationVar(&o.margin, "margin", 0, "stop CMD this long before the deadline if no renewal came (default 10% of the lease's term)")
	fs.DurationVar(&o.grace, "grace", 0, "time between SIGTERM and SIGKILL (default half the margin; must be shorter than the margin)")
	fs.DurationVar(&o.lockDelay, "lock-delay", 0, "if this command dies without releasing, hold the lease this long first (default: the term, --ttl)")
	fs.StringVar(&o.jeopardySignal, "jeopardy-signal", "", "send CMD this signal (SIGUSR1, USR2, 10...) when renewals have failed for a third of the term (default: none)")
}

func newRunCmd(e *env) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run NAME -- CMD [ARGS...]",
		Short: "run a command while holding a lease",
		Long: `Runs CMD, in its own process group, while holding the lease NAME. CMD gets
LEASESIDE_LEASE, LEASESIDE_TOKEN, LEASESIDE_DEADLINE_BOOTTIME_NS (the first
grant's deadline; renewals extend the lease, and 'leaseside check' tells the
current one) and LEASESIDE_SOCKET. If the lease is lost, or its deadline
comes within --margin without a renewal, the group gets SIGTERM, then
SIGKILL after --grace: both before the deadline, and so before the lease
could be granted elsewhere. A run that was itself stalled past that point
sends SIGKILL at once and says how late it was. SIGINT, SIGTERM and SIGHUP sent to run are
forwarded to the group; on a terminal, the group is in the foreground.
When CMD exits, whatever is left of its group is killed before the lease is
released. If run itself dies, CMD is killed with it, and the lease is held
for --lock-delay (default: the term) before it is released.

--wait forever waits without a limit. While --wait runs, stderr shows on a terminal who holds the lease (token,
host) and how long the wait has run; --quiet hides that.

With --limit N the lease is a semaphore: up to N runs (on any hosts) hold
it at once, each with its own token; the others wait in line. With
--shared the run takes a shared (read) lock (flock -s): any number of
--shared runs hold it together, a run without --shared alone, and a
waiting writer keeps new readers out. With
--jeopardy-signal, CMD's process (not its group) gets that signal when
renewals have failed for a third of the term: the lease is still held,
but may be lost at its deadline; stderr says when a renewal succeeds
again.

Exit codes: CMD's status (128+N if a signal N ended it); 75 if the lease is
held elsewhere and --wait ran out (or --conflict-exit-code's); 79 if the lease was lost or could not be
renewed in time and CMD was stopped, whatever CMD's own status (a TERM trap
that exits 0 too); 69 if the daemon or grantors are unreachable; 127 if CMD
could not be started; 2 for usage errors.`,
		Example: `  leaseside run leader/billing --wait 5m -- /usr/bin/billing --serve
  leaseside run job/nightly --ttl 1m -- sh -c 'backup --fence "$LEASESIDE_TOKEN"'
  leaseside run pool/encoders --limit 4 --wait 1h -- ./encode batch-17
  leaseside run db/main --shared --wait 1m -- ./report   # readers together; a migration omits --shared
  leaseside run leader/billing --jeopardy-signal SIGUSR1 -- ./billing   # USR1: finish up`,
		Args: commandArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if !cmd.Flags().Changed("lock-delay") {
				o.lockDelay = o.ttl
			}
			return runRun(cmd.Context(), e, &o, args[0], args[dash:])
		},
	}
	fs := cmd.Flags()
	o.register(fs)
	waitFlag(fs, &o.wait, "how long to wait when the lease is held elsewhere (a duration, or forever)")
	fs.IntVar(&o.limit, "limit", 1, "a semaphore: up to this many holders of NAME at once, cluster-wide (1 to 256)")
	fs.BoolVar(&o.shared, "shared", false, "a shared (read) lock: any number of --shared runs together, or one run without --shared (flock -s)")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "do not show who holds the lease while --wait runs (shown on a terminal only)")
	return cmd
}

func runRun(ctx context.Context, e *env, o *runOptions, name string, argv []string) error {
	cf := &o.client
	c := cf.client()
	defer c.Close()
	if err := o.client.checkTerm(ctx, c, o.ttl); err != nil {
		return err
	}
	if _, _, ok := stopMargins(o.ttl, o.margin, o.grace); !ok {
		return usagef("need --grace < --margin < --ttl, so that SIGKILL lands before the deadline")
	}
	if err := cmp.Or(checkRange("lock-delay", o.lockDelay, ipc.MaxLockDelay), checkLimit(o.limit), checkShared(o.shared, o.limit)); err != nil {
		return err
	}
	jsig, err := parseSignal(o.jeopardySignal)
	if err != nil {
		return err
	}

	events := make(chan *ipc.Event, 64)
	c.Notify(events)
	opt := ipc.AcquireOptions{TTL: o.ttl, Wait: o.wait, LockDelay: o.lockDelay, Limit: o.limit, Shared: o.shared}
	l, err := o.take(ctx, e, c, name, opt)
	if err != nil {
		return cf.fail(e, err, asked{lease: name, ttl: o.ttl, wait: o.wait, hasWait: true, limit: o.limit, shared: o.shared})
	}
	release := func(limit time.Duration) {
		rctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		c.ReleaseToken(rctx, name, l.Token)
	}
	// The stop is timed from the lease's own term: the grant's, which
	// the grantor may have set otherwise than --ttl asked.
	margin, grace, ok := stopMargins(time.Duration(l.TTLMs)*time.Millisecond, o.margin, o.grace)
	if !ok {
		release(cf.timeout)
		return fail(e, fmt.Errorf("the lease's term is %dms: --margin and --grace do not fit in it", l.TTLMs))
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, e.stdout, e.stderr
	cmd.Env = os.Environ()
	for _, kv := range grantEnv(name, &l.Grant, c.SocketPath()) { // the socket of the daemon the lease is from
		cmd.Env = append(cmd.Env, kv[0]+"="+kv[1])
	}
	if o.value != nil {
		cmd.Env = append(cmd.Env, EnvValue+"="+*o.value)
	}
	// Its own process group, so that stopping it stops its children too;
	// killed if run dies; in the terminal's foreground when there is one,
	// so that job control (Ctrl-Z, reading the terminal) acts on it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if isTerminal(os.Stdin) {
		cmd.SysProcAttr.Foreground, cmd.SysProcAttr.Ctty = true, 0
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		release(cf.timeout)
		fmt.Fprintf(e.stderr, "leaseside: %v\n", err)
		return exitCode(127)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	group := -cmd.Process.Pid

	// The watchdog: the deadline moves only with renewals (and
	// shortenings) of this grant; BOOTTIME decides, the timer only wakes
	// us.
	w := &runWatchdog{name: name, token: l.Token, group: group, margin: margin, grace: grace,
		clock: clockwatch.System, stderr: e.stderr, deadline: clockwatch.Instant(l.DeadlineBoottimeNs)}
	timer := time.NewTimer(clockwatch.Until(w.clock, w.termAt()))
	defer timer.Stop()
	// stop ends CMD because the lease is lost or could not be renewed in
	// time, and run exits 79 whatever CMD's own status (a TERM trap that
	// exits 0 included): the command did not finish, it was stopped.
	stop := func(why string) error {
		w.stop(why, w.clock.Now(), exited)
		// The lease is lost or about to be, likely because the grantor is
		// out of reach: give it up, reported as lost (renew_failed), not
		// released; but do not linger.
		gctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c.GiveUp(gctx, name, l.Token)
		return exitCode(ExitLost)
	}
	for {
		select {
		case s := <-sigs:
			syscall.Kill(group, s.(syscall.Signal))
		case err := <-exited:
			syscall.Kill(group, syscall.SIGKILL) // nothing of CMD outlives the lease
			release(cf.timeout)
			return code(exitStatus(err))
		case ev := <-events:
			w.jeopardy(ev, cmd.Process.Pid, jsig)
			if w.follow(ev) {
				timer.Reset(clockwatch.Until(w.clock, w.termAt()))
			}
		case <-timer.C:
			if left := clockwatch.Until(w.clock, w.termAt()); left > 0 {
				timer.Reset(left)
				continue
			}
			return stop(whyDeadlineNear)
		case <-l.Done():
			return stop("lost (" + l.Reason() + ")")
		}
	}
}

// take acquires the lease run or elect runs CMD under: for run, within
// --wait (showing the holder on a terminal); for elect, in the election's
// line, within --wait if given, else for as long as it takes.
func (o *runOptions) take(ctx context.Context, e *env, c *ipc.Client, name string, opt ipc.AcquireOptions) (*ipc.Lease, error) {
	if o.value == nil {
		actx, cancel := withWait(ctx, o.wait, o.client.timeout)
		defer cancel()
		return acquireWaiting(actx, e.stderr, o.quiet, c, name, opt)
	}
	if o.wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = withWait(ctx, o.wait, o.client.timeout)
		defer cancel()
	}
	return campaignWaiting(ctx, e.stderr, o.quiet, c, name, *o.value, opt)
}

// stopMargins returns the margin and grace run stops its command with,
// for a lease of term ttl: the flags' values, or by default a tenth of
// the term and half of that. ok is false when they leave no time for
// SIGKILL before the deadline (grace < margin < ttl).
func stopMargins(ttl, margin, grace time.Duration) (m, g time.Duration, ok bool) {
	if margin <= 0 {
		margin = ttl / 10
	}
	if grace <= 0 {
		grace = margin / 2
	}
	return margin, grace, grace > 0 && grace < margin && margin < ttl
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
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
