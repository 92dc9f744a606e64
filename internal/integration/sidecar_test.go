package integration

import (
	"bufio"
	"encoding/json"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

// An owner process killed with kill -9 frees its lease as soon as the
// daemon's pidfd sees it go (not when the term runs out), after the
// lease's lock-delay if it has one. A waiter queued at the grantor gets it.
func TestKilledOwnerFreesLease(t *testing.T) {
	t.Parallel()
	socket := tempSocket(t)
	startDev(t, socket, t.TempDir())
	const term = 60 * time.Second
	for _, lockDelay := range []time.Duration{0, 1500 * time.Millisecond} {
		t.Run("lock-delay "+lockDelay.String(), func(t *testing.T) {
			name := "jobs/kill9-" + strconv.Itoa(int(lockDelay.Milliseconds()))
			owner := exec.Command("sleep", "1000")
			if err := owner.Start(); err != nil {
				t.Fatal(err)
			}
			defer owner.Process.Kill()
			r := cli(t, socket, "acquire", name, "--ttl", term.String(), "--owner-pid", strconv.Itoa(owner.Process.Pid), "--lock-delay", lockDelay.String()).must(t, 0)
			first := token(t, r.stdout)

			waiter := exec.Command(bin, "acquire", name, "--socket", socket, "--ttl", "5s", "--wait", "50s", "--detached")
			out, done := background(t, waiter)
			// The waiter may reach the grantor's queue before or after the
			// kill; either way it is granted once the owner's exit is seen.
			start := clockwatch.System.Now()
			owner.Process.Signal(syscall.SIGKILL)
			owner.Wait()
			got := token(t, readLineT(t, out))
			elapsed := clockwatch.System.Now().Sub(start)
			if res := waitResult(t, done); res.code != 0 {
				t.Fatalf("waiter exit %d: %s", res.code, res.stderr)
			}
			if got <= first {
				t.Fatalf("waiter's token %d not above the dead owner's %d", got, first)
			}
			if elapsed < lockDelay {
				t.Fatalf("lease handed on %v after the kill, inside the lock-delay %v", elapsed, lockDelay)
			}
			if elapsed >= term/2 {
				t.Fatalf("lease handed on %v after the kill: that is the term running out, not the owner's exit being seen", elapsed)
			}
			t.Logf("kill -9 to next grant: %v (lock-delay %v)", elapsed, lockDelay)
			cli(t, socket, "release", name).must(t, 0)
		})
	}
}

// When the grantor becomes unreachable, `run` stops its command before
// the holder's deadline (and so before the grantor could give the lease to
// anyone else): a command that exits on SIGTERM, and one that ignores it
// and needs SIGKILL.
func TestRunStopsCommandWhenGrantorUnreachable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		script string
	}{
		{name: "exits on SIGTERM", script: `trap 'exit 0' TERM; echo $$; ` + aliveLoop},
		{name: "ignores SIGTERM", script: `trap '' TERM; echo $$; ` + aliveLoop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			socket := tempSocket(t)
			dev := startDevInNetns(t, socket, t.TempDir())
			alive := filepath.Join(t.TempDir(), "alive")
			run := exec.Command(bin, "run", "jobs/cut-off", "--socket", socket, "--ttl", "6s", "--", "sh", "-c", tc.script)
			run.Env = append(os.Environ(), "ALIVE="+alive)
			out, done := background(t, run)
			child := atoi(t, readLineT(t, out))

			dev.netnsLoopback(t, "down") // the grantor is now out of reach
			r := cli(t, socket, "status", "--json").must(t, 0)
			deadline := clockwatch.Instant(deadlineOf(t, r.stdout, "jobs/cut-off"))
			died := waitExit(t, child)
			res := waitResult(t, done)
			if res.code != 79 {
				t.Fatalf("run exit %d, want 79 (lost): %s", res.code, res.stderr)
			}
			// The command's own last record of BOOTTIME says when it last
			// ran (to within its loop's 50 ms and /proc/uptime's 10 ms),
			// however late this test saw it gone. Past the deadline only
			// a run that says it was late may let it run.
			last := lastAlive(t, alive)
			if over := last.Sub(deadline); over > 0 && !strings.Contains(res.stderr, "after the deadline") {
				t.Fatalf("the command still ran %v past the holder's deadline (its own record), and run did not say it was late: %s", over, res.stderr)
			}
			t.Logf("command last ran %v before the deadline (seen gone %v before it); run: %s", deadline.Sub(last), deadline.Sub(died), strings.TrimSpace(res.stderr))
		})
	}
}

