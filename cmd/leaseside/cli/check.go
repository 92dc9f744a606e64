package cli

import (
	"context"
	"fmt"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// runCheck exits 0 when this host holds the lease (with the token, if
// given) and it is valid now; ExitNotHeld otherwise.
func runCheck(ctx context.Context, e *env) int {
	fs := newFlags(e, "check", "NAME [--token T] [--json]")
	var cf clientFlags
	cf.register(fs)
	tok := fs.String("token", "", "require this token")
	pos, code := parseArgs(fs, e.args, 1)
	if code >= 0 {
		return code
	}
	ctx, c, done := cf.connect(ctx)
	defer done()
	g, err := c.Check(ctx, pos[0], *tok)
	if err != nil {
		if ie, ok := err.(*ipc.Error); ok && (ie.Code == ipc.CodeNotHeld || ie.Code == ipc.CodeTokenMismatch || ie.Code == ipc.CodeLost) {
			fmt.Fprintf(e.stderr, "leaseside: %s\n", ie.Message)
			return ExitNotHeld
		}
		return fail(e, err)
	}
	// Decide on this process's own reading of BOOTTIME too: the answer may
	// have taken its time to get here.
	if !clockwatch.System.Now().Before(clockwatch.Instant(g.DeadlineBoottimeNs)) {
		fmt.Fprintf(e.stderr, "leaseside: the deadline of %s has passed\n", g.Lease)
		return ExitNotHeld
	}
	return printGrant(e, &cf, g)
}

// runRenew renews a lease this host holds, at once.
func runRenew(ctx context.Context, e *env) int {
	fs := newFlags(e, "renew", "NAME [--token T] [--json]")
	var cf clientFlags
	cf.register(fs)
	tok := fs.String("token", "", "renew only if the lease still has this token")
	pos, code := parseArgs(fs, e.args, 1)
	if code >= 0 {
		return code
	}
	ctx, c, done := cf.connect(ctx)
	defer done()
	g, err := c.RenewToken(ctx, pos[0], *tok)
	if err != nil {
		return fail(e, err)
	}
	return printGrant(e, &cf, g)
}

func printGrant(e *env, cf *clientFlags, g *ipc.Grant) int {
	if cf.json {
		printJSON(e.stdout, g)
	} else {
		fmt.Fprintf(e.stdout, "%s token %s valid %.1fs\n", g.Lease, g.Token, float64(g.ValidMs)/1000)
	}
	return ExitOK
}
