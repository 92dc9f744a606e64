package cli

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The commands of issue 12 through the real binary, against a real
// `leaseside dev` (a sidecar and a grantor in one process).

// startDevSocket starts a dev and returns its socket.
func startDevSocket(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	dev := startProc(t, "dev", "dev", "--socket", sock, "--data-dir", filepath.Join(t.TempDir(), "dev"))
	dev.waitLine(t, "leaseside dev ready")
	return sock
}

// candidate is the CMD of an elect candidate: it says on stderr that it
// runs, with its token and value, and sleeps until stopped.
func candidate(name string) []string {
	return []string{"--", "sh", "-c", `echo "` + name + ` running token=$LEASESIDE_TOKEN value=$LEASESIDE_VALUE" >&2; exec sleep 1000`}
}

var leaderLineRE = regexp.MustCompile(`^leader +e/svc token (\d+) value "([A-Z]2?)"$`)

// Two candidates: the first leads and runs its command; a third one with
// --wait gives up (exit 75) without ever running its command; when the
// leader's elect is killed (kill -9), the second leads after the
// lock-delay, with a larger token, and proclaims a new value (A's old
// token proclaims nothing); an admin release ends its leadership
// (exit 79, its command stopped); a command that exits resigns (the
// command's status, nobody leads). observe prints every change in order;
// leader prints the value once, exit 3 when none.
func TestElectObserveLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	sock := startDevSocket(t)
	const name = "e/svc"
	obs := startProcLines(t, "observe", true, "observe", name, "--socket", sock)
	obs.waitLine(t, "no_leader  "+name)

	if out, stderr, code := runCLI(t, "leader", name, "--socket", sock); code != ExitNotHeld || out != "" || !strings.Contains(stderr, "nobody leads e/svc") {
		t.Fatalf("leader with nobody leading: exit %d, stdout %q, stderr %q", code, out, stderr)
	}

	a := startProc(t, "candidate A", append([]string{"elect", name, "--value", "A", "--ttl", "2s", "--socket", sock}, candidate("A")...)...)
	tokA := field(a.waitLine(t, "A running"), "token")
	if field(a.waitLine(t, "A running"), "value") != "A" {
		t.Errorf("A's command did not get LEASESIDE_VALUE")
	}
	if out, _, code := runCLI(t, "leader", name, "--socket", sock); code != ExitOK || out != "A\n" {
		t.Errorf("leader while A leads: exit %d, stdout %q", code, out)
	}
	b := startProc(t, "candidate B", append([]string{"elect", name, "--value", "B", "--ttl", "2s", "--socket", sock}, candidate("B")...)...)

	_, stderr, code := runCLI(t, append([]string{"elect", name, "--value", "C", "--wait", "1s", "--socket", sock}, candidate("C")...)...)
	if code != ExitHeld || strings.Contains(stderr, "C running") || !strings.Contains(stderr, "--wait 1s ran out") {
		t.Fatalf("a third candidate with --wait 1s: exit %d, stderr:\n%s", code, stderr)
	}
	if _, _, ok := b.find(0, "B running"); ok {
		t.Fatalf("B runs its command while A leads:\n%s", b.output())
	}

	a.cmd.Process.Signal(syscall.SIGKILL) // its command dies with it (Pdeathsig)
	a.waitExit(t)
	tokB := field(b.waitLine(t, "B running"), "token")
	if n(t, tokB) <= n(t, tokA) {
		t.Errorf("B leads with token %s, not above A's %s", tokB, tokA)
	}

	// B's command may proclaim a new value; an old token changes nothing.
	if out, stderr, code := runCLI(t, "proclaim", name, "B2", "--token", tokB, "--socket", sock); code != ExitOK || out != name+": proclaimed \"B2\"\n" {
		t.Fatalf("proclaim: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if _, stderr, code := runCLI(t, "proclaim", name, "A2", "--token", tokA, "--socket", sock); code != ExitNotHeld || !strings.Contains(stderr, "not "+tokA) {
		t.Errorf("proclaim with A's old token: exit %d, stderr %q", code, stderr)
	}
	if out, _, code := runCLI(t, "leader", name, "--socket", sock); code != ExitOK || out != "B2\n" {
		t.Errorf("leader after the proclaim: exit %d, stdout %q", code, out)
	}

	if _, stderr, code := runCLI(t, "release", name, "--socket", sock); code != ExitOK {
		t.Fatalf("admin release: exit %d: %s", code, stderr)
	}
	b.waitLine(t, "lost (released_by_admin); stopping the command")
	if code := b.waitExit(t); code != ExitLost {
		t.Errorf("B lost its leadership: exit %d, want %d", code, ExitLost)
	}

	// A's grant ends when it is killed; the grantor keeps the name for
	// elect's lock-delay (a term), in which nobody leads, then grants it
	// to B.
	want := []string{`no_leader`, `leader A ` + tokA, `no_leader`, `leader B ` + tokB, `leader B2 ` + tokB, `no_leader`}
	var got []string
	for _, l := range obs.waitCount(t, len(want), name) {
		if m := leaderLineRE.FindStringSubmatch(l); m != nil {
			got = append(got, "leader "+m[2]+" "+m[1])
		} else {
			got = append(got, strings.Fields(l)[0])
		}
	}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("observe printed %q, want %q:\n%s", got, want, obs.output())
	}

	// A command that exits: elect resigns and exits with its status.
	_, stderr, code = runCLI(t, "elect", name, "--value", "D", "--socket", sock, "--", "sh", "-c", "exit 7")
	if code != 7 {
		t.Errorf("elect of a command that exits 7: exit %d: %s", code, stderr)
	}
	if _, _, code := runCLI(t, "leader", name, "--socket", sock); code != ExitNotHeld {
		t.Errorf("leader after D resigned: exit %d, want %d", code, ExitNotHeld)
	}
}

