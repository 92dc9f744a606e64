package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/leaseside/leaseside/internal/bench"
)

// cmdList is a repeatable flag of commands, each split at spaces.
type cmdList [][]string

func (c *cmdList) String() string { return fmt.Sprint([][]string(*c)) }

func (c *cmdList) Set(s string) error {
	f := strings.Fields(s)
	if len(f) == 0 {
		return fmt.Errorf("empty command")
	}
	*c = append(*c, f)
	return nil
}

var _ flag.Value = (*cmdList)(nil)

// runShell times cycles of commands, as a shell script that takes a lock
// around its work would run them, and prints a report with the workload
// named by --workload.
func runShell(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("shell")
	var cmds cmdList
	fs.Var(&cmds, "cmd", "a command and its arguments, split at spaces; repeat for a cycle of several, run one after the other")
	cycles := fs.Int("cycles", 50, "cycles measured")
	warmup := fs.Int("warmup", 3, "cycles run first and not measured")
	workload := fs.String("workload", "shell", "the workload name of the report")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if len(cmds) == 0 || *cycles < 1 || *warmup < 0 {
		return fmt.Errorf("%w: need at least one --cmd and --cycles >= 1", errUsage)
	}
	res, err := timeCycles(ctx, cmds, *warmup, *cycles)
	if err != nil {
		return err
	}
	res.Workload = *workload
	return printReport(stdout, &bench.Report{Started: time.Now(), Results: []*bench.Result{res}})
}

// timeCycles runs warmup and then n cycles of cmds, each command after
// the one before has exited, and reports the time per cycle. Every command
// must exit 0: one that fails (a lock not taken, a release refused) fails
// the run.
func timeCycles(ctx context.Context, cmds [][]string, warmup, n int) (*bench.Result, error) {
	var lat bench.Latencies
	for k := range warmup + n {
		t0 := time.Now()
		for _, c := range cmds {
			var stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, c[0], c[1:]...)
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				return nil, fmt.Errorf("cycle %d: %s: %w: %s", k, strings.Join(c, " "), err, strings.TrimSpace(stderr.String()))
			}
		}
		if k >= warmup {
			lat = append(lat, time.Since(t0))
		}
	}
	var total time.Duration
	for _, d := range lat {
		total += d
	}
	lat = bench.Merge([]bench.Latencies{lat})
	var names []string
	for _, c := range cmds {
		names = append(names, "`"+strings.Join(c, " ")+"`")
	}
	res := &bench.Result{Setup: fmt.Sprintf("%d cycles (after %d not measured) of %s, one after the other", n, warmup, strings.Join(names, " then "))}
	res.Add("time per cycle mean", float64(total)/float64(n)/float64(time.Millisecond), "ms")
	res.Add("time per cycle p50", lat.MS(0.50), "ms")
	res.Add("time per cycle p99", lat.MS(0.99), "ms")
	res.Note("every command exited 0")
	return res, nil
}
