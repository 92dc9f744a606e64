package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/leaseside/leaseside/internal/bench"
	"github.com/leaseside/leaseside/internal/bench/hosts"
)

func newBenchCmd(e *env) *cobra.Command {
	cfg := bench.DefaultConfig()
	hc := hosts.DefaultConfig()
	var grantors, workload, grantorPIDs string
	var jsonOut bool
	var tf tlsFlags
	cmd := &cobra.Command{
		Use:   "bench --grantors ADDR[,ADDR...]",
		Short: "measure a grantor cluster's throughput and latency",
		Long: `Measures a grantor cluster as a client of its gRPC contract: grants per
second, handoffs of one contended name, keepalives, the leader's memory
per live lease, grants per second with few and with a great many live
leases (grants-growth), and the leader's keepalive CPU per host with few
and with many leases a host (keepalives-growth), each against its target. It starts nothing: the cluster is
the caller's (docs/performance.md). Exit 1 when a check of the grantors'
answers finds a violation.

--workload hosts (run alone) simulates --hosts hosts, each a sidecar of
its own run in this process with its own mutual-TLS connection, holding
--leases-per-host leases of term --term: the leader's CPU and RSS, the
renewals' lag against d/3, leases lost; with --kill-leader, a kill -9 of
the leader at full load (docs/scale.md).`,
		Example: `  leaseside bench --grantors 127.0.0.1:7401,127.0.0.1:7411,127.0.0.1:7421
  leaseside bench --grantors 127.0.0.1:7401 --workload memory --leases 1000000 \
      --leader-pid 1234 --leader-metrics http://127.0.0.1:9464/metrics --json
  leaseside bench --grantors 127.0.0.1:7401,127.0.0.1:7405,127.0.0.1:7409 --grantor-pids 11,12,13 \
      --workload hosts --hosts 10000 --leases-per-host 1 --term 15s --kill-leader 20s`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if workload == hostsShard {
				return runHostsShard(cmd.Context(), e, tf)
			}
			if grantors == "" {
				return usagef("bench needs --grantors")
			}
			cfg.Grantors = strings.Split(grantors, ",")
			if workload == hosts.Workload {
				return runHosts(cmd, e, hc, grantors, grantorPIDs, tf, jsonOut)
			}
			if workload != "all" {
				cfg.Workloads = strings.Split(workload, ",")
			}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			creds, err := tf.credentials()
			if err != nil {
				return fail(e, err)
			}
			cfg.Credentials = creds
			return runBench(cmd.Context(), e, cfg, jsonOut)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&grantors, "grantors", "", "the grantors' gRPC addresses, comma-separated (required)")
	fs.StringVar(&workload, "workload", "all", "what to measure: "+strings.Join(bench.Workloads, ", ")+", a comma-separated list, or all; or hosts, alone")
	fs.BoolVar(&jsonOut, "json", false, "print the report as JSON")
	tf.register(fs, false)
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long each timed workload is measured")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "how long each timed workload runs before it is measured")
	fs.IntVar(&cfg.Conns, "conns", cfg.Conns, "gRPC connections per grantor")
	fs.IntVar(&cfg.GrantOwners, "owners", cfg.GrantOwners, "grants: concurrent owners, each on its own name")
	fs.IntVar(&cfg.HandoffOwners, "contenders", cfg.HandoffOwners, "handoffs: owners contending for one name")
	fs.DurationVar(&cfg.Hold, "hold", cfg.Hold, "handoffs: how long each owner holds the name")
	fs.IntVar(&cfg.Sessions, "sessions", cfg.Sessions, "keepalives: sessions, each with one KeepAlive stream")
	fs.IntVar(&cfg.SessionLeases, "session-leases", cfg.SessionLeases, "keepalives: leases per session, all renewed by each message")
	fs.IntVar(&cfg.KeepAliveInFlight, "in-flight", cfg.KeepAliveInFlight, "keepalives: messages in flight per stream")
	fs.IntVar(&cfg.Leases, "leases", cfg.Leases, "memory: live leases")
	fs.IntVar(&cfg.MemSessions, "mem-sessions", cfg.MemSessions, "memory: sessions the leases are spread over")
	fs.IntVar(&cfg.LeaderPID, "leader-pid", 0, "the leader's pid on this host: its CPU (every timed workload; keepalives-growth needs it) and VmRSS (memory) from /proc")
	fs.StringVar(&cfg.LeaderMetrics, "leader-metrics", "", "memory: the leader's Prometheus URL, e.g. http://127.0.0.1:9464/metrics (Go heap in use)")
	fs.DurationVar(&cfg.Settle, "settle", cfg.Settle, "memory: longest wait for a leader GC before each reading (needs --leader-metrics)")
	fs.IntVar(&cfg.LiveFew, "live-few", cfg.LiveFew, "grants-growth: live leases held by other sessions in the first measurement")
	fs.IntVar(&cfg.LiveMany, "live-many", cfg.LiveMany, "grants-growth: live leases held by other sessions in the second measurement")
	fs.IntVar(&cfg.LiveSessions, "live-sessions", cfg.LiveSessions, "grants-growth: sessions the live leases are spread over (each time leases are added)")
	fs.IntVar(&cfg.GrowthHosts, "growth-hosts", cfg.GrowthHosts, "keepalives-growth: hosts (sessions), each with one KeepAlive stream")
	fs.IntVar(&cfg.HostLeasesFew, "host-leases-few", cfg.HostLeasesFew, "keepalives-growth: leases a host in the first measurement")
	fs.IntVar(&cfg.HostLeasesMany, "host-leases-many", cfg.HostLeasesMany, "keepalives-growth: leases a host in the second measurement")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "keepalives, memory, grants-growth: sessions acquiring or releasing at once")
	fs.IntVar(&hc.Hosts, "hosts", hc.Hosts, "hosts: simulated hosts, each a sidecar with its own connection")
	fs.IntVar(&hc.LeasesPerHost, "leases-per-host", hc.LeasesPerHost, "hosts: leases each host holds")
	fs.DurationVar(&hc.Term, "term", hc.Term, "hosts: the leases' term d")
	fs.StringVar(&grantorPIDs, "grantor-pids", "", "hosts: the grantors' pids on this host, comma-separated, in the order of --grantors (required)")
	fs.DurationVar(&hc.KillLeader, "kill-leader", 0, "hosts: kill -9 the leader this long into the measured duration (0: no)")
	fs.DurationVar(&hc.Recovery, "recovery", hc.Recovery, "hosts: how long to wait, after the kill, for every host to renew at the new leader")
	fs.IntVar(&hc.Sources, "sources", hc.Sources, "hosts: loopback source addresses the hosts dial from (a grantor takes 256 connections from one)")
	return cmd
}

