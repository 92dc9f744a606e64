package bench_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/internal/bench"
)

// bin is the leaseside binary, built once. It is built without -race: the
// binary's races are the integration tests' business, and these smoke
// tests only need a grantor that answers.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "leaseside-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "leaseside")
	build := exec.Command("go", "build", "-o", bin, "github.com/leaseside/leaseside/cmd/leaseside")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building leaseside:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// timeout bounds every wait in these tests; passing tests never reach it.
const timeout = 60 * time.Second

// dev is a running `leaseside dev`: its pid, the embedded grantor's gRPC
// address and its metrics URL.
type dev struct {
	pid     int
	rpc     string
	metrics string
}

var (
	readyRPC    = regexp.MustCompile(`leaseside dev ready.* grantor_rpc=(\S+)`)
	metricsLine = regexp.MustCompile(`serving metrics.* addr=(\S+)`)
)

// startDev starts `leaseside dev` on loopback ports of its choosing and
// waits for its ready and metrics lines.
func startDev(t *testing.T) dev {
	t.Helper()
	sockDir, err := os.MkdirTemp("", "lsb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	cmd := exec.Command(bin, "dev", "--socket", filepath.Join(sockDir, "s.sock"), "--data-dir", t.TempDir(),
		"--rpc-addr", "127.0.0.1:0", "--insecure", "--metrics-addr", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	found := make(chan dev, 1)
	exited := make(chan error, 1)
	go func() {
		d := dev{pid: cmd.Process.Pid}
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if m := readyRPC.FindStringSubmatch(sc.Text()); m != nil {
				d.rpc = m[1]
			}
			if m := metricsLine.FindStringSubmatch(sc.Text()); m != nil && d.rpc != "" {
				d.metrics = m[1]
				found <- d
			}
		}
		io.Copy(io.Discard, stderr)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("leaseside dev log:\n%s", log.String())
		}
	})
	select {
	case d := <-found:
		return d
	case err := <-exited:
		exited <- err
		t.Fatalf("leaseside dev exited before ready: %v", err)
	case <-time.After(timeout):
		t.Fatalf("leaseside dev not ready after %v", timeout)
	}
	return dev{}
}

// smallConfig sizes every workload to run in well under a second.
func smallConfig(d dev) bench.Config {
	cfg := bench.DefaultConfig()
	cfg.Grantors = []string{d.rpc}
	cfg.Duration = 300 * time.Millisecond
	cfg.Warmup = 100 * time.Millisecond
	cfg.Conns = 2
	cfg.GrantOwners = 4
	cfg.HandoffOwners = 4
	cfg.Sessions = 8
	cfg.SessionLeases = 10
	cfg.Leases = 400
	cfg.MemSessions = 8
	cfg.LiveFew = 20
	cfg.LiveMany = 200
	cfg.LiveSessions = 4
	cfg.GrowthHosts = 2
	cfg.HostLeasesFew = 2
	cfg.HostLeasesMany = 20
	cfg.Concurrency = 8
	cfg.LeaderPID = d.pid
	cfg.LeaderMetrics = d.metrics
	cfg.Settle = 0
	return cfg
}

// positive fails unless every named figure of res is there and above 0.
func positive(t *testing.T, res *bench.Result, names ...string) {
	t.Helper()
	for _, n := range names {
		f, ok := res.Figure(n)
		if !ok {
			t.Errorf("%s: no figure %q in %+v", res.Workload, n, res.Figures)
			continue
		}
		if !(f.Value > 0) {
			t.Errorf("%s: %s = %v, want > 0", res.Workload, n, f.Value)
		}
	}
}

// ratioOf fails unless figure ratio of res is figure num over figure den,
// with a target.
func ratioOf(t *testing.T, res *bench.Result, ratio, num, den string) {
	t.Helper()
	r, _ := res.Figure(ratio)
	n, _ := res.Figure(num)
	d, _ := res.Figure(den)
	if math.Abs(r.Value-n.Value/d.Value) > 1e-9*r.Value || r.Target == nil {
		t.Errorf("%s = %+v is not %v / %v with a target", ratio, r, n.Value, d.Value)
	}
}

