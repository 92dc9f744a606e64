package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/leaseside/leaseside/ipc"
)

func newWatchCmd(e *env) *cobra.Command {
	var cf clientFlags
	var holders bool
	cmd := &cobra.Command{
		Use:   "watch [NAME]",
		Short: "print lease events as they happen",
		Long: `Prints the events of every lease on this host, or of NAME only, as they
happen (acquired, renewed, released, lost, jeopardy and safe, and the
clock's pauses and suspends), until interrupted or the daemon goes away
(exit 69).

With --holders, prints instead the holders of NAME cluster-wide, on every
host, as the grantors push each change: first the holders as they are
(sync), then a line for every grant acquired, released, expired (its
holder stopped renewing) or proclaimed (a new value), with its token, and
the holders after it. A standby learns within milliseconds that a lease
is free, without polling:

  holder     NAME acquired token 12 value "10.0.0.5"; holders 1/3: 12`,
		Example: `  leaseside watch
  leaseside watch leader/billing --json
  leaseside watch leader/billing --holders`,
		Args: optionalArg("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			if holders && name == "" {
				return usagef("--holders needs NAME: 'leaseside watch NAME --holders'")
			}
			return runWatch(cmd.Context(), e, &cf, name, holders)
		},
	}
	cf.register(cmd.Flags(), false)
	cmd.Flags().BoolVar(&holders, "holders", false, "print the holders of NAME cluster-wide as they change, instead of this host's events")
	return cmd
}

// runWatch prints the events of every lease on this host, or of one, as
// they happen, until interrupted or the daemon goes away.
func runWatch(ctx context.Context, e *env, cf *clientFlags, name string, holders bool) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c := cf.client()
	defer c.Close()
	events := make(chan *ipc.Event, 1024)
	c.Notify(events)
	wctx, cancel := context.WithTimeout(ctx, cf.timeout)
	var err error
	if holders {
		err = c.WatchHolders(wctx, name)
	} else {
		err = c.Watch(wctx, name)
	}
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
			if err := watchRefused(e, ev, name); err != nil {
				return err
			}
			if cf.json {
				b, _ := json.Marshal(ev)
				fmt.Fprintln(e.stdout, string(b))
				continue
			}
			fmt.Fprintln(e.stdout, eventLine(ev))
		}
	}
}

// watchRefused ends a watch of name's holders (watch --holders, observe,
// leader) that the grantors refused: exit 1, saying why.
func watchRefused(e *env, ev *ipc.Event, name string) error {
	if ev.Event != ipc.EventWatchRefused || ev.Lease != name {
		return nil
	}
	fmt.Fprintf(e.stderr, "leaseside: the grantors' name rules do not let this host watch %s (%s)\n", name, ev.Reason)
	return exitCode(ExitError)
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
	case ipc.EventHolder:
		line = holderLine(ev)
	case ipc.EventLeader, ipc.EventNoLeader:
		return leaderLine(ev)
	default:
		line = fmt.Sprintf("%s token %s", ev.Lease, ev.Token)
		if ev.Reason != "" {
			line += " (" + ev.Reason + ")"
		}
		switch ev.Event {
		case ipc.EventRenewed, ipc.EventJeopardy, ipc.EventSafe:
			line += fmt.Sprintf(" valid %.1fs", float64(ev.ValidMs)/1000)
		}
	}
	return fmt.Sprintf("%-10s %s", ev.Event, line)
}

// holderLine describes a cluster-wide holder change: the change and its
// grant (none for sync), then the holders after it.
func holderLine(ev *ipc.Event) string {
	line := ev.Lease + " " + ev.Change
	if ev.Change != ipc.ChangeSync {
		line += " token " + ev.Token
		if h := hostName(ev.Holder); h != "" {
			line += " on " + h
		}
		if ev.Value != "" {
			line += fmt.Sprintf(" value %q", ev.Value)
		}
	}
	count := strconv.Itoa(len(ev.Holders))
	if ev.Limit > 1 {
		count += "/" + strconv.Itoa(ev.Limit)
	}
	if ev.Shared {
		count += " shared"
	}
	tokens := make([]string, len(ev.Holders))
	for i, h := range ev.Holders {
		tokens[i] = h.Token
	}
	line += "; holders " + count
	if len(tokens) > 0 {
		line += ": " + strings.Join(tokens, " ")
	}
	return line
}