// hostsShard is the workload of a shard process of the hosts workload,
// which runHosts starts (hosts.Shard): its stdin and stdout are the
// workload's, not a person's.
const hostsShard = "hosts-shard"

// runHostsShard runs one shard process of the hosts workload.
func runHostsShard(ctx context.Context, e *env, tf tlsFlags) error {
	creds, err := tf.credentials()
	if err != nil {
		return fail(e, err)
	}
	if err := hosts.Shard(ctx, creds, os.Stdin, e.stdout); err != nil {
		return fail(e, err)
	}
	return nil
}

// runHosts runs the hosts workload. Its --duration, --warmup and
// --concurrency are the flags of the other workloads, with its own
// defaults unless given.
func runHosts(cmd *cobra.Command, e *env, hc hosts.Config, grantors, pids string, tf tlsFlags, jsonOut bool) error {
	fs := cmd.Flags()
	hc.Grantors = strings.Split(grantors, ",")
	if pids == "" {
		return usagef("bench --workload hosts needs --grantor-pids")
	}
	for _, p := range strings.Split(pids, ",") {
		pid, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return usagef("--grantor-pids: %q is not a process id", p)
		}
		hc.GrantorPIDs = append(hc.GrantorPIDs, pid)
	}
	for _, f := range []struct {
		name string
		dst  *time.Duration
	}{{"duration", &hc.Duration}, {"warmup", &hc.Warmup}} {
		if fs.Changed(f.name) {
			*f.dst, _ = fs.GetDuration(f.name)
		}
	}
	if fs.Changed("concurrency") {
		hc.Concurrency, _ = fs.GetInt("concurrency")
	}
	if err := hc.Validate(); err != nil {
		return usageError{err}
	}
	creds, err := tf.credentials()
	if err != nil {
		return fail(e, err)
	}
	hc.Credentials = creds
	hc.Progress = e.stderr
	hc.ShardArgs = []string{"bench", "--workload", hostsShard}
	if tf.files.Enabled() {
		hc.ShardArgs = append(hc.ShardArgs, "--tls-ca", tf.files.CA, "--tls-cert", tf.files.Cert, "--tls-key", tf.files.Key)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := hosts.Run(ctx, hc)
	if rep != nil {
		if jsonOut {
			printJSON(e.stdout, rep)
		} else {
			printBench(e.stdout, rep)
		}
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "leaseside: bench: %v\n", err)
		return exitCode(ExitError)
	}
	return nil
}

