package integration

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 9, item 7: `run` that wakes from a stall past its command's stop
// time (here: SIGSTOP while the grantor is out of reach, continued only
// after the daemon declared the lease lost) sends SIGKILL at once, with
// no SIGTERM and grace first, then says how late it was, and exits 79.
func TestRunStalledPastStopTimeKillsFirst(t *testing.T) {
	t.Parallel()
	socket := tempSocket(t)
	dev := startDevInNetns(t, socket, t.TempDir())
	watch, _ := background(t, exec.Command(bin, "watch", "jobs/stalled", "--json", "--socket", socket))
	script := `echo $$; trap 'echo TERM' TERM; while :; do sleep 0.05; done`
	run := exec.Command(bin, "run", "jobs/stalled", "--socket", socket, "--ttl", "3s", "--", "sh", "-c", script)
	out, done := background(t, run)
	child := atoi(t, readLineT(t, out))

	run.Process.Signal(syscall.SIGSTOP)
	dev.netnsLoopback(t, "down") // no renewal from now on
	for {
		var ev struct{ Event, Reason string }
		if err := json.Unmarshal([]byte(readLineT(t, watch)), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Event == "lost" {
			break // past the deadline, so past the stop time
		}
	}
	run.Process.Signal(syscall.SIGCONT)
	res := waitResult(t, done) // run waits for the command's end
	if syscall.Kill(child, 0) == nil {
		t.Fatalf("the command (pid %d) outlived run", child)
	}
	if res.code != 79 {
		t.Fatalf("run exit %d, want 79: %s", res.code, res.stderr)
	}
	if !strings.Contains(res.stderr, "after the command's stop time") || !strings.Contains(res.stderr, "killed it at once") {
		t.Fatalf("run did not say how late it was: %q", res.stderr)
	}
	t.Logf("run: %s", strings.TrimSpace(res.stderr))
	rest := readAll(t, out)
	if strings.Contains(rest, "TERM") {
		t.Fatalf("a run woken past the stop time sent SIGTERM first (the command saw it: %q)", rest)
	}
}

// readAll reads r to its end.
func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		ch <- string(b)
	}()
	select {
	case s := <-ch:
		return s
	case <-time.After(timeout):
		t.Fatal("output did not end")
	}
	return ""
}
