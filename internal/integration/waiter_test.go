package integration

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A waiter whose wait outlasts its own term still gets the lease when it
// frees, with a full term. The grant is made at an unknown point after the
// waiter's request left (its t0), so t0 + d(1-rho) - eps may already have
// passed when the grant arrives: the sidecar has to renew before it can
// give the caller a deadline, not report the lease lost. (The cluster
// tests ran into this: a waiter queued for a dead holder's lease waits a
// whole term.)
func TestWaiterOutlastingItsTerm(t *testing.T) {
	t.Parallel()
	socket := tempSocket(t)
	startDev(t, socket, t.TempDir())
	const name = "jobs/long-wait"
	first := token(t, cli(t, socket, "acquire", name, "--ttl", "30s", "--detached").must(t, 0).stdout)
	waiter := exec.Command(bin, "acquire", name, "--socket", socket, "--ttl", "2s", "--wait", "50s", "--detached")
	out, done := background(t, waiter)
	// The fault: the holder keeps the lease for longer than the waiter's
	// whole term.
	<-time.After(3 * time.Second)
	cli(t, socket, "release", name).must(t, 0)
	r := waitResult(t, done)
	if r.code != 0 {
		t.Fatalf("waiter exit %d, want the lease: %s", r.code, strings.TrimSpace(r.stderr))
	}
	if got := token(t, readLineT(t, out)); got <= first {
		t.Fatalf("waiter's token %d not above the holder's %d", got, first)
	}
	cli(t, socket, "check", name).must(t, 0)
}
