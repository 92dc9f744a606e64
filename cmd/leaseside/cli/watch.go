package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/leaseside/leaseside/ipc"
)

func newWatchCmd(e *env) *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "watch [NAME]",
		Short: "print lease events as they happen",
		Long: `Prints the events of every lease on this host, or of NAME only, as they
happen (acquired, renewed, released, lost, and the clock's pauses and
suspends), until interrupted or the daemon goes away (exit 69).`,
		Example: `  leaseside watch
  leaseside watch leader/billing --json`,
		Args: optionalArg("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return runWatch(cmd.Context(), e, &cf, name)
		},
	}
	cf.register(cmd.Flags(), false)
	return cmd
}

// runWatch prints the events of every lease on this host, or of one, as
// they happen, until interrupted or the daemon goes away.
func runWatch(ctx context.Context, e *env, cf *clientFlags, name string) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c := cf.client()
	defer c.Close()
	events := make(chan *ipc.Event, 1024)
	c.Notify(events)
	wctx, cancel := context.WithTimeout(ctx, cf.timeout)
	err := c.Watch(wctx, name)
	cancel()
	if err != nil {
		return cf.fail(e, err, asked{lease: name})
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.Closed():
			fmt.Fprintln(e.stderr, "leaseside: the daemon closed the connection")
			return exitCode(ExitUnavailable)
		case ev := <-events:
			if cf.json {
				b, _ := json.Marshal(ev)
				fmt.Fprintln(e.stdout, string(b))
				continue
			}
			fmt.Fprintln(e.stdout, eventLine(ev))
		}
	}
}

// eventLine is an event as watch prints it: the event, then what it is
// about (a lease and its token, or the clock) and its details.
func eventLine(ev *ipc.Event) string {
	length := fmtDuration(time.Duration(ev.LengthMs) * time.Millisecond)
	var line string
	switch ev.Event {
	case ipc.EventSuspend:
		line = "host suspended for " + length
	case ipc.EventPause:
		line = "daemon paused for " + length
	case ipc.EventDrift:
		line = fmt.Sprintf("clock drifts %+.1f ppm against the grantor", ev.RatePPM)
	case ipc.EventUnsynced:
		line = "kernel clock not synchronised"
	default:
		line = fmt.Sprintf("%s token %s", ev.Lease, ev.Token)
		if ev.Reason != "" {
			line += " (" + ev.Reason + ")"
		}
		if ev.Event == ipc.EventRenewed {
			line += fmt.Sprintf(" valid %.1fs", float64(ev.ValidMs)/1000)
		}
	}
	return fmt.Sprintf("%-10s %s", ev.Event, line)
}
