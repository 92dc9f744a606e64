package integration

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// Lock-delay is kept by the grantors (issue 22 item 2), on real
// processes: an owner with a lock-delay is killed with kill -9, then its
// sidecar is killed with kill -9, then the grantor leader is: another
// host's waiter gets the name no sooner than the lock-delay after the
// owner's death. The sidecar kept nothing the delay needed, and the new
// leader counts the delay again from its taking office (so the waiter is
// not granted before that tE plus the delay either). Before the grantors
// kept lock-delays, the sidecar kept this one, and its death handed the
// name on a term later.
func TestLockDelaySurvivesSidecarKillAndLeaderChange(t *testing.T) {
	t.Parallel()
	c := newLoopbackCluster(t, 3)
	c.startAll()
	first := c.waitOffice(c.marks0())
	grantors := c.rpcAddrs()
	a := startSidecar(t, "sidecar a", nil, "--grantors", grantors)
	b := startSidecar(t, "sidecar b", nil, "--grantors", grantors)

	const term, lockDelay = 3 * time.Second, 8 * time.Second
	const name = "ld/kill9"
	owner := exec.Command("sleep", "1000")
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	defer owner.Process.Kill()
	held := token(t, cli(t, a.socket, "acquire", name, "--ttl", term.String(), "--owner-pid", strconv.Itoa(owner.Process.Pid),
		"--lock-delay", lockDelay.String()).must(t, 0).stdout)

	died := boottime()
	owner.Process.Kill()
	owner.Wait()
	// Sidecar a sees its owner go and tells the leader (the audit line of
	// the release); then it dies, and so does that leader.
	a.waitEvent(t, 0, ipc.EventReleased, name)
	c.nodes[first.node].proc.waitLine(t, 0, "event=release", "lease="+name, "released=true")
	a.kill(t)
	marks := c.marks()
	c.kill(first.node)
	second := c.waitOffice(marks, c.others(first.node)...)

	waiter := exec.Command(bin, "acquire", name, "--socket", b.socket, "--ttl", term.String(), "--wait", "60s", "--detached")
	out, done := background(t, waiter)
	got := token(t, readLineT(t, out))
	granted := boottime()
	if res := waitResult(t, done); res.code != 0 {
		t.Fatalf("waiter exit %d: %s", res.code, res.stderr)
	}
	if got <= held {
		t.Fatalf("waiter's token %d not above the dead owner's %d", got, held)
	}
	if d := granted.Sub(died); d < lockDelay {
		t.Fatalf("the name was granted %v after its owner died, within its lock-delay of %v", d, lockDelay)
	}
	if d := granted.Sub(second.tE); d < lockDelay {
		t.Fatalf("the new leader granted the name %v after its tE, within the lock-delay of %v it must wait out", d, lockDelay)
	}
	t.Logf("owner kill -9 to next grant: %v (lock-delay %v; the new leader's tE %v after the kill)", granted.Sub(died), lockDelay, second.tE.Sub(died))
	if !strings.Contains(c.nodes[second.node].proc.tail(200), "event=delay_end") {
		t.Errorf("the new leader logged no delay_end audit line")
	}
}
