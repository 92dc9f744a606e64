package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

func newCheckTokenCmd(e *env) *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "check-token NAME TOKEN",
		Short: "ask the grantors whether TOKEN is the live grant of a lease (exit 0 live, 3 not)",
		Long: `Asks the grantor cluster whether TOKEN is a live grant of the lease NAME,
held anywhere in the cluster (Chubby's CheckSequencer), and exits 0 if it
is, 3 if it is not (released, expired, or superseded by a newer grant).
The grantor leader answers from its lease table after confirming it still
leads; a check costs no raft write.

For a resource that can call out before it acts, instead of storing the
highest token it has seen. A yes is only as good as the time between the
check and the write it guards: a holder may lose the lease in between.
Where the resource can keep the highest token, that check is stronger
(it needs no time bound); 'leaseside check' asks this host's daemon
instead, without a round trip to the grantors.`,
		Example: `  leaseside check-token jobs/render-42 "$LEASESIDE_TOKEN" && apply-write
  leaseside check-token jobs/render-42 41 --json`,
		Args: exactArgs("NAME", "TOKEN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if t, err := strconv.ParseUint(args[1], 10, 64); err != nil || t == 0 {
				return usagef("TOKEN %q: a token is a positive decimal integer", args[1])
			}
			return runCheckToken(cmd.Context(), e, &cf, args[0], args[1])
		},
	}
	cf.register(cmd.Flags(), false)
	return cmd
}

// runCheckToken exits 0 when token is a live grant of name at the
// grantors, ExitNotHeld when it is not.
func runCheckToken(ctx context.Context, e *env, cf *clientFlags, name, token string) error {
	ctx, c, done := cf.connect(ctx)
	defer done()
	live, tokens, err := c.CheckToken(ctx, name, token)
	if err != nil {
		return cf.fail(e, err, asked{lease: name})
	}
	if tokens == nil {
		tokens = []string{}
	}
	if cf.json {
		printJSON(e.stdout, map[string]any{"lease": name, "token": token, "live": live, "tokens": tokens})
	}
	if !live {
		now := "nobody holds it"
		if len(tokens) > 0 {
			now = "live: token " + strings.Join(tokens, ", ")
		}
		fmt.Fprintf(e.stderr, "leaseside: token %s of %s is not live (%s)\n", token, name, now)
		return exitCode(ExitNotHeld)
	}
	if !cf.json {
		fmt.Fprintf(e.stdout, "%s token %s: live\n", name, token)
	}
	return nil
}