// runBench measures a grantor cluster as a client of its gRPC contract.
func runBench(ctx context.Context, e *env, cfg bench.Config, jsonOut bool) error {
	cfg.Progress = e.stderr

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, cfg)
	if rep != nil {
		if jsonOut {
			printJSON(e.stdout, rep)
		} else {
			printBench(e.stdout, rep)
		}
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "leaseside: bench: %v\n", err)
		if errors.Is(err, bench.ErrViolation) {
			return exitCode(ExitError)
		}
		if rep == nil || rep.Leader == "" {
			return exitCode(ExitUnavailable)
		}
		return exitCode(ExitError)
	}
	return nil
}

func printBench(w io.Writer, rep *bench.Report) {
	fmt.Fprintf(w, "grantors %s, leader %s\n", strings.Join(rep.Grantors, ","), rep.Leader)
	for _, r := range rep.Results {
		fmt.Fprintf(w, "\n%s (%.1fs): %s\n", r.Workload, r.Elapsed.Seconds(), r.Setup)
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		for _, f := range r.Figures {
			target, verdict := "", ""
			if f.Target != nil {
				target = fmt.Sprintf("target %s %s", f.Target.Op, formatValue(f.Target.Value, f.Unit))
				verdict = "met"
				if !*f.Met {
					verdict = "MISSED"
				}
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", f.Name, formatValue(f.Value, f.Unit), target, verdict)
		}
		tw.Flush()
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
	if m := rep.Misses(); len(m) > 0 {
		fmt.Fprintf(w, "\nmissed targets: %s\n", strings.Join(m, "; "))
	} else if len(rep.Results) > 0 {
		fmt.Fprintln(w, "\nall targets met")
	}
}

// formatValue prints v in its unit: rates and counts as integers with
// thousands separators, milliseconds with two decimals.
func formatValue(v float64, unit string) string {
	switch unit {
	case "ms":
		return fmt.Sprintf("%.2f ms", v)
	case "cores":
		return fmt.Sprintf("%.2f cores", v)
	case "s":
		return fmt.Sprintf("%.2f s", v)
	case "MiB":
		return fmt.Sprintf("%.1f MiB", v)
	case "B/lease":
		return fmt.Sprintf("%.0f B/lease", v)
	case "x":
		return fmt.Sprintf("%.2fx", v)
	case "µs":
		return thousands(int64(v+0.5)) + " µs"
	case "/s":
		return thousands(int64(v+0.5)) + "/s"
	}
	return thousands(int64(v + 0.5))
}

func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
