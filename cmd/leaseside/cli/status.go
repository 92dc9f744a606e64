package cli

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/leaseside/leaseside/ipc"
)

func newStatusCmd(e *env) *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "list the leases this host holds, and the clock's state",
		Long: `Lists the leases the local sidecar holds (name, token, time left, term,
holders, owner, value), whether it reaches the grantor leader, then what
it knows about its clock (as 'leaseside clock'). HOLDERS is holders/limit
for a semaphore ('acquire --limit'): how many grants of the name stood,
cluster-wide, when this one was made; 'N shared' for a shared lock
('acquire --shared'); '-' for an exclusive lease. VALUE is
an election candidate's value ('leaseside elect').`,
		Example: `  leaseside status
  leaseside status --json | jq '.leases[].lease'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStatus(cmd.Context(), e, &cf)
		},
	}
	cf.register(cmd.Flags(), false)
	return cmd
}

func runStatus(ctx context.Context, e *env, cf *clientFlags) error {
	ctx, c, done := cf.connect(ctx)
	defer done()
	st, err := c.StatusAll(ctx)
	if err != nil {
		return cf.fail(e, err, asked{})
	}
	leases, clock := st.Leases, st.Clock
	sort.Slice(leases, func(i, j int) bool { return leases[i].Lease < leases[j].Lease })
	if cf.json {
		if leases == nil {
			leases = []ipc.Grant{}
		}
		printJSON(e.stdout, map[string]any{"leases": leases, "clock": clock, "grantor": st.Grantor})
		return nil
	}
	defer func() {
		if g := st.Grantor; g != nil {
			fmt.Fprintln(e.stdout)
			printGrantor(e, g)
		}
		if clock != nil {
			fmt.Fprintln(e.stdout)
			printClock(e, clock)
		}
	}()
	if len(leases) == 0 {
		fmt.Fprintln(e.stdout, "no leases held")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEASE\tTOKEN\tVALID\tTTL\tHOLDERS\tOWNER\tVALUE")
	for _, l := range leases {
		owner := l.Owner
		if l.OwnerPID != 0 {
			owner = fmt.Sprintf("pid %d", l.OwnerPID)
		}
		value := ""
		if l.Value != "" {
			value = strconv.Quote(l.Value)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1fs\t%.1fs\t%s\t%s\t%s\n", l.Lease, l.Token, float64(l.ValidMs)/1000, float64(l.TTLMs)/1000, holdersText(&l), owner, value)
	}
	tw.Flush()
	return nil
}

// holdersText is a grant's holders/limit: "2/3" for a semaphore of 3
// that had 2 holders cluster-wide when this grant was made, "2 shared"
// for a shared grant of a read/write lock, "-" for an exclusive lease.
func holdersText(g *ipc.Grant) string {
	if g.Shared {
		return fmt.Sprintf("%d shared", g.Holders)
	}
	if g.Limit <= 1 {
		return "-"
	}
	return fmt.Sprintf("%d/%d", g.Holders, g.Limit)
}

// printGrantor prints how the sidecar reaches the grantor leader.
func printGrantor(e *env, g *ipc.GrantorStatus) {
	switch {
	case g.LeaderReachable:
		fmt.Fprintf(e.stdout, "grantor leader: reachable (%s, answered %dms ago)\n", g.Leader, g.SinceContactMs)
	case g.SinceContactMs < 0:
		fmt.Fprintf(e.stdout, "grantor leader: NOT reachable yet (never answered)\n")
	default:
		fmt.Fprintf(e.stdout, "grantor leader: NOT reachable (last answered %.1fs ago, by %s)\n", float64(g.SinceContactMs)/1000, g.Leader)
	}
	if g.Error != "" {
		fmt.Fprintf(e.stdout, "last error:     %s\n", g.Error)
	}
	fmt.Fprintf(e.stdout, "grantors:       %d known, from %s\n", len(g.Known), g.FoundBy)
}
