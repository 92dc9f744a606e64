// Package cli implements the leaseside command line on cobra: one file per
// subcommand (each a constructor returning its *cobra.Command, listed once
// in subcommands), output to injectable writers, no flag values in globals.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/leaseside/leaseside/ipc"
)

// Exit codes shared by the subcommands. They are part of the CLI's contract
// (README, `leaseside help`): ONLY APPEND.
const (
	// ExitOK: success.
	ExitOK = 0
	// ExitError: the command failed; the message says why.
	ExitError = 1
	// ExitUsage: the command line is wrong.
	ExitUsage = 2
	// ExitUnavailable (EX_UNAVAILABLE): the daemon or the grantor cluster
	// could not be reached.
	ExitUnavailable = 69
	// ExitHeld (EX_TEMPFAIL): the lease is held by another owner and the
	// wait ran out.
	ExitHeld = 75
	// ExitLost: `run` (or `elect`) lost the lease while its command ran,
	// and stopped the command.
	ExitLost = 79
	// ExitNotHeld: `check` found the lease not held here, not valid, or
	// held under another token; `check-token`: the token is not live;
	// `leader`: nobody leads.
	ExitNotHeld = 3
	// ExitHalted (EX_DATAERR): `grantor` (or `dev`) met a raft log entry
	// it cannot apply and stopped; a restart halts again until the binary
	// is upgraded (an entry of a newer leaseside) or the entry is skipped
	// on every replica (`grantor recover`, a forged or corrupt one). The
	// grantor unit does not restart on it (RestartPreventExitStatus).
	ExitHalted = 65
	// ExitRetired (EX_CONFIG): `grantor` was retired: removed from the
	// raft configuration while it was down, and no join rule admits it any
	// more (the leader and a majority of the voters said so). Restarting
	// it stops it again; the grantor unit does not restart on it
	// (RestartPreventExitStatus).
	ExitRetired = 78
	// ExitStale: `write` was refused: a newer token of the lease has
	// written the file since (the caller lost the lease).
	ExitStale = 4
)

// Version is the leaseside version, set at build time with
// -ldflags "-X github.com/leaseside/leaseside/cmd/leaseside/cli.Version=...".
var Version = "dev"

// env is where a subcommand writes.
type env struct {
	stdout io.Writer
	stderr io.Writer
}

// subcommands lists the top-level subcommands, by name, in the order
// `leaseside help` shows them. A new subcommand is a file with a
// constructor and one line here (TestSubcommandNames holds each name to
// its command's).
var subcommands = []subcommand{
	{"dev", newDevCmd},
	{"acquire", newAcquireCmd},
	{"release", newReleaseCmd},
	{"status", newStatusCmd},
	{"run", newRunCmd},
	{"elect", newElectCmd},
	{"proclaim", newProclaimCmd},
	{"observe", newObserveCmd},
	{"leader", newLeaderCmd},
	{"check", newCheckCmd},
	{"check-token", newCheckTokenCmd},
	{"write", newWriteCmd},
	{"fence-proxy", newFenceProxyCmd},
	{"fence", newFenceCmd},
	{"renew", newRenewCmd},
	{"watch", newWatchCmd},
	{"top", newTopCmd},
	{"clock", newClockCmd},
	{"daemon", newDaemonCmd},
	{"grantor", newGrantorCmd},
	{"members", newMembersCmd},
	{"leases", newLeasesCmd},
	{"revoke", newRevokeCmd},
	{"tls", newTLSCmd},
	{"bench", newBenchCmd},
	{"version", newVersionCmd},
	{"completion", newCompletionCmd},
}

// subcommand is a top-level subcommand: its name and its constructor.
type subcommand struct {
	name string
	new  func(*env) *cobra.Command
}

const exitCodesHelp = `Exit codes:
  0   ok
  1   error
  2   usage: the command line is wrong
  3   'check': not held here, not valid, or held under another token;
      'check-token': the token is not live; 'leader': nobody leads;
      'proclaim': this host does not lead the election
  4   'write': refused, a newer token of the lease has written the file
  65  'grantor' or 'dev': halted at a raft log entry it cannot apply (the
      message says whether to upgrade or to run 'grantor recover')
  69  unavailable: the daemon or the grantor cluster cannot be reached
      (also when no leader answers in time)
  75  held elsewhere and the wait ran out
  78  'grantor': retired (removed from the cluster, no join rule admits
      it); remove its data dir, or add its join rule back and restart
  79  'run' or 'elect' lost the lease, or could not renew it in time, and
      stopped its command (whatever the command's own status)
'run' and 'elect' otherwise exit with their command's status.`