// The ACL refuses a uid it does not list, and a refused caller changes
// nothing.
func TestACLRefusesUnlistedUID(t *testing.T) {
	t.Parallel()
	const nobody = 65534
	dir, err := os.MkdirTemp("", "lsacl")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(bin), 0o755)
	socket := filepath.Join(dir, "s.sock")
	conf := filepath.Join(dir, "conf.json")
	os.WriteFile(conf, []byte(`{"acl":[{"uids":[12345],"prefixes":["jobs/"]}]}`), 0o644)
	startDev(t, socket, t.TempDir(), "--config", conf, "--socket-group", strconv.Itoa(nobody))

	asNobody := func(args ...string) result {
		cmd := exec.Command(bin, append([]string{args[0], "--socket", socket}, args[1:]...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return result{code: code, stdout: o.String(), stderr: e.String()}
	}
	r := asNobody("acquire", "jobs/a", "--detached")
	if r.code == 0 || !strings.Contains(r.stderr, "permission denied: uid") {
		t.Fatalf("unlisted uid: exit %d, stderr %q; want permission denied", r.code, r.stderr)
	}
	if r := cli(t, socket, "status", "--json").must(t, 0); strings.Contains(r.stdout, "jobs/a") {
		t.Fatalf("a refused acquire left a lease: %s", r.stdout)
	}
	asNobody("status").must(t, 0)                                // the socket itself is open to the group
	cli(t, socket, "acquire", "jobs/a", "--detached").must(t, 0) // root may
}

// A waiter is woken when the lease frees, without polling: while it waits,
// no further acquire requests go to the grantor.
func TestWaiterWokenWithoutPolling(t *testing.T) {
	t.Parallel()
	socket := tempSocket(t)
	addr := startDev(t, socket, t.TempDir(), "--metrics-addr", "127.0.0.1:0").metricsAddr(t)
	cli(t, socket, "acquire", "jobs/queue", "--detached").must(t, 0)

	// Another owner: this test process (the CLI binds to its parent).
	waiter := exec.Command(bin, "acquire", "jobs/queue", "--socket", socket, "--wait", "50s")
	out, done := background(t, waiter)
	// Give a polling implementation ample time to show itself.
	<-time.After(3 * time.Second)
	if n := metric(t, addr, "leaseside_sidecar_grantor_acquire_requests_total"); n != 2 {
		t.Fatalf("%v acquire requests reached the grantor while one waiter waited, want 2 (holder, waiter)", n)
	}
	cli(t, socket, "release", "jobs/queue").must(t, 0)
	token(t, readLineT(t, out))
	if r := waitResult(t, done); r.code != 0 {
		t.Fatalf("waiter exit %d: %s", r.code, r.stderr)
	}
	if n := metric(t, addr, "leaseside_sidecar_grantor_acquire_requests_total"); n != 2 {
		t.Fatalf("%v acquire requests in all, want 2: the waiter was woken, not retried", n)
	}
}

// An owner process found stopped (SIGSTOP) longer than the configured
// limit cannot act on its lease, but may be continued and still believe it
// holds it until its deadline: so the lease is not released early; it is
// no longer renewed, lapses at its deadline, and only then goes to the
// next waiter.
func TestStoppedOwnerLeaseLapses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := filepath.Join(dir, "conf.json")
	os.WriteFile(conf, []byte(`{"owner_stopped_limit":"1s"}`), 0o644)
	socket := tempSocket(t)
	startDev(t, socket, t.TempDir(), "--config", conf)
	watch, _ := background(t, exec.Command(bin, "watch", "jobs/frozen", "--json", "--socket", socket))
	owner := exec.Command("sleep", "1000")
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	defer owner.Process.Kill()
	first := token(t, cli(t, socket, "acquire", "jobs/frozen", "--ttl", "4s", "--owner-pid", strconv.Itoa(owner.Process.Pid)).must(t, 0).stdout)
	waiter := exec.Command(bin, "acquire", "jobs/frozen", "--socket", socket, "--wait", "50s")
	out, done := background(t, waiter)
	owner.Process.Signal(syscall.SIGSTOP)

	// The watch stream is in the daemon's order: the stopped owner's
	// lease ends (lost at its deadline) before the waiter's grant enters
	// the table. A grant that came while the old lease was still valid
	// would show up as acquired before that lost, or end it as revoked.
	lost := false
	for !lost {
		var ev struct{ Event, Reason, Token string }
		if err := json.Unmarshal([]byte(readLineT(t, watch)), &ev); err != nil {
			t.Fatal(err)
		}
		switch ev.Event {
		case "owner_gone":
			t.Logf("daemon: %s", ev.Reason)
		case "lost":
			lost = true
			if ev.Reason != "expired" {
				t.Errorf("lost reason %q, want expired (not renewed, it lapsed)", ev.Reason)
			}
		case "released":
			t.Fatal("the stopped owner's lease was released early")
		case "acquired":
			if ev.Token != strconv.FormatUint(first, 10) {
				t.Fatalf("the waiter was granted (token %s) while the stopped owner's lease was still valid", ev.Token)
			}
		}
	}
	got := token(t, readLineT(t, out))
	if r := waitResult(t, done); r.code != 0 {
		t.Fatalf("waiter exit %d: %s", r.code, r.stderr)
	}
	if got <= first {
		t.Fatalf("waiter's token %d not above the stopped owner's %d", got, first)
	}
}

