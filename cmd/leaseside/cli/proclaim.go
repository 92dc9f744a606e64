package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/leaseside/leaseside/ipc"
)

func newProclaimCmd(e *env) *cobra.Command {
	var cf clientFlags
	var token string
	cmd := &cobra.Command{
		Use:   "proclaim NAME VALUE",
		Short: "publish a new value for an election this host leads",
		Long: `Changes the value of the election NAME, which a candidate on this host
leads ('leaseside elect'), to VALUE, keeping its token: observers on every
host see the new value. The command that elect runs proclaims with its own
token (--token "$LEASESIDE_TOKEN"), so that a leader that was deposed
meanwhile changes nothing. Exits 0 when proclaimed, 3 when this host does
not lead NAME (or not with --token), 2 for a VALUE that is not allowed
(over 1024 bytes, control characters).`,
		Example: `  leaseside proclaim svc/api 10.0.0.6:8080 --token "$LEASESIDE_TOKEN"
  leaseside proclaim svc/api "$(hostname):9090"`,
		Args: exactArgs("NAME", "VALUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runProclaim(cmd.Context(), e, &cf, args[0], args[1], token)
		},
	}
	cf.register(cmd.Flags(), false)
	cmd.Flags().StringVar(&token, "token", "", "proclaim only if the election is still led with this token")
	return cmd
}

func runProclaim(ctx context.Context, e *env, cf *clientFlags, name, value, token string) error {
	ctx, c, done := cf.connect(ctx)
	defer done()
	l := &ipc.Lease{Grant: ipc.Grant{Lease: name, Token: token}}
	if err := c.Proclaim(ctx, l, value); err != nil {
		if ie, ok := err.(*ipc.Error); ok && (ie.Code == ipc.CodeNotHeld || ie.Code == ipc.CodeTokenMismatch || ie.Code == ipc.CodeLost) {
			fmt.Fprintf(e.stderr, "leaseside: %s\n", ie.Message)
			return exitCode(ExitNotHeld)
		}
		return cf.fail(e, err, asked{lease: name})
	}
	if cf.json {
		printJSON(e.stdout, map[string]any{"lease": name, "value": l.CurrentValue()})
	} else {
		fmt.Fprintf(e.stdout, "%s: proclaimed %q\n", name, l.CurrentValue())
	}
	return nil
}