// NewRootCommand returns the leaseside command tree writing to stdout and
// stderr. Man pages and shell completions are generated from it.
func NewRootCommand(stdout, stderr io.Writer) *cobra.Command {
	return newRoot(&env{stdout: stdout, stderr: stderr}, subcommands)
}

// newRoot returns the root command with the subcommands subs.
func newRoot(e *env, subs []subcommand) *cobra.Command {
	root := &cobra.Command{
		Use:   "leaseside",
		Short: "distributed leases with fencing tokens, from a per-host sidecar",
		Long: `leaseside hands local programs distributed leases: a fencing token and a
CLOCK_BOOTTIME deadline, granted by a replicated grantor cluster through a
sidecar daemon on each host (a Unix socket).

` + exitCodesHelp,
		Example: `  leaseside dev                                  # a sidecar and a grantor in one process
  leaseside acquire leader/billing --ttl 15s     # print the token
  leaseside run leader/billing --wait 5m -- ./billing
  leaseside elect svc/api --value 10.0.0.5:8080 -- ./api   # run ./api only while leading
  leaseside help run`,
		Version:           Version,
		SilenceErrors:     true,
		SilenceUsage:      true,
		Args:              noArgs,
		DisableAutoGenTag: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.Help()
			return exitCode(ExitUsage)
		},
		PersistentPreRunE: checkTimeout,
	}
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.Flags().Bool("version", false, "print the version and exit")
	root.SetVersionTemplate(versionLine() + "\n")
	root.SetFlagErrorFunc(flagError)
	for _, sub := range subs {
		root.AddCommand(sub.new(e))
	}
	return root
}

// commandFor returns the subcommands a command line needs: only the one
// it names when its first word is a subcommand's name, all of them
// otherwise (help, completion, an unknown command or a flag first, which
// may list or suggest the others). A client command is a process of its
// own, started from a shell for one request: making the other 26
// commands and their flags was 3% of a `leaseside release` process's CPU
// (docs/performance.md, "What a client command's start costs").
func commandFor(args []string) []subcommand {
	if len(args) > 0 && args[0] != "completion" {
		for i, sub := range subcommands {
			if sub.name == args[0] {
				return subcommands[i : i+1]
			}
		}
	}
	return subcommands
}

// Main runs the leaseside command line and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	return execute(context.Background(), args, stdout, stderr)
}

// execute is Main under ctx: a command that runs until interrupted (watch,
// top) also ends when ctx does.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(&env{stdout: stdout, stderr: stderr}, commandFor(args))
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	var code exitCode
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &code):
		return int(code)
	}
	// Anything else is cobra's or ours about the command line: an unknown
	// command or flag, a bad flag value, missing or extra arguments.
	fmt.Fprintf(stderr, "leaseside: %v\n", err)
	if cmd != nil {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return ExitUsage
}

// exitCode ends a command with that exit code, its message (if any)
// already printed.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// usageError is a command-line mistake: Main prints it with a pointer to
// the help, and exits ExitUsage.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// checkTimeout refuses a --timeout of zero or less, on every command that
// has one: it would give up before asking, and blame the daemon.
func checkTimeout(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags().Lookup("timeout")
	if f == nil || f.Value.Type() != "duration" {
		return nil
	}
	if d, err := time.ParseDuration(f.Value.String()); err == nil && d <= 0 {
		return usagef("--timeout %s: must be more than 0s", f.Value.String())
	}
	return nil
}

// usagef returns a usage error.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// code turns an exit code into what RunE returns.
func code(c int) error {
	if c == ExitOK {
		return nil
	}
	return exitCode(c)
}

// fail prints err and returns ExitError: for the commands that run a
// daemon or call grantors; clientFlags.fail is the client commands' own.
func fail(e *env, err error) error {
	fmt.Fprintf(e.stderr, "leaseside: %v\n", err)
	return exitCode(ExitError)
}

func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func versionLine() string {
	return fmt.Sprintf("leaseside %s (protocol %d, %s)", Version, ipc.ProtocolVersion, runtime.Version())
}
