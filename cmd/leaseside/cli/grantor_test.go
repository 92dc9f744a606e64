package cli

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor"
	"github.com/leaseside/leaseside/grantor/pki"
)

// procTimeout bounds every wait on a process here: generous, since the
// machine is shared and slow at times. Passing tests never reach it.
const procTimeout = 90 * time.Second

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildDir  string
)

// leasesideBin builds the leaseside binary once per test binary, with the
// race detector when these tests run with it, and returns its path. It is
// built on first use rather than in TestMain, so that tests which do not
// start it (and the re-executed children of activation_test.go) do not
// wait for the build.
func leasesideBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "leaseside-cli-")
		if buildErr != nil {
			return
		}
		builtBin = filepath.Join(buildDir, "leaseside")
		args := []string{"build", "-o", builtBin}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "github.com/leaseside/leaseside/cmd/leaseside")...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			buildErr = fmt.Errorf("building leaseside: %v\n%s", err, out.String())
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// proc is a started leaseside process whose stderr is kept line by line.
type proc struct {
	name   string
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string
	change chan struct{} // closed and replaced at every line and at exit
	exited bool
	code   int
}

func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return startProcLines(t, name, false, args...)
}

// startProcLines is startProc keeping stdout's lines instead of
// stderr's when stdout is set (stderr then goes to the test's own).
func startProcLines(t *testing.T, name string, stdout bool, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(leasesideBin(t), args...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	pipe := cmd.StderrPipe
	if stdout {
		pipe, cmd.Stderr = cmd.StdoutPipe, os.Stderr
	}
	stderr, err := pipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, change: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.change)
			p.change = make(chan struct{})
			p.mu.Unlock()
		}
		io.Copy(io.Discard, stderr)
		err := cmd.Wait()
		p.mu.Lock()
		p.exited, p.code = true, cmd.ProcessState.ExitCode()
		if err != nil && p.code == 0 {
			p.code = -1
		}
		close(p.change)
		p.change = make(chan struct{})
		p.mu.Unlock()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		p.waitExit(t)
		if t.Failed() {
			t.Logf("--- %s:\n%s", name, p.output())
		}
	})
	return p
}

// mark is the index the next line will have.
func (p *proc) mark() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lines)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// waitLine waits for a line that contains every one of parts and returns
// it; it fails the test if the process exits first.
func (p *proc) waitLine(t *testing.T, parts ...string) string {
	t.Helper()
	return p.waitLineFrom(t, 0, parts...)
}

// waitLineFrom is waitLine from the line of index from on (mark).
func (p *proc) waitLineFrom(t *testing.T, from int, parts ...string) string {
	t.Helper()
	timer := time.NewTimer(procTimeout)
	defer timer.Stop()
	seen := from
	for {
		p.mu.Lock()
		for ; seen < len(p.lines); seen++ {
			l := p.lines[seen]
			if slices.IndexFunc(parts, func(s string) bool { return !strings.Contains(l, s) }) < 0 {
				p.mu.Unlock()
				return l
			}
		}
		exited, ch := p.exited, p.change
		p.mu.Unlock()
		if exited {
			t.Fatalf("%s exited before logging %q:\n%s", p.name, parts, p.output())
		}
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("%s: no line with %q after %v:\n%s", p.name, parts, procTimeout, p.output())
		}
	}
}

// find returns the first line from index from on that contains every one
// of parts, and where the search may go on.
func (p *proc) find(from int, parts ...string) (line string, next int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := from; i < len(p.lines); i++ {
		l := p.lines[i]
		if slices.IndexFunc(parts, func(s string) bool { return !strings.Contains(l, s) }) < 0 {
			return l, i + 1, true
		}
	}
	return "", len(p.lines), false
}

// waitAny waits until one of ps logs a line with every one of parts, and
// returns which one and the line.
func waitAny(t *testing.T, ps []*proc, parts ...string) (int, string) {
	t.Helper()
	timer := time.NewTimer(procTimeout)
	defer timer.Stop()
	for {
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)}}
		for i, p := range ps {
			p.mu.Lock()
			ch := p.change
			p.mu.Unlock()
			if l, _, ok := p.find(0, parts...); ok {
				return i, l
			}
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
		}
		if i, _, _ := reflect.Select(cases); i == 0 {
			t.Fatalf("none of the processes logged %q within %v", parts, procTimeout)
		}
	}
}

// waitExit waits for the process to exit and returns its exit code.
func (p *proc) waitExit(t *testing.T) int {
	t.Helper()
	timer := time.NewTimer(procTimeout)
	defer timer.Stop()
	for {
		p.mu.Lock()
		exited, code, ch := p.exited, p.code, p.change
		p.mu.Unlock()
		if exited {
			return code
		}
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("%s did not exit after %v", p.name, procTimeout)
		}
	}
}

