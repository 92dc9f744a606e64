package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

func newReleaseCmd(e *env) *cobra.Command {
	var cf clientFlags
	var token string
	cmd := &cobra.Command{
		Use:   "release NAME",
		Short: "release a lease this host holds",
		Long: `Releases the lease NAME, which this host holds, at the grantors: it can be
granted elsewhere at once. With --token, only if the lease still has that
token (a later grant of the same name is left alone). It says which token
it released: of a semaphore this host holds more than once, without
--token, the oldest grant.`,
		Example: `  leaseside release leader/billing
  leaseside release leader/billing --token "$LEASESIDE_TOKEN"   # systemd ExecStopPost`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("token") && token == "" {
				// --token "$LEASESIDE_TOKEN" with the variable unset (an
				// EnvironmentFile= its acquire never wrote): releasing any
				// grant of the name could end another owner's.
				return usagef("--token is empty (an unset variable?); without --token, release ends this uid's grant of %s whatever its token", args[0])
			}
			return runRelease(cmd.Context(), e, &cf, args[0], token)
		},
	}
	cf.register(cmd.Flags(), false)
	cmd.Flags().StringVar(&token, "token", "", "release only if the lease still has this token")
	return cmd
}

func runRelease(ctx context.Context, e *env, cf *clientFlags, name, token string) error {
	ctx, c, done := cf.connect(ctx)
	defer done()
	released, err := c.ReleaseGrant(ctx, name, token)
	if err != nil {
		return cf.fail(e, err, asked{lease: name})
	}
	switch {
	case cf.json:
		printJSON(e.stdout, map[string]any{"lease": name, "released": true, "token": released})
	case released != "":
		fmt.Fprintf(e.stdout, "released %s (token %s)\n", name, released)
	default:
		fmt.Fprintf(e.stdout, "released %s\n", name)
	}
	return nil
}