func TestWorkloads(t *testing.T) {
	d := startDev(t)
	tests := []struct {
		workload string
		positive []string
		check    func(t *testing.T, res *bench.Result)
	}{
		{
			workload: bench.Grants,
			positive: []string{"grants/s (each with its release)", "grants measured", "acquire latency p50", "release latency p99", "bench client CPU"},
		},
		{
			workload: bench.Handoffs,
			positive: []string{"handoffs/s", "handoffs measured", "handoff latency p50", "handoff latency p99"},
		},
		{
			workload: bench.KeepAlives,
			positive: []string{"keepalive messages/s", "lease renewals/s", "keepalive replies measured", "keepalive round trip p50"},
			check: func(t *testing.T, res *bench.Result) {
				msgs, _ := res.Figure("keepalive messages/s")
				renewals, _ := res.Figure("lease renewals/s")
				if math.Abs(renewals.Value-10*msgs.Value) > 1e-9*renewals.Value {
					t.Errorf("renewals/s %v is not 10 x messages/s %v: every message renews all 10 leases", renewals.Value, msgs.Value)
				}
			},
		},
		{
			workload: bench.Memory,
			positive: []string{"leader RSS before", "leader RSS after", "leader heap in use after", "setup grants/s"},
			check: func(t *testing.T, res *bench.Result) {
				// 400 leases are too few for a per-lease figure worth a
				// bound; it must be there, with its target.
				for _, n := range []string{"leader RSS per live lease", "leader Go heap in use per live lease"} {
					if f, ok := res.Figure(n); !ok || f.Target == nil || f.Met == nil {
						t.Errorf("figure %q missing or without target: %+v", n, f)
					}
				}
			},
		},
		{
			workload: bench.GrantsGrowth,
			positive: []string{"grants/s with 20 live leases", "grants/s with 200 live leases", "acquire latency p50 with 200 live leases",
				"grants/s with 200 over grants/s with 20 live leases"},
			check: func(t *testing.T, res *bench.Result) {
				ratioOf(t, res, "grants/s with 200 over grants/s with 20 live leases",
					"grants/s with 200 live leases", "grants/s with 20 live leases")
			},
		},
		{
			workload: bench.KeepAlivesGrowth,
			positive: []string{"keepalive messages/s, 2 leases a host", "keepalive messages/s, 20 leases a host",
				"leader CPU per keepalive message, 2 leases a host", "leader CPU per keepalive message, 20 leases a host",
				"leader CPU per host, 20 over 2 leases a host",
				"leader CPU per host and second, 2 leases a host, a keepalive every 5s", "leader CPU per host and second, 20 leases a host, a keepalive every 5s"},
			check: func(t *testing.T, res *bench.Result) {
				ratioOf(t, res, "leader CPU per host, 20 over 2 leases a host",
					"leader CPU per keepalive message, 20 leases a host", "leader CPU per keepalive message, 2 leases a host")
				for _, per := range []int{2, 20} {
					msg, _ := res.Figure(fmt.Sprintf("leader CPU per keepalive message, %d leases a host", per))
					host, _ := res.Figure(fmt.Sprintf("leader CPU per host and second, %d leases a host, a keepalive every 5s", per))
					if math.Abs(host.Value-msg.Value/5) > 1e-9*host.Value {
						t.Errorf("%d leases a host: CPU per host and second %v µs is not a fifth of the CPU per message %v µs", per, host.Value, msg.Value)
					}
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.workload, func(t *testing.T) {
			cfg := smallConfig(d)
			cfg.Workloads = []string{tc.workload}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			rep, err := bench.Run(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Results) != 1 || rep.Results[0].Workload != tc.workload {
				t.Fatalf("results %+v, want one of %s", rep.Results, tc.workload)
			}
			if rep.Leader != d.rpc {
				t.Errorf("leader %q, want %q", rep.Leader, d.rpc)
			}
			res := rep.Results[0]
			positive(t, res, tc.positive...)
			if len(res.Notes) == 0 {
				t.Errorf("no notes: the checks that passed are not stated")
			}
			if tc.check != nil {
				tc.check(t, res)
			}
		})
	}
}

// The CLI runs every workload and prints the report as JSON.
func TestCLIJSON(t *testing.T) {
	d := startDev(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench", "--grantors", d.rpc, "--json",
		"--duration", "200ms", "--warmup", "50ms", "--conns", "2", "--owners", "2", "--contenders", "3",
		"--sessions", "4", "--session-leases", "5", "--leases", "100", "--mem-sessions", "4", "--concurrency", "4",
		"--live-few", "10", "--live-many", "30", "--live-sessions", "2",
		"--growth-hosts", "2", "--host-leases-few", "1", "--host-leases-many", "5",
		"--leader-pid", strconv.Itoa(d.pid))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("leaseside bench: %v\n%s", err, stderr.String())
	}
	var rep bench.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("output is not a report: %v\n%s", err, stdout.String())
	}
	var got []string
	for _, r := range rep.Results {
		got = append(got, r.Workload)
	}
	if strings.Join(got, ",") != strings.Join(bench.Workloads, ",") {
		t.Errorf("workloads %v, want %v", got, bench.Workloads)
	}
}

// The CLI refuses a command line it cannot run, with the usage exit code.
func TestCLIUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{name: "no grantors", args: []string{"bench"}},
		{name: "unknown workload", args: []string{"bench", "--grantors", "127.0.0.1:1", "--workload", "nap"}},
		{name: "memory without pid or metrics", args: []string{"bench", "--grantors", "127.0.0.1:1", "--workload", "memory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := exec.Command(bin, tc.args...).Run()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
				t.Errorf("leaseside %v: %v, want exit 2", tc.args, err)
			}
		})
	}
}

// notLeader is a grantor that is not the leader and names one that is.
type notLeader struct {
	grantorpb.UnimplementedGrantorServer
	leader string
}

func (s *notLeader) err() error {
	st, err := status.New(codes.FailedPrecondition, "not the leader").
		WithDetails(&grantorpb.NotLeader{LeaderRpcAddr: s.leader})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func (s *notLeader) Acquire(context.Context, *grantorpb.AcquireRequest) (*grantorpb.AcquireResponse, error) {
	return nil, s.err()
}

func (s *notLeader) Release(context.Context, *grantorpb.ReleaseRequest) (*grantorpb.ReleaseResponse, error) {
	return nil, s.err()
}

// Given only a follower, the bench follows its NotLeader to the leader.
func TestFollowsNotLeader(t *testing.T) {
	d := startDev(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	grantorpb.RegisterGrantorServer(srv, &notLeader{leader: d.rpc})
	go srv.Serve(ln)
	defer srv.Stop()

	cfg := smallConfig(d)
	cfg.Grantors = []string{ln.Addr().String()}
	cfg.Workloads = []string{bench.Grants}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Leader != d.rpc {
		t.Errorf("leader %q, want %q (named by the follower)", rep.Leader, d.rpc)
	}
	positive(t, rep.Results[0], "grants measured")
	if !strings.Contains(strings.Join(rep.Results[0].Notes, "\n"), "NotLeader redirects") {
		t.Errorf("notes do not mention the redirects: %q", rep.Results[0].Notes)
	}
}
