package integration

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// electCmd is the CMD of the election test's candidates: it prints its
// pid, its token and the CLOCK_BOOTTIME instant it starts acting, then
// works until stopped.
const electCmd = `import os, time
print("running", os.getpid(), os.environ["LEASESIDE_TOKEN"], os.environ["LEASESIDE_VALUE"], time.clock_gettime_ns(time.CLOCK_BOOTTIME), flush=True)
while True:
    time.sleep(1)
`

// cmdRun is one candidate's CMD, from the instant it started acting to
// the instant this test saw it gone (later than it ended: the check of
// overlaps errs on the side of finding one).
type cmdRun struct {
	candidate, token, value string
	pid                     int
	from, to                clockwatch.Instant
}

// Two `leaseside elect` candidates on two hosts (sidecars A and B of three
// grantors), the leader killed with kill -9 while the other waits in
// line: its CMD dies with it, the
// lease is held for elect's lock-delay (the term, by default) and then
// goes to the other candidate, which starts its CMD; no two CMDs ever run
// at once on one CLOCK_BOOTTIME. `leaseside observe --json`, a third
// process, prints every change in order: nobody, the first candidate,
// nobody during its lock-delay, the second with a larger token, nobody
// once it resigns.
func TestClusterElectLeaderKilled(t *testing.T) {
	t.Parallel()
	const (
		term = 6 * time.Second
		name = "svc/primary"
	)
	c, metrics, a, b := primsCluster(t)
	observer := startProcess(t, "observe", exec.Command(bin, "observe", name, "--json", "--socket", a.socket))
	observer.waitLine(t, 0, `"event":"no_leader"`)

	elect := func(s *sidecar, value string) *process {
		return startProcess(t, "elect "+value, exec.Command(bin, "elect", name, "--socket", s.socket, "--value", value,
			"--ttl", term.String(), "--", "python3", "-c", electCmd))
	}
	// running waits for a candidate's CMD to start acting, and watches
	// for its end.
	ended := make(chan struct{}, 2)
	running := func(p *process, candidate string) *cmdRun {
		_, l := p.waitLine(t, 0, "running ")
		f := strings.Fields(l.v)
		if len(f) != 5 {
			t.Fatalf("%s: CMD printed %q", candidate, l.v)
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatal(err)
		}
		from, err := strconv.ParseInt(f[4], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		r := &cmdRun{candidate: candidate, pid: pid, token: f[2], value: f[3], from: clockwatch.Instant(from)}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatalf("%s: pidfd_open of its CMD (%d): %v", candidate, pid, err)
		}
		go func() {
			defer unix.Close(fd)
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			for {
				if _, err := unix.Poll(fds, -1); err != unix.EINTR {
					break
				}
			}
			r.to = boottime()
			ended <- struct{}{}
		}()
		return r
	}

	first := elect(a, "a")
	r1 := running(first, "a")
	second := elect(b, "b")
	observer.waitLine(t, 0, `"event":"leader"`, `"value":"a"`)
	// b waits in line at the grantor leader (and runs no CMD).
	leaderMetrics := metrics[c.currentLeader().node]
	poll(t, "b queued", func() (bool, string) {
		n := metric(t, leaderMetrics, "leaseside_grantor_waiters")
		return n == 1, fmt.Sprintf("%v waiters", n)
	})

	killed := first.kill(t)
	r2 := running(second, "b")
	<-ended // a's CMD, gone with its elect
	_, lb := observer.waitLine(t, 0, `"event":"leader"`, `"value":"b"`)
	// b resigns: SIGTERM to elect stops its CMD, and elect releases.
	mark := observer.out.mark()
	second.cmd.Process.Signal(syscall.SIGTERM)
	second.waitExit(t)
	<-ended
	observer.waitLine(t, mark, `"event":"no_leader"`)

	t.Logf("a's CMD ran from boot+%v to boot+%v (seen gone %s after the kill -9 of its elect); b's CMD began %s after the kill (lock-delay %s), observe saw b lead %s after it",
		time.Duration(r1.from), time.Duration(r1.to), ms(r1.to.Sub(killed)), ms(r2.from.Sub(killed)), term, ms(lb.at.Sub(killed)))
	if !r1.to.Before(r2.from) {
		t.Errorf("two CMDs at once: a's ran until boot+%v (seen gone), b's began at boot+%v", time.Duration(r1.to), time.Duration(r2.from))
	}
	if r2.from.Sub(killed) < term {
		t.Errorf("b led %s after a was killed, inside elect's lock-delay of %s", ms(r2.from.Sub(killed)), term)
	}
	if token(t, r2.token) <= token(t, r1.token) {
		t.Errorf("b's token %s is not larger than a's %s", r2.token, r1.token)
	}

	// The observer's lines: nobody, a, nobody (a's grant ended at its
	// elect's death; the grantor keeps the name for the lock-delay), b,
	// nobody; tokens growing.
	var seen []string
	var tokens []uint64
	for _, l := range observer.out.all() {
		var ev ipc.Event
		if err := json.Unmarshal([]byte(l.v), &ev); err != nil {
			t.Fatalf("observe printed %q: %v", l.v, err)
		}
		switch ev.Event {
		case ipc.EventLeader:
			seen = append(seen, ev.Value)
			tokens = append(tokens, token(t, ev.Token))
		case ipc.EventNoLeader:
			seen = append(seen, "-")
		}
	}
	if got := strings.Join(seen, " "); got != "- a - b -" {
		t.Errorf("observe saw %q, want nobody, a, nobody, b, nobody (\"- a - b -\")", got)
	}
	if len(tokens) != 2 || tokens[0] != token(t, r1.token) || tokens[1] != token(t, r2.token) {
		t.Errorf("observe saw tokens %v, want a's %s then b's %s", tokens, r1.token, r2.token)
	}
}
