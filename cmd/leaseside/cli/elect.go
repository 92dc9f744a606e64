package cli

import (
	"github.com/spf13/cobra"
)

func newElectCmd(e *env) *cobra.Command {
	var o runOptions
	var value string
	cmd := &cobra.Command{
		Use:   "elect NAME --value V -- CMD [ARGS...]",
		Short: "run a command only while leading an election",
		Long: `Campaigns for leader of the election NAME with the value V (an address
that followers should use, say), and runs CMD only while leading: it
waits in line (first come, first served) until it leads, then starts CMD,
and stops it (SIGTERM, then SIGKILL after --grace, both before the
deadline) if leadership is lost, exactly as 'leaseside run' does. An
election is a lease whose grant carries the value; 'leaseside observe NAME'
and 'leaseside leader NAME' show who leads, with that value, on any host.

CMD gets LEASESIDE_LEASE, LEASESIDE_TOKEN (the leader's fencing token:
send it with every write), LEASESIDE_DEADLINE_BOOTTIME_NS,
LEASESIDE_SOCKET and LEASESIDE_VALUE; it may publish another value with
'leaseside proclaim NAME VALUE --token "$LEASESIDE_TOKEN"'. When CMD
exits, elect resigns (the
next candidate leads at once) and exits with CMD's status. Without --wait
it waits to lead for as long as it takes; on a terminal, stderr shows who
leads meanwhile.

With --jeopardy-signal, CMD's process gets that signal when renewals have
failed for a third of the term (the grantors are out of reach): it still
leads, but may not for long; stderr says when a renewal succeeds again.

Exit codes: CMD's status (128+N if a signal N ended it); 79 if leadership
was lost or could not be renewed in time and CMD was stopped, whatever
CMD's own status; 75 (or --conflict-exit-code's) if --wait ran out before
it led; 69 if
the daemon or grantors are unreachable; 127 if CMD could not be started;
2 for usage errors.`,
		Example: `  leaseside elect svc/api --value 10.0.0.5:8080 -- ./api --primary
  leaseside elect svc/api --value "$(hostname)" --ttl 10s --jeopardy-signal SIGUSR1 -- ./api
  leaseside elect cron/nightly --value "$HOSTNAME" --wait 1m -- ./nightly.sh`,
		Args: commandArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("value") {
				return usagef("missing --value: what observers see while this candidate leads (an address, say; --value '' for none)")
			}
			o.value = &value
			if !cmd.Flags().Changed("lock-delay") {
				o.lockDelay = o.ttl
			}
			return runRun(cmd.Context(), e, &o, args[0], args[cmd.ArgsLenAtDash():])
		},
	}
	fs := cmd.Flags()
	o.register(fs)
	fs.StringVar(&value, "value", "", "the value observers see while this candidate leads (required; at most 1024 bytes)")
	waitFlag(fs, &o.wait, "give up if not leading within this long (default: forever, for as long as it takes)")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "do not show who leads while waiting (shown on a terminal only)")
	o.limit = 1
	return cmd
}
