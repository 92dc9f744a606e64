package cli

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/leaseside/leaseside/ipc"
)

// acquireOptions are the flags of `leaseside acquire`.
type acquireOptions struct {
	client    clientFlags
	ttl       time.Duration
	wait      time.Duration
	ownerPID  int
	detached  bool
	noRenew   bool
	lockDelay time.Duration
	quiet     bool
	limit     int
	shared    bool
	envFile   string
}

func newAcquireCmd(e *env) *cobra.Command {
	var o acquireOptions
	cmd := &cobra.Command{
		Use:   "acquire NAME",
		Short: "acquire a lease and print its token",
		Long: `Acquires the lease NAME through the local sidecar and prints its fencing
token. The daemon renews it while its owner lives: by default the calling
shell (the parent of this command; in a command substitution such as
tok=$(leaseside acquire X | tr -d '\n'), the shell that reads the output,
not the subshell that ends with it); --owner-pid names another process;
--detached binds it to nothing, and it is held until 'leaseside release'.

When the lease is held elsewhere, acquire waits up to --wait for it
(--wait forever: without a limit), then exits 75, or the code given with
--conflict-exit-code (as flock -E). On a terminal, stderr shows meanwhile
who holds it (token, host) and how long the wait has run; --quiet hides
that.

With --limit N the name is a semaphore: up to N holders at once, on any
hosts, each with its own token (tokens still grow with every grant),
waiting in line first come, first served. Every holder of a name asks
with the same --limit; another one is refused (exit 2) naming both.

With --shared (flock -s) it takes a shared (read) lock: any number of
shared holders at once, on any hosts, each with its own token; an
acquire without --shared (a writer) waits until no shared holder is left,
and while a writer waits, new shared acquires wait behind it (writers do
not starve). Tokens fence writers: a writer's token is above every
earlier reader's, a reader's above every earlier writer's. Not with
--limit above 1 (exit 2), nor on a name held as a semaphore.

With --env-file PATH it also writes LEASESIDE_LEASE, LEASESIDE_TOKEN,
LEASESIDE_DEADLINE_BOOTTIME_NS (this grant's first deadline) and
LEASESIDE_SOCKET to PATH, for systemd's EnvironmentFile= (a service gated
on a detached lease gets its token) or sh's ".": replaced atomically, mode
0600, no symlink followed. If it cannot be written, the lease is released
and acquire fails.`,
		Example: `  tok=$(leaseside acquire leader/billing --ttl 15s) || exit
  leaseside acquire leader/billing --wait 5m --detached --env-file /run/leaseside/leader-billing.env   # systemd
  leaseside acquire job/nightly --owner-pid $$ --json
  leaseside acquire pool/gpu --limit 3 --wait 10m     # one of 3 slots
  leaseside acquire db/schema --shared --wait 1m      # a reader; writers omit --shared`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAcquire(cmd.Context(), e, &o, args[0])
		},
	}
	fs := cmd.Flags()
	o.client.register(fs, true)
	fs.DurationVar(&o.ttl, "ttl", 15*time.Second, "lease term")
	waitFlag(fs, &o.wait, "how long to wait when the lease is held elsewhere (a duration, or forever)")
	fs.IntVar(&o.ownerPID, "owner-pid", 0, "bind the lease to this process (default: the calling shell, the parent of this command, or the shell a command substitution's output goes to)")
	fs.BoolVar(&o.detached, "detached", false, "bind the lease to nothing: held until 'leaseside release'")
	fs.BoolVar(&o.noRenew, "no-renew", false, "with --detached: the daemon does not renew the lease; it lapses unless 'leaseside renew' is run")
	fs.DurationVar(&o.lockDelay, "lock-delay", 0, "when the owner ends without releasing, keep the lease this long before releasing it")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "do not show who holds the lease while --wait runs (shown on a terminal only)")
	fs.IntVar(&o.limit, "limit", 1, "a semaphore: up to this many holders of NAME at once, cluster-wide, each with its own token (1 to 256)")
	fs.BoolVar(&o.shared, "shared", false, "a shared (read) lock: any number of shared holders together, or one holder without --shared (flock -s)")
	fs.StringVar(&o.envFile, "env-file", "", "also write LEASESIDE_LEASE, LEASESIDE_TOKEN, ... to this file (for systemd's EnvironmentFile=)")
	return cmd
}

func runAcquire(ctx context.Context, e *env, o *acquireOptions, name string) error {
	if o.detached && o.ownerPID != 0 {
		return usagef("--detached and --owner-pid exclude each other")
	}
	if o.noRenew && !o.detached {
		return usagef("--no-renew needs --detached")
	}
	if err := cmp.Or(checkRange("lock-delay", o.lockDelay, ipc.MaxLockDelay), checkLimit(o.limit), checkShared(o.shared, o.limit)); err != nil {
		return err
	}
	opt := ipc.AcquireOptions{TTL: o.ttl, Wait: o.wait, Owner: ipc.OwnerPID, OwnerPID: o.ownerPID, LockDelay: o.lockDelay, NoRenew: o.noRenew, Limit: o.limit, Shared: o.shared}
	switch {
	case o.detached:
		opt.Owner, opt.OwnerPID = ipc.OwnerDetached, 0
	case o.ownerPID == 0:
		opt.OwnerPID = defaultOwner(os.Getppid())
		if opt.OwnerPID == 1 {
			// Run by init (systemd's ExecStartPre, say): PID 1 never exits,
			// so binding to it would hold the lease for good.
			return usagef("the calling process is PID 1 (systemd?); use --detached (and release in ExecStopPost) or --owner-pid")
		}
	}
	ctx, cancel := withWait(ctx, o.wait, o.client.timeout)
	defer cancel()
	c := o.client.client()
	defer c.Close()
	if err := o.client.checkTerm(ctx, c, o.ttl); err != nil {
		return err
	}
	l, err := acquireWaiting(ctx, e.stderr, o.quiet, c, name, opt)
	if err != nil {
		return o.client.fail(e, err, asked{lease: name, ttl: o.ttl, wait: o.wait, hasWait: true, limit: o.limit, shared: o.shared})
	}
	if o.envFile != "" {
		if err := writeEnvFile(o.envFile, grantEnv(name, &l.Grant, c.SocketPath())); err != nil {
			rctx, cancel := context.WithTimeout(context.Background(), o.client.timeout)
			defer cancel()
			c.ReleaseToken(rctx, name, l.Token) // nobody could use it
			return fail(e, fmt.Errorf("%w; lease %s (token %s) released", err, name, l.Token))
		}
	}
	if o.client.json {
		printJSON(e.stdout, l.Grant)
	} else {
		fmt.Fprintln(e.stdout, l.Token)
	}
	return nil
}