// Every kind of bad input gets its specific error code from the real
// daemon, and the connection keeps working after each.
func TestBadInputOnRealDaemon(t *testing.T) {
	t.Parallel()
	socket := tempSocket(t)
	startDev(t, socket, t.TempDir())
	conn, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	r := bufio.NewReader(conn)
	long := `{"id":1,"op":"status","lease":"` + strings.Repeat("a", 70<<10) + `"}`
	cases := []struct{ name, line, code string }{
		{"malformed JSON", `{"id":1,"op":`, "bad_json"},
		{"invalid UTF-8", "{\"id\":1,\"op\":\"status\",\"lease\":\"\xff\"}", "bad_json"},
		{"over-long line", long, "line_too_long"},
		{"unknown op", `{"id":1,"op":"steal"}`, "unknown_op"},
		{"unknown field", `{"id":1,"op":"status","force":true}`, "bad_request"},
		{"duplicate field", `{"id":1,"op":"acquire","lease":"a","lease":"b","ttl_ms":1000}`, "bad_request"},
		{"wrong case", `{"id":1,"Op":"status"}`, "bad_request"},
		{"number out of range", `{"id":1,"op":"acquire","lease":"a","ttl_ms":1e30}`, "bad_request"},
		{"negative ttl", `{"id":1,"op":"acquire","lease":"a","ttl_ms":-1}`, "invalid_ttl"},
		{"zero ttl", `{"id":1,"op":"acquire","lease":"a","ttl_ms":0}`, "invalid_ttl"},
		{"absurd ttl", `{"id":1,"op":"acquire","lease":"a","ttl_ms":999999999999}`, "invalid_ttl"},
		{"ttl below the daemon's minimum", `{"id":1,"op":"acquire","lease":"a","ttl_ms":10}`, "invalid_ttl"},
		{"empty name", `{"id":1,"op":"acquire","lease":"","ttl_ms":1000}`, "invalid_name"},
		{"name too long", `{"id":1,"op":"acquire","lease":"` + strings.Repeat("n", 257) + `","ttl_ms":1000}`, "invalid_name"},
		{"bad character", `{"id":1,"op":"acquire","lease":"jobs/ä","ttl_ms":1000}`, "invalid_name"},
		{"empty segment", `{"id":1,"op":"acquire","lease":"jobs//x","ttl_ms":1000}`, "invalid_name"},
		{"dot-dot segment", `{"id":1,"op":"acquire","lease":"jobs/../x","ttl_ms":1000}`, "invalid_name"},
	}
	for _, tc := range cases {
		if _, err := conn.Write([]byte(tc.line + "\n")); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: connection broke: %v", tc.name, err)
		}
		var m struct {
			OK    bool `json:"ok"`
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s: reply %q: %v", tc.name, line, err)
		}
		if m.OK || m.Error.Code != tc.code {
			t.Errorf("%s: got %s, want error %s", tc.name, strings.TrimSpace(line), tc.code)
		}
	}
	conn.Write([]byte(`{"id":2,"op":"status"}` + "\n"))
	if line, err := r.ReadString('\n'); err != nil || !strings.Contains(line, `"ok":true`) {
		t.Fatalf("after the bad input, status: %q %v", line, err)
	}
}

// aliveLoop is a command's body that records BOOTTIME (/proc/uptime, in
// 10 ms) in the file $ALIVE every 50 ms, replacing it whole, until it is
// stopped.
const aliveLoop = `while :; do cat /proc/uptime > "$ALIVE.t" && mv -f "$ALIVE.t" "$ALIVE"; sleep 0.05; done`

// lastAlive reads the last BOOTTIME instant an aliveLoop recorded.
func lastAlive(t *testing.T, path string) clockwatch.Instant {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the command recorded nothing: %v", err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		t.Fatalf("the command's record %q is empty", b)
	}
	secs, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		t.Fatalf("the command's record %q: %v", b, err)
	}
	return clockwatch.Instant(math.Round(secs*100) * float64(10*time.Millisecond))
}
