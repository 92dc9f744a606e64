package cli

import (
	"context"

	"github.com/spf13/cobra"
)

func newRenewCmd(e *env) *cobra.Command {
	var cf clientFlags
	var token string
	cmd := &cobra.Command{
		Use:   "renew NAME",
		Short: "renew a lease this host holds, now",
		Long: `Renews the lease NAME at the grantors at once and prints its new validity.
The daemon renews held leases by itself; this is for leases acquired with
--detached --no-renew, which lapse unless renewed.`,
		Example: `  leaseside renew job/nightly --token "$tok"`,
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRenew(cmd.Context(), e, &cf, args[0], token)
		},
	}
	cf.register(cmd.Flags(), false)
	cmd.Flags().StringVar(&token, "token", "", "renew only if the lease still has this token")
	return cmd
}

// runRenew renews a lease this host holds, at once.
func runRenew(ctx context.Context, e *env, cf *clientFlags, name, token string) error {
	ctx, c, done := cf.connect(ctx)
	defer done()
	g, err := c.RenewToken(ctx, name, token)
	if err != nil {
		return cf.fail(e, err, asked{lease: name})
	}
	printGrant(e, cf, g)
	return nil
}
