// Command vsetcd is the Go half of internal/bench/vs-etcd.sh, the
// side-by-side bench of leaseside against etcd on one machine. It lives in
// a module of its own so that the etcd client and the plotting library
// stay out of leaseside's dependencies.
//
// Subcommands:
//
//	vsetcd etcd --endpoints URL,... --pids PID,... --workload W [sizes]
//	    runs workload W (locks, handoffs, keepalives, memory) against an
//	    etcd cluster and prints a report in the shape of `leaseside bench
//	    --json`, measured by the same loops and checks (package
//	    internal/bench) where the workloads are the same.
//	vsetcd echo --socket PATH
//	    serves a bare newline-delimited JSON echo on a Unix socket: the
//	    baseline of the sidecar's socket.
//	vsetcd socket --socket PATH [--clients 16]
//	    drives round trips (one request in flight per client) against a
//	    Unix socket: the sidecar's or the echo's.
//	vsetcd shell --cmd 'CMD ARGS' [--cmd ...] [--cycles N]
//	    times cycles of shell commands run one after the other.
//	vsetcd pair --workload W --leaseside FILE --etcd FILE
//	    prints one JSON line per figure of workload W compared: leaseside's
//	    figure, etcd's (or the echo's), and their ratio.
//	vsetcd chart --out FILE.png LINES...
//	    draws the ratios of the JSON lines in LINES files as a PNG chart.
//
// Every run that sees an answer its service's contract rules out (two
// holders of one lock, a token that does not grow, a lost keepalive, a
// failed command) exits 1 and measures nothing.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/leaseside/leaseside/internal/bench"
)

// commands maps a subcommand to its function, which parses args and writes
// its output to stdout.
var commands = map[string]func(ctx context.Context, args []string, stdout io.Writer) error{
	"etcd":   runEtcd,
	"echo":   runEcho,
	"socket": runSocket,
	"shell":  runShell,
	"pair":   runPair,
	"chart":  runChart,
}

// errUsage marks a command line that cannot run; it exits 2.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, errUsage), errors.Is(err, flag.ErrHelp):
		fmt.Fprintln(os.Stderr, "vsetcd:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "vsetcd:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || commands[args[0]] == nil {
		return fmt.Errorf("%w: vsetcd etcd|echo|socket|shell|pair|chart [flags] (see the package doc)", errUsage)
	}
	return commands[args[0]](ctx, args[1:], stdout)
}

// newFlags returns a flag set for subcommand name that reports its errors
// (wrapped in errUsage by parse) instead of exiting.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("vsetcd "+name, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	return fs
}

// parse parses args into fs and refuses positional arguments unless
// positional is true.
func parse(fs *flag.FlagSet, args []string, positional bool) error {
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if !positional && fs.NArg() > 0 {
		return fmt.Errorf("%w: %s: unexpected argument %q", errUsage, fs.Name(), fs.Arg(0))
	}
	return nil
}

// printReport writes rep as `leaseside bench --json` does.
func printReport(w io.Writer, rep *bench.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
