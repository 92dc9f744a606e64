package integration

import (
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

func token(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		t.Fatalf("not a token: %q", s)
	}
	return v
}

// shellOwner starts a shell that acquires name with the CLI (so the shell
// is the lease's owner) and then waits on its stdin; closing the returned
// writer ends the owner.
func shellOwner(t *testing.T, socket, name string) (tok uint64, end func()) {
	t.Helper()
	cmd := exec.Command("sh", "-c", `"$0" acquire "$1" --ttl 5s --socket "$2" || exit 1; exec cat >/dev/null`, bin, name, socket)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := stdout.Read(buf) // the token, printed once the lease is held
	if err != nil {
		cmd.Wait()
		t.Fatalf("owner shell printed no token: %v", err)
	}
	go io.Copy(io.Discard, stdout)
	return token(t, string(buf[:n])), func() {
		stdin.Close()
		cmd.Wait()
	}
}

// The walking skeleton end to end: tokens grow across owners, releases,
// `run` and a restart of the whole thing on the same data dir.
func TestSkeletonEndToEnd(t *testing.T) {
	t.Parallel()
	socket, data := tempSocket(t), t.TempDir()
	dev := startDev(t, socket, data)
	var seen []uint64
	larger := func(tok uint64, what string) {
		t.Helper()
		for _, s := range seen {
			if tok <= s {
				t.Fatalf("%s: token %d not larger than earlier token %d (all: %v)", what, tok, s, seen)
			}
		}
		seen = append(seen, tok)
	}

	// A shell acquires; the lease is its own while it lives.
	tok1, endOwner := shellOwner(t, socket, "jobs/render-42")
	larger(tok1, "first grant")

	// A second owner is refused, told the holder's token, exit 75.
	r := cli(t, socket, "acquire", "jobs/render-42", "--ttl", "5s").must(t, 75)
	if !strings.Contains(r.stderr, strconv.FormatUint(tok1, 10)) {
		t.Errorf("refusal does not name the holder's token %d: %q", tok1, r.stderr)
	}

	// The owner exits; a waiting acquirer gets the lease with a larger token.
	endOwner()
	r = cli(t, socket, "acquire", "jobs/render-42", "--ttl", "5s", "--wait", "30s", "--detached").must(t, 0)
	tok2 := token(t, r.stdout)
	larger(tok2, "grant after the owner exited")

	// Explicit release; the next grant is larger again.
	cli(t, socket, "release", "jobs/render-42").must(t, 0)
	cli(t, socket, "release", "jobs/render-42").must(t, 1) // not held any more
	r = cli(t, socket, "acquire", "jobs/render-42", "--ttl", "5s", "--detached", "--json").must(t, 0)
	if !strings.Contains(r.stdout, `"deadline_boottime_ns"`) || !strings.Contains(r.stdout, `"valid_ms"`) {
		t.Errorf("JSON grant lacks deadline fields: %s", r.stdout)
	}
	tok3 := token(t, jsonField(t, r.stdout, "token"))
	larger(tok3, "grant after release")

	// run hands the child the lease, token, deadline and socket, and exits
	// with the child's status.
	r = cli(t, socket, "run", "jobs/run-me", "--ttl", "5s", "--",
		"sh", "-c", `echo "$LEASESIDE_LEASE $LEASESIDE_TOKEN $LEASESIDE_DEADLINE_BOOTTIME_NS $LEASESIDE_SOCKET"; exit 3`).must(t, 3)
	f := strings.Fields(r.stdout)
	if len(f) != 4 || f[0] != "jobs/run-me" || f[3] != socket {
		t.Fatalf("child environment: %q", r.stdout)
	}
	larger(token(t, f[1]), "grant to run")
	if dl, err := strconv.ParseInt(f[2], 10, 64); err != nil || dl <= 0 {
		t.Fatalf("LEASESIDE_DEADLINE_BOOTTIME_NS %q", f[2])
	}
	// run released the lease when its child exited.
	r = cli(t, socket, "status", "--json").must(t, 0)
	if strings.Contains(r.stdout, "jobs/run-me") {
		t.Errorf("run did not release its lease: %s", r.stdout)
	}

	// run against a held lease: exit 75, naming the holder's token.
	start := time.Now()
	r = cli(t, socket, "run", "jobs/render-42", "--wait", "300ms", "--", "true").must(t, 75)
	if !strings.Contains(r.stderr, strconv.FormatUint(tok3, 10)) {
		t.Errorf("run refusal does not name the holder's token %d: %q", tok3, r.stderr)
	}
	if time.Since(start) < 300*time.Millisecond {
		t.Errorf("run gave up before its --wait")
	}

	// Stop and start on the same data dir: tokens keep growing.
	dev.stop(t)
	startDev(t, socket, data)
	r = cli(t, socket, "acquire", "jobs/after-restart", "--ttl", "5s", "--detached").must(t, 0)
	larger(token(t, r.stdout), "grant after restart")
}