var fieldRE = regexp.MustCompile(`\b(\w+)=("[^"]*"|\S+)`)

// field returns the value of key=value in a log line.
func field(line, key string) string {
	for _, m := range fieldRE.FindAllStringSubmatch(line, -1) {
		if m[1] == key {
			return strings.Trim(m[2], `"`)
		}
	}
	return ""
}

func writeKey(t *testing.T) string {
	t.Helper()
	key := make([]byte, 32)
	rand.Read(key)
	path := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runCLI runs the binary to completion and returns stdout, stderr and the
// exit code.
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(leasesideBin(t), args...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if err != nil && code == 0 {
		t.Fatalf("leaseside %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

// TestGrantorCluster starts three `leaseside grantor` processes with
// --bootstrap-expect 3 on loopback, checks `leaseside members`, that a
// grantor with another gossip key is refused, and that SIGTERM takes a
// grantor out of the cluster.
func TestGrantorCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	key := writeKey(t)
	grantorArgs := func(id, seed, key string) []string {
		args := []string{"grantor", "--node-id", id, "--data-dir", filepath.Join(t.TempDir(), id),
			"--rpc-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0",
			"--bootstrap-expect", "3"}
		if key != "" {
			args = append(args, "--gossip-key-file", key)
		}
		if seed != "" {
			args = append(args, "--join", seed)
		}
		return args
	}
	var procs []*proc
	var rpcs []string
	seed := ""
	for i := range 3 {
		id := fmt.Sprintf("g%d", i+1)
		args := grantorArgs(id, seed, key)
		if i == 0 {
			args = append(args, "--metrics-addr", "127.0.0.1:0")
		}
		p := startProc(t, id, args...)
		ready := p.waitLine(t, "leaseside grantor ready")
		for _, k := range []string{"rpc", "raft", "gossip"} {
			if v := field(ready, k); !strings.HasPrefix(v, "127.0.0.1:") || strings.HasSuffix(v, ":0") {
				t.Fatalf("ready line of %s: %s=%q, want a bound loopback address:\n%s", id, k, v, ready)
			}
		}
		if i == 0 {
			seed = field(ready, "gossip")
		}
		procs = append(procs, p)
		rpcs = append(rpcs, field(ready, "rpc"))
	}
	// One of them takes office; the others learn that it leads.
	li, _ := waitAny(t, procs, "grantor: took office")
	leader := fmt.Sprintf("g%d", li+1)
	for _, p := range procs {
		p.waitLine(t, "grantor: leader is "+leader)
	}

	// g1 serves its metrics.
	url := field(procs[0].waitLine(t, "serving metrics"), "addr")
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"leaseside_grantor_is_leader ", "leaseside_grantor_raft_commit_index ", `leaseside_grantor_verify_rounds_total{result="ok"}`,
		"leaseside_grantor_clock_wakeup_lateness_seconds_bucket", "go_goroutines "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics of g1 lack %q", want)
		}
	}

	all := strings.Join(rpcs, ",")
	stdout, stderr, code := runCLI(t, "members", "--grantors", all, "--json")
	if code != 0 {
		t.Fatalf("members --json: exit %d\n%s", code, stderr)
	}
	var m membersOutput
	if err := json.Unmarshal([]byte(stdout), &m); err != nil {
		t.Fatalf("members --json: %v\n%s", err, stdout)
	}
	if m.LeaderID != leader || len(m.Members) != 3 {
		t.Fatalf("members --json: leader %q, %d members:\n%s", m.LeaderID, len(m.Members), stdout)
	}
	for i, mm := range m.Members {
		id := fmt.Sprintf("g%d", i+1)
		state := "follower"
		if id == leader {
			state = "leader"
		}
		if mm.NodeID != id || mm.Name != id || mm.Role != "grantor" || !mm.Voter || mm.RaftState != state ||
			mm.GossipState != "alive" || mm.RPCAddr != rpcs[i] || mm.Version == "" {
			t.Errorf("member %d: %+v", i, mm)
		}
		if (id == leader) != (mm.LastContactMs < 0) {
			t.Errorf("member %s: last contact %dms (leader: %v)", id, mm.LastContactMs, id == leader)
		}
	}
	table, _, code := runCLI(t, "members", "--grantors", rpcs[(li+1)%3])
	if code != 0 || !strings.Contains(table, "NAME") || !strings.Contains(table, "RAFT-STATE") ||
		!strings.Contains(table, "leader: "+leader) || strings.Count(table, " alive ") != 3 {
		t.Errorf("members table (exit %d):\n%s", code, table)
	}

	// Another gossip key: refused, non-zero exit, and it says why.
	bad := startProc(t, "g4 (other key)", grantorArgs("g4", seed, writeKey(t))...)
	if code := bad.waitExit(t); code == 0 {
		t.Errorf("a grantor with another gossip key exited 0")
	}
	if out := bad.output(); !strings.Contains(out, "gossip key is wrong or missing") || strings.Contains(out, "grantor ready") {
		t.Errorf("a grantor with another gossip key said:\n%s", out)
	}
	// No key at all: refused too.
	if _, stderr, code := runCLI(t, grantorArgs("g5", seed, "")...); code == 0 || !strings.Contains(stderr, "this member has none") {
		t.Errorf("a grantor without a gossip key: exit %d:\n%s", code, stderr)
	}

	// Removing an unknown grantor fails with a message.
	if _, stderr, code := runCLI(t, "members", "remove", "nobody", "--grantors", all); code != ExitError || !strings.Contains(stderr, "no such server") {
		t.Errorf("members remove nobody: exit %d: %s", code, stderr)
	}

	// `grantor leave`: a follower leaves, says so, and its process exits 0
	// by itself; the leader's configuration no longer lists it.
	gone := (li + 2) % 3
	stdout, stderr, code = runCLI(t, "grantor", "leave", "--rpc-addr", rpcs[gone], "--json")
	var left leaveOutput
	if err := json.Unmarshal([]byte(stdout), &left); code != 0 || err != nil {
		t.Fatalf("grantor leave: exit %d (%v): %s%s", code, err, stdout, stderr)
	}
	if want := (leaveOutput{NodeID: fmt.Sprintf("g%d", gone+1), Outcome: "removed"}); left != want {
		t.Errorf("grantor leave printed %+v, want %+v", left, want)
	}
	if code := procs[gone].waitExit(t); code != 0 {
		t.Errorf("the grantor that left exited %d\n%s", code, procs[gone].output())
	}
	// The leader may log the new configuration a moment after the answer.
	procs[li].waitLine(t, "updating configuration", "command=RemoveServer", fmt.Sprintf("server-id=g%d", gone+1))
	if _, stderr, code := runCLI(t, "grantor", "leave", "--rpc-addr", rpcs[gone]); code != ExitUnavailable || !strings.Contains(stderr, "no grantor answers") {
		t.Errorf("grantor leave of a stopped grantor: exit %d: %s", code, stderr)
	}

	// SIGTERM: a follower stops and stays a voter of the configuration.
	fi := (li + 1) % 3
	f := procs[fi]
	f.cmd.Process.Signal(syscall.SIGTERM)
	if code := f.waitExit(t); code != 0 {
		t.Fatalf("grantor after SIGTERM: exit %d", code)
	}
	if out := f.output(); !strings.Contains(out, "stays in the cluster") || strings.Contains(out, "leaving the cluster") {
		t.Errorf("the follower did not say it stays in the cluster:\n%s", out)
	}
	stdout, stderr, code = runCLI(t, "members", "--grantors", rpcs[li], "--json")
	if code != 0 {
		t.Fatalf("members: exit %d: %s", code, stderr)
	}
	m = membersOutput{}
	if err := json.Unmarshal([]byte(stdout), &m); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mm := range m.Members {
		if mm.NodeID == fmt.Sprintf("g%d", fi+1) {
			found = true
			if !mm.Voter {
				t.Errorf("the grantor stopped with SIGTERM is no longer a voter: %+v", mm)
			}
		}
	}
	if !found {
		t.Errorf("the grantor stopped with SIGTERM is not listed:\n%s", stdout)
	}
	// The leader stops cleanly too.
	for i, p := range procs {
		if i != li {
			continue
		}
		p.cmd.Process.Signal(syscall.SIGTERM)
		if code := p.waitExit(t); code != 0 {
			t.Errorf("g%d after SIGTERM: exit %d\n%s", i+1, code, p.output())
		}
	}
}

func TestGrantorConfigFile(t *testing.T) {
	o := defaultGrantorOptions()
	if err := loadGrantorConfig(filepath.Join("..", "..", "..", "packaging", "etc", "grantor.json"), &o); err != nil {
		t.Fatalf("the packaged grantor.json: %v", err)
	}
	want := grantorOptions{NodeID: "grantor1", DataDir: "/var/lib/leaseside", RPCAddr: "0.0.0.0:7401", RaftAddr: "192.0.2.1:7402",
		GossipAddr: "192.0.2.1:7403", Join: []string{"192.0.2.2:7403", "192.0.2.3:7403"}, BootstrapExpect: 3,
		MetricsAddr: "127.0.0.1:7404", Timing: clockwatch.Timing{Rho: 0.0005, Epsilon: 100 * time.Millisecond},
		Limits: grantor.DefaultAccountLimits(), Raft: defaultGrantorOptions().Raft,
		GossipKeyFile: "/etc/leaseside/gossip.key", MaxRequestBytes: 256 << 10,
		TLS: pki.Files{CA: "/etc/leaseside/tls/ca.pem", Cert: "/etc/leaseside/tls/grantor-grantor1.pem", Key: "/etc/leaseside/tls/grantor-grantor1-key.pem"}}
	if fmt.Sprint(o) != fmt.Sprint(want) {
		t.Errorf("packaged config read as\n%+v\nwant\n%+v", o, want)
	}

	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		body    string
		wantErr string
	}{
		{name: "unknown key", body: `{"node_idd": "x"}`, wantErr: "unknown field"},
		{name: "bad epsilon", body: `{"epsilon": "soon"}`, wantErr: "epsilon"},
		{name: "bad raft timeout", body: `{"raft_leader_lease_timeout": "5"}`, wantErr: "raft_leader_lease_timeout"},
		{name: "not json", body: `node_id = x`, wantErr: "invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := defaultGrantorOptions()
			err := loadGrantorConfig(write(tt.name+".json", tt.body), &o)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one with %q", err, tt.wantErr)
			}
		})
	}

	// Flags win over the file; the file over the defaults.
	path := write("g.json", `{"node_id": "from-file", "rpc_addr": "127.0.0.1:9", "bootstrap_expect": 5, "join": ["a:1"]}`)
	o, err := parseGrantorFlags("--config", path, "--rpc-addr", "127.0.0.1:10", "--join", "b:2, c:3")
	if err != nil {
		t.Fatalf("flags: %v", err)
	}
	if o.NodeID != "from-file" || o.RPCAddr != "127.0.0.1:10" || o.BootstrapExpect != 5 || !slices.Equal(o.Join, []string{"b:2", "c:3"}) {
		t.Errorf("options %+v", o)
	}
	// The raft timeouts, from the file and from flags.
	path = write("raft.json", `{"node_id": "n", "raft_heartbeat_timeout": "2s", "raft_election_timeout": "3s", "raft_leader_lease_timeout": "1s"}`)
	o, err = parseGrantorFlags("--config", path, "--raft-election-timeout", "4s", "--raft-commit-timeout", "20ms")
	if err != nil {
		t.Fatalf("flags: %v", err)
	}
	if want := (raftTimeouts{Heartbeat: 2 * time.Second, Election: 4 * time.Second, LeaderLease: time.Second, Commit: 20 * time.Millisecond}); o.Raft != want {
		t.Errorf("raft timeouts %+v, want %+v", o.Raft, want)
	}
	if cfg := o.config(); cfg.HeartbeatTimeout != 2*time.Second || cfg.ElectionTimeout != 4*time.Second ||
		cfg.LeaderLeaseTimeout != time.Second || cfg.CommitTimeout != 20*time.Millisecond {
		t.Errorf("grantor config %+v", cfg)
	}
	var stderr bytes.Buffer
	if code := Main([]string{"grantor", "--node-id", "n", "--raft-heartbeat-timeout", "2s", "--raft-election-timeout", "1s"}, io.Discard, &stderr); code != ExitUsage ||
		!strings.Contains(stderr.String(), "raft election timeout 1s is below the raft heartbeat timeout 2s") {
		t.Errorf("grantor with an election timeout below the heartbeat timeout: exit %d\n%s", code, stderr.String())
	}
	for _, args := range [][]string{{"--bootstrap-expect", "-1"}, {"extra"}, {"--node-id", ""}, {"--bootstrap-expect", "x"}} {
		var stderr bytes.Buffer
		if code := Main(append([]string{"grantor"}, args...), io.Discard, &stderr); code != ExitUsage {
			t.Errorf("grantor %v: exit %d, want a usage error (%d)\n%s", args, code, ExitUsage, stderr.String())
		}
	}
}

// parseGrantorFlags returns the grantor's options for a command line.
func parseGrantorFlags(args ...string) (grantorOptions, error) {
	var g grantorFlagValues
	fs := pflag.NewFlagSet("grantor", pflag.ContinueOnError)
	g.register(fs)
	if err := fs.Parse(args); err != nil {
		return grantorOptions{}, err
	}
	return g.options(fs)
}