// waitCount waits until the process has logged count lines that contain
// every one of parts, and returns them.
func (p *proc) waitCount(t *testing.T, count int, parts ...string) []string {
	t.Helper()
	timer := time.NewTimer(procTimeout)
	defer timer.Stop()
	for {
		var lines []string
		for from := 0; ; {
			l, next, ok := p.find(from, parts...)
			if !ok {
				break
			}
			lines, from = append(lines, l), next
		}
		p.mu.Lock()
		exited, ch := p.exited, p.change
		p.mu.Unlock()
		switch {
		case len(lines) >= count:
			return lines
		case exited:
			t.Fatalf("%s exited after %d lines with %q, want %d:\n%s", p.name, len(lines), parts, count, p.output())
		}
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("%s: %d lines with %q after %v, want %d:\n%s", p.name, len(lines), parts, procTimeout, count, p.output())
		}
	}
}

func n(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("token %q: %v", s, err)
	}
	return v
}

// A semaphore of 2: two holders, a third is refused naming the limit
// (exit 75) and one with another limit is a usage error naming both;
// status shows holders/limit; a run --limit 2 waiting in line gets the
// slot a release frees. check-token answers 0 for a live token, 3 for a
// released one, 2 for a token that is not one, 69 without a daemon.
// watch --holders prints each change, in order, with the holders after
// it.
func TestSemaphoreCheckTokenHolderWatch(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	sock := startDevSocket(t)
	const name = "pool/x"
	hw := startProcLines(t, "watch --holders", true, "watch", name, "--holders", "--socket", sock)
	hw.waitLine(t, "holder     "+name+" sync; holders 0")

	acquire := func(args ...string) (string, string, int) {
		out, stderr, code := runCLI(t, append([]string{"acquire", name, "--detached", "--socket", sock}, args...)...)
		return strings.TrimSpace(out), stderr, code
	}
	t1, stderr, code := acquire("--limit", "2")
	if code != ExitOK {
		t.Fatalf("first holder: exit %d: %s", code, stderr)
	}
	t2, stderr, code := acquire("--limit", "2")
	if code != ExitOK {
		t.Fatalf("second holder: exit %d: %s", code, stderr)
	}
	if _, stderr, code := acquire("--limit", "2"); code != ExitHeld || !strings.Contains(stderr, "all 2 holders of lease pool/x are taken") {
		t.Errorf("third holder: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := acquire("--limit", "3"); code != ExitUsage || !strings.Contains(stderr, "--limit 3 refused") || !strings.Contains(stderr, "limit 2") {
		t.Errorf("another limit: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := acquire("--limit", "257"); code != ExitUsage || !strings.Contains(stderr, "--limit 257: how many may hold NAME at once, 1 (the default: one holder, an exclusive lease) to 256") {
		t.Errorf("limit 257: exit %d, stderr %q", code, stderr)
	}
	status, _, _ := runCLI(t, "status", "--socket", sock)
	for _, row := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^pool/x +` + t1 + ` .* 1/2 +detached`),
		regexp.MustCompile(`(?m)^pool/x +` + t2 + ` .* 2/2 +detached`),
	} {
		if !row.MatchString(status) {
			t.Errorf("status has no row %s:\n%s", row, status)
		}
	}

	if out, stderr, code := runCLI(t, "check-token", name, t1, "--socket", sock); code != ExitOK || out != name+" token "+t1+": live\n" {
		t.Errorf("check-token of a live token: exit %d, stdout %q, stderr %q", code, out, stderr)
	}

	waiter := startProc(t, "run --limit 2", "run", name, "--limit", "2", "--wait", "1m", "--socket", sock, "--",
		"sh", "-c", `echo "running token=$LEASESIDE_TOKEN" >&2`)
	if _, stderr, code := runCLI(t, "release", name, "--token", t1, "--socket", sock); code != ExitOK {
		t.Fatalf("release %s: exit %d: %s", t1, code, stderr)
	}
	t3 := field(waiter.waitLine(t, "running token="), "token")
	if code := waiter.waitExit(t); code != ExitOK {
		t.Errorf("run --limit 2: exit %d", code)
	}
	if n(t, t3) <= n(t, t2) {
		t.Errorf("the waiter got token %s, not above %s", t3, t2)
	}

	_, stderr, code = runCLI(t, "check-token", name, t1, "--socket", sock)
	if code != ExitNotHeld || !strings.Contains(stderr, "token "+t1+" of pool/x is not live (live: token "+t2+")") {
		t.Errorf("check-token of a released token: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := runCLI(t, "check-token", name, "x1", "--socket", sock); code != ExitUsage || !strings.Contains(stderr, `TOKEN "x1": a token is a positive decimal integer`) {
		t.Errorf("check-token x1: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := runCLI(t, "check-token", name, t2, "--socket", filepath.Join(t.TempDir(), "none.sock")); code != ExitUnavailable || !strings.Contains(stderr, "no leaseside daemon at") {
		t.Errorf("check-token without a daemon: exit %d, stderr %q", code, stderr)
	}

	// The waiter's grant may come in the release's own raft entry (it
	// was in line by then) or in one of its own.
	q := regexp.QuoteMeta
	want := regexp.MustCompile(`^` + strings.Join([]string{
		q("sync; holders 0"),
		q("acquired token " + t1 + "; holders 1/2: " + t1),
		q("acquired token " + t2 + "; holders 2/2: " + t1 + " " + t2),
		q("released token "+t1+"; holders ") + "(" + q("1/2: "+t2) + "|" + q("2/2: "+t2+" "+t3) + ")",
		q("acquired token " + t3 + "; holders 2/2: " + t2 + " " + t3),
		q("released token " + t3 + "; holders 1/2: " + t2),
	}, "\n") + `$`)
	var got []string
	for _, l := range hw.waitCount(t, 6, "holder     "+name+" ") {
		got = append(got, strings.TrimPrefix(l, "holder     "+name+" "))
	}
	if !want.MatchString(strings.Join(got, "\n")) {
		t.Errorf("watch --holders printed:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
	}

	// Held twice on this host, released without --token: each release
	// says which grant it ended, the oldest first.
	t4, stderr, code := acquire("--limit", "2")
	if code != ExitOK {
		t.Fatalf("another holder: exit %d: %s", code, stderr)
	}
	for _, tok := range []string{t2, t4} {
		if out, stderr, code := runCLI(t, "release", name, "--socket", sock); code != ExitOK || out != "released pool/x (token "+tok+")\n" {
			t.Errorf("release of a name held twice: exit %d, stdout %q (want token %s), stderr %q", code, out, tok, stderr)
		}
	}
}

// run --jeopardy-signal against a real grantor and daemon: with the
// grantor stopped (SIGSTOP), renewals fail; at a third of the term before
// the deadline run says the lease is in jeopardy and sends CMD's process
// the signal; the grantor continued, a renewal gets through and run says
// it is safe again; stopped once more, the lease is lost and run stops
// CMD and exits 79.
func TestRunJeopardySignal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	g := startProc(t, "grantor", "grantor", "--node-id", "g1", "--bootstrap-expect", "1", "--data-dir", filepath.Join(t.TempDir(), "g"),
		"--rpc-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0")
	rpc := field(g.waitLine(t, "leaseside grantor ready"), "rpc")
	t.Cleanup(func() { g.cmd.Process.Signal(syscall.SIGCONT) })
	sock := filepath.Join(t.TempDir(), "s.sock")
	d := startProc(t, "daemon", "daemon", "--grantors", rpc, "--socket", sock)
	d.waitLine(t, "leaseside daemon ready")

	// A 15 s term: renewals every 5 s, jeopardy 10 s after the last one
	// succeeded, then about 5 s less the margins for a renewal to get
	// through once the grantor runs again.
	r := startProc(t, "run", "run", "j/x", "--ttl", "15s", "--jeopardy-signal", "USR1", "--socket", sock, "--",
		"sh", "-c", `trap 'echo child got USR1 >&2' USR1; echo child running >&2; while :; do sleep 0.1; done`)
	r.waitLine(t, "child running")
	for round, want := range []string{"safe again: a renewal succeeded", "no renewal and the deadline is near; stopping the command"} {
		from := r.mark()
		if err := g.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		line := r.waitLineFrom(t, from, "in jeopardy: renewals have failed for a third of its term", "sent SIGUSR1 to the command")
		r.waitLineFrom(t, from, "child got USR1")
		if m := regexp.MustCompile(` ([0-9.]+m?s) left`).FindStringSubmatch(line); m == nil {
			t.Errorf("round %d: the jeopardy line does not say what is left: %q", round, line)
		} else if left, err := time.ParseDuration(m[1]); err != nil || left <= 0 || left > 5*time.Second {
			t.Errorf("round %d: %s left at jeopardy, want (0, 5s] (a third of the term at most)", round, m[1])
		}
		if round == 0 {
			g.cmd.Process.Signal(syscall.SIGCONT)
		}
		r.waitLineFrom(t, from, want)
	}
	if code := r.waitExit(t); code != ExitLost {
		t.Errorf("run after the lease was lost: exit %d, want %d", code, ExitLost)
	}
}
