package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

func runAcquire(ctx context.Context, e *env) int {
	fs := newFlags(e, "acquire", "NAME [--ttl 15s] [--wait 0s] [--owner-pid PID | --detached [--no-renew]] [--lock-delay D] [--json]")
	var cf clientFlags
	cf.register(fs)
	ttl := fs.Duration("ttl", 15*time.Second, "lease term")
	wait := fs.Duration("wait", 0, "how long to wait when the lease is held elsewhere")
	ownerPID := fs.Int("owner-pid", 0, "bind the lease to this process (default: the calling shell, the parent of this command)")
	detached := fs.Bool("detached", false, "bind the lease to nothing: held until 'leaseside release'")
	noRenew := fs.Bool("no-renew", false, "with --detached: the daemon does not renew the lease; it lapses unless 'leaseside renew' is run")
	lockDelay := fs.Duration("lock-delay", 0, "when the owner ends without releasing, keep the lease this long before releasing it")
	pos, code := parseArgs(fs, e.args, 1)
	if code >= 0 {
		return code
	}
	if *detached && *ownerPID != 0 {
		fmt.Fprintln(e.stderr, "leaseside: --detached and --owner-pid exclude each other")
		return ExitUsage
	}
	if *noRenew && !*detached {
		fmt.Fprintln(e.stderr, "leaseside: --no-renew needs --detached")
		return ExitUsage
	}
	opt := ipc.AcquireOptions{TTL: *ttl, Wait: *wait, Owner: ipc.OwnerPID, OwnerPID: *ownerPID, LockDelay: *lockDelay, NoRenew: *noRenew}
	switch {
	case *detached:
		opt.Owner, opt.OwnerPID = ipc.OwnerDetached, 0
	case *ownerPID == 0:
		opt.OwnerPID = os.Getppid()
		if opt.OwnerPID == 1 {
			// Run by init (systemd's ExecStartPre, say): PID 1 never exits,
			// so binding to it would hold the lease for good.
			fmt.Fprintln(e.stderr, "leaseside: the calling process is PID 1 (systemd?); use --detached (and release in ExecStopPost) or --owner-pid")
			return ExitUsage
		}
	}
	ctx, cancel := context.WithTimeout(ctx, *wait+cf.timeout)
	defer cancel()
	c := cf.client()
	defer c.Close()
	l, err := c.Acquire(ctx, pos[0], opt)
	if err != nil {
		return fail(e, err)
	}
	if cf.json {
		printJSON(e.stdout, l.Grant)
	} else {
		fmt.Fprintln(e.stdout, l.Token)
	}
	return ExitOK
}
