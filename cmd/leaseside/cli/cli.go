// Package cli implements the leaseside command line: one file per
// subcommand, output to injectable writers, no flag values in globals.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

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
	// ExitLost: `run` lost the lease while its command ran, and stopped
	// the command.
	ExitLost = 79
	// ExitNotHeld: `check` found the lease not held here, not valid, or
	// held under another token.
	ExitNotHeld = 3
)

// Version is the leaseside version, set at build time with
// -ldflags "-X github.com/leaseside/leaseside/cmd/leaseside/cli.Version=...".
var Version = "dev"

// env is what a subcommand gets: its arguments and where to write.
type env struct {
	args   []string
	stdout io.Writer
	stderr io.Writer
}

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env) int
}

func commands() []command {
	return []command{
		{"dev", "run a sidecar and a single-node grantor in one process", runDev},
		{"acquire", "acquire a lease and print its token", runAcquire},
		{"release", "release a lease this host holds", runRelease},
		{"status", "list the leases this host holds", runStatus},
		{"run", "run a command while holding a lease", runRun},
		{"check", "exit 0 if this host holds a lease, valid now", runCheck},
		{"renew", "renew a lease this host holds, now", runRenew},
		{"watch", "print lease events as they happen", runWatch},
		{"clock", "show what the daemon knows about its clock", runClock},
		{"daemon", "run the sidecar against a grantor cluster", runDaemon},
		{"grantor", "run one grantor node of the replicated cluster", runGrantor},
		{"members", "list the cluster's grantors and sidecars; remove a dead grantor", runMembers},
		{"bench", "measure a grantor cluster's throughput and latency", runBench},
		{"version", "print the version", runVersion},
	}
}

// Main runs the leaseside command line and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(context.Background(), &env{args: args[1:], stdout: stdout, stderr: stderr})
		}
	}
	fmt.Fprintf(stderr, "leaseside: unknown command %q (see leaseside help)\n", args[0])
	return ExitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "leaseside: distributed leases with fencing tokens, from a per-host sidecar")
	fmt.Fprintln(w, "\nUsage: leaseside COMMAND [flags] [args]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, `
Exit codes: %d ok, %d error, %d usage, %d 'check': not held or not valid,
%d daemon or grantor unavailable, %d lease held elsewhere (wait ran out),
%d lease lost while 'run' ran its command (which was stopped); 'run'
otherwise exits with its command's status.
`, ExitOK, ExitError, ExitUsage, ExitNotHeld, ExitUnavailable, ExitHeld, ExitLost)
}

// parse parses flags that may come before, between or after positional
// arguments. Arguments after "--" are returned in rest untouched.
func parse(fs *flag.FlagSet, args []string) (pos, rest []string, err error) {
	for i, a := range args {
		if a == "--" {
			args, rest = args[:i], args[i+1:]
			break
		}
	}
	for {
		if err := fs.Parse(args); err != nil {
			return nil, nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, rest, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// parseArgs parses args into fs and wants exactly n positional arguments.
// code is -1 when the caller may go on, else the exit code to return.
func parseArgs(fs *flag.FlagSet, args []string, n int) (pos []string, code int) {
	pos, _, err := parse(fs, args)
	if err != nil {
		return nil, parseExit(err)
	}
	if len(pos) != n {
		fs.Usage()
		return nil, ExitUsage
	}
	return pos, -1
}

// parseExit is the exit code for a failed parse: 0 for -h, else usage.
func parseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	return ExitUsage
}

func newFlags(e *env, name, argsUsage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: leaseside %s %s\n", name, argsUsage)
		fs.PrintDefaults()
	}
	return fs
}

// fail prints err and returns the exit code that fits it.
func fail(e *env, err error) int {
	fmt.Fprintf(e.stderr, "leaseside: %v\n", err)
	var ie *ipc.Error
	switch {
	case errors.As(err, &ie) && ie.Code == ipc.CodeLeaseHeld:
		return ExitHeld
	case errors.As(err, &ie) && ie.Code == ipc.CodeUnavailable:
		return ExitUnavailable
	case errors.As(err, &ie):
		return ExitError
	case errors.Is(err, ipc.ErrNoDaemon):
		return ExitUnavailable
	}
	return ExitError
}

func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
