package cli

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/leaseside/leaseside/ipc"
)

func newClockCmd(e *env) *cobra.Command {
	var cf clientFlags
	var reset bool
	cmd := &cobra.Command{
		Use:   "clock",
		Short: "show what the daemon knows about its clock",
		Long: `Shows what the sidecar's suspend, pause and drift detectors see: whether the
kernel clock is disciplined, the drift measured against the grantor, the rho
in use, pauses and suspends, and a histogram of how late its ticks woke.

The rho in use is the largest the daemon has had to assume since it
started; --reset-rho (root or the daemon's user) sets it back to the
configured one, or to what is observed now if that is larger.`,
		Example: `  leaseside clock
  leaseside clock --json
  leaseside clock --reset-rho`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runClock(cmd.Context(), e, &cf, reset)
		},
	}
	cf.register(cmd.Flags(), false)
	cmd.Flags().BoolVar(&reset, "reset-rho", false, "lower the drift bound in use back to the configured one (or what is observed now)")
	return cmd
}

// runClock prints the daemon's view of its clock: what the suspend, pause
// and drift detectors see, for an operator.
func runClock(ctx context.Context, e *env, cf *clientFlags, reset bool) error {
	ctx, c, done := cf.connect(ctx)
	defer done()
	if reset {
		if _, err := c.ResetRho(ctx); err != nil {
			return fail(e, err)
		}
	}
	cs, err := c.Clock(ctx)
	if err != nil {
		return cf.fail(e, err, asked{})
	}
	if cf.json {
		printJSON(e.stdout, cs)
		return nil
	}
	printClock(e, cs)
	if len(cs.PauseHistogram) > 0 {
		fmt.Fprintln(e.stdout, "\nwake-up lateness (all ticks):")
		tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
		for _, b := range cs.PauseHistogram {
			if b.Count == 0 {
				continue
			}
			le := fmt.Sprintf("<= %gms", b.LeMs)
			if b.LeMs < 0 {
				le = "more"
			}
			fmt.Fprintf(tw, "  %s\t%d\n", le, b.Count)
		}
		tw.Flush()
	}
	return nil
}

// printClock prints the clock summary that status and clock share.
func printClock(e *env, cs *ipc.ClockStatus) {
	sync := "synchronised"
	if !cs.KernelSynced {
		sync = "NOT synchronised (no NTP discipline: drift is bounded only by rho)"
	}
	drift := fmt.Sprintf("unknown yet (%d keepalive samples)", cs.DriftSamples)
	if cs.DriftPPM != nil {
		drift = fmt.Sprintf("%+.1f ppm against the grantor (%d samples)", *cs.DriftPPM, cs.DriftSamples)
	}
	fmt.Fprintf(e.stdout, "kernel clock:   %s, freq %+.1f ppm, max error %dms\n", sync, cs.KernelFreqPPM, cs.KernelMaxErrorMs)
	fmt.Fprintf(e.stdout, "observed drift: %s\n", drift)
	fmt.Fprintf(e.stdout, "rho:            %.0f ppm configured, %.0f ppm in use\n", cs.RhoPPM, cs.EffectiveRhoPPM)
	fmt.Fprintf(e.stdout, "pauses:         %d past threshold; longest in the last %ds: %dms\n", cs.Pauses, cs.PauseWindowMs/1000, cs.LongestRecentPauseMs)
	fmt.Fprintf(e.stdout, "suspends:       %d, %dms in all\n", cs.Suspends, cs.SuspendedMs)
}
