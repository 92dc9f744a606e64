package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/leaseside/leaseside/ipc"
)

func newObserveCmd(e *env) *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "observe NAME",
		Short: "print an election's leader, then every change",
		Long: `Prints who leads the election NAME, cluster-wide (a candidate on any host,
'leaseside elect'), then a line at every change, as the grantors push it:
a new leader, a new value proclaimed, or nobody leading. Each line is

  leader     NAME token T on HOST value "V"
  no_leader  NAME

('on HOST' names the leader's sidecar when the cluster runs with TLS);
--json prints the daemon's events, one JSON object a line. Tokens grow
with every new leader. It runs until interrupted, or until the daemon goes
away (exit 69). For the leader once, in a script: 'leaseside leader NAME'.`,
		Example: `  leaseside observe svc/api
  leaseside observe svc/api --json | jq -r 'select(.event=="leader").value'`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runObserve(cmd.Context(), e, &cf, args[0])
		},
	}
	cf.register(cmd.Flags(), false)
	return cmd
}

func newLeaderCmd(e *env) *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "leader NAME",
		Short: "print the value of an election's leader (exit 3 when none)",
		Long: `Prints the value of the leader of the election NAME (what its candidate
gave 'leaseside elect --value', or last proclaimed), cluster-wide, and
exits 0; exits 3 when nobody leads. --json prints the leader's token and
holder as well. To follow every change: 'leaseside observe NAME'.`,
		Example: `  addr=$(leaseside leader svc/api) && curl "http://$addr/health"
  leaseside leader svc/api --json`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLeader(cmd.Context(), e, &cf, args[0])
		},
	}
	cf.register(cmd.Flags(), false)
	return cmd
}

// observeEvents subscribes c to the leader of name and returns the
// channel its events come on; the subscription lasts as long as c's
// connection.
func observeEvents(ctx context.Context, cf *clientFlags, c *ipc.Client, name string) (<-chan *ipc.Event, error) {
	events := make(chan *ipc.Event, 1024)
	c.Notify(events)
	octx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	// Every event comes on events, in order; Observe's own channel, which
	// skips to the latest, ends with octx.
	if _, err := c.Observe(octx, name); err != nil {
		return nil, err
	}
	return events, nil
}

// runObserve prints the leader of name, then every change, until
// interrupted or the daemon goes away.
func runObserve(ctx context.Context, e *env, cf *clientFlags, name string) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c := cf.client()
	defer c.Close()
	events, err := observeEvents(ctx, cf, c, name)
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
			if ev.Lease != name || (ev.Event != ipc.EventLeader && ev.Event != ipc.EventNoLeader) {
				continue
			}
			if cf.json {
				b, _ := json.Marshal(ev)
				fmt.Fprintln(e.stdout, string(b))
				continue
			}
			fmt.Fprintln(e.stdout, leaderLine(ev))
		}
	}
}

// runLeader prints the value of name's leader once; ExitNotHeld when
// nobody leads.
func runLeader(ctx context.Context, e *env, cf *clientFlags, name string) error {
	c := cf.client()
	defer c.Close()
	events, err := observeEvents(ctx, cf, c, name)
	if err != nil {
		return cf.fail(e, err, asked{lease: name})
	}
	ctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	for {
		select {
		case <-ctx.Done():
			return cf.fail(e, ctx.Err(), asked{lease: name})
		case <-c.Closed():
			return cf.fail(e, ipc.ErrConnectionClosed, asked{lease: name})
		case ev := <-events:
			if err := watchRefused(e, ev, name); err != nil {
				return err
			}
			switch {
			case ev.Lease != name:
			case ev.Event == ipc.EventNoLeader:
				if cf.json {
					printJSON(e.stdout, map[string]any{"lease": name, "leader": nil})
				}
				fmt.Fprintf(e.stderr, "leaseside: nobody leads %s\n", name)
				return exitCode(ExitNotHeld)
			case ev.Event == ipc.EventLeader:
				if cf.json {
					printJSON(e.stdout, map[string]any{"lease": name, "leader": ipc.Holder{Token: ev.Token, Holder: ev.Holder, Value: ev.Value}})
				} else {
					fmt.Fprintln(e.stdout, ev.Value)
				}
				return nil
			}
		}
	}
}

// leaderLine is an observe event as observe prints it.
func leaderLine(ev *ipc.Event) string {
	if ev.Event == ipc.EventNoLeader {
		return fmt.Sprintf("%-10s %s", ev.Event, ev.Lease)
	}
	who := "token " + ev.Token
	if h := hostName(ev.Holder); h != "" {
		who += " on " + h
	}
	return fmt.Sprintf("%-10s %s %s value %q", ev.Event, ev.Lease, who, ev.Value)
}
