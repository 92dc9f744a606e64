package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/leaseside/leaseside/ipc"
)

// runWatch prints the events of every lease on this host, or of one, as
// they happen, until interrupted or the daemon goes away.
func runWatch(ctx context.Context, e *env) int {
	fs := newFlags(e, "watch", "[NAME] [--json]")
	var cf clientFlags
	cf.register(fs)
	pos, _, err := parse(fs, e.args)
	if err != nil {
		return parseExit(err)
	}
	if len(pos) > 1 {
		fs.Usage()
		return ExitUsage
	}
	name := ""
	if len(pos) == 1 {
		name = pos[0]
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c := cf.client()
	defer c.Close()
	events := make(chan *ipc.Event, 1024)
	c.Notify(events)
	wctx, cancel := context.WithTimeout(ctx, cf.timeout)
	err = c.Watch(wctx, name)
	cancel()
	if err != nil {
		return fail(e, err)
	}
	for {
		select {
		case <-ctx.Done():
			return ExitOK
		case <-c.Closed():
			fmt.Fprintln(e.stderr, "leaseside: the daemon closed the connection")
			return ExitUnavailable
		case ev := <-events:
			if cf.json {
				b, _ := json.Marshal(ev)
				fmt.Fprintln(e.stdout, string(b))
				continue
			}
			line := fmt.Sprintf("%-9s %s token %s", ev.Event, ev.Lease, ev.Token)
			if ev.Reason != "" {
				line += " (" + ev.Reason + ")"
			}
			if ev.Event == ipc.EventRenewed {
				line += fmt.Sprintf(" valid %.1fs", float64(ev.ValidMs)/1000)
			}
			fmt.Fprintln(e.stdout, line)
		}
	}
}
