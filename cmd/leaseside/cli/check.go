package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

func newCheckCmd(e *env) *cobra.Command {
	var cf clientFlags
	var token string
	cmd := &cobra.Command{
		Use:   "check NAME",
		Short: "exit 0 if this host holds a lease, valid now",
		Long: `Exits 0 when this host holds the lease NAME (with --token, under that token)
and its deadline has not passed, by this process's own reading of
CLOCK_BOOTTIME; exits 3 otherwise. A script checks before each step that
must happen under the lease.`,
		Example: `  leaseside check leader/billing --token "$LEASESIDE_TOKEN" && do-step
  leaseside check leader/billing --json`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCheck(cmd.Context(), e, &cf, args[0], token)
		},
	}
	cf.register(cmd.Flags(), false)
	cmd.Flags().StringVar(&token, "token", "", "require this token")
	return cmd
}

// runCheck exits 0 when this host holds the lease (with the token, if
// given) and it is valid now; ExitNotHeld otherwise.
func runCheck(ctx context.Context, e *env, cf *clientFlags, name, token string) error {
	ctx, c, done := cf.connect(ctx)
	defer done()
	g, err := c.Check(ctx, name, token)
	if err != nil {
		if ie, ok := err.(*ipc.Error); ok && (ie.Code == ipc.CodeNotHeld || ie.Code == ipc.CodeTokenMismatch || ie.Code == ipc.CodeLost) {
			fmt.Fprintf(e.stderr, "leaseside: %s\n", ie.Message)
			return exitCode(ExitNotHeld)
		}
		return cf.fail(e, err, asked{lease: name})
	}
	// Decide on this process's own reading of BOOTTIME too: the answer may
	// have taken its time to get here.
	if !clockwatch.System.Now().Before(clockwatch.Instant(g.DeadlineBoottimeNs)) {
		fmt.Fprintf(e.stderr, "leaseside: the deadline of %s has passed\n", g.Lease)
		return exitCode(ExitNotHeld)
	}
	printGrant(e, cf, g)
	return nil
}

func printGrant(e *env, cf *clientFlags, g *ipc.Grant) {
	if cf.json {
		printJSON(e.stdout, g)
	} else {
		fmt.Fprintf(e.stdout, "%s token %s valid %.1fs\n", g.Lease, g.Token, float64(g.ValidMs)/1000)
	}
}
