package integration

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/leaseside/leaseside/ipc"
)

// Issue 24, item 2: `run` and `elect` exit 79 whenever they stopped their
// command because the lease could not be renewed, whatever the command's
// own status: here a command that traps TERM and exits 0 (after a USR1
// from --jeopardy-signal). The grantor (a real process) is stopped with
// SIGSTOP under 20 trials, in two waves of five runs and five elects; the
// sidecar reports every grant lost, never released.
func TestRunAndElectExit79WhenGrantorsStop(t *testing.T) {
	t.Parallel()
	c := newLoopbackCluster(t, 1)
	c.startAll()
	g := c.nodes[0].proc
	t.Cleanup(func() { g.cmd.Process.Signal(syscall.SIGCONT) })
	s := startSidecar(t, "sidecar", nil, "--grantors", c.rpcAddrs())
	script := `trap 'echo USR1' USR1; trap 'echo TERM; exit 0' TERM; echo ready; while :; do sleep 0.05; done`
	trials := 0
	for wave := range 2 {
		type trial struct {
			name string
			p    *process
		}
		var ts []trial
		for i := range 10 {
			name := fmt.Sprintf("jobs/lost-%d-%d", wave, i)
			args := []string{"run", name}
			if i%2 == 1 {
				args = []string{"elect", name, "--value", "v"}
			}
			// --wait: after the previous wave's SIGCONT the sidecar may not
			// have reached the grantor again yet, and an acquire without a
			// wait fails at once while no leader answers.
			args = append(args, "--socket", s.socket, "--wait", "1m", "--ttl", "6s", "--margin", "1500ms", "--grace", "1s", "--jeopardy-signal", "SIGUSR1", "--", "sh", "-c", script)
			ts = append(ts, trial{name, startProcess(t, args[0]+" "+name, exec.Command(bin, args...))})
		}
		for _, tr := range ts {
			tr.p.waitLine(t, 0, "ready")
		}
		mark := s.events.mark()
		if err := g.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		for _, tr := range ts {
			trials++
			if code := tr.p.waitExit(t); code != 79 {
				t.Errorf("trial %d (%s): exit %d, want 79; output:\n%s", trials, tr.p.name, code, tr.p.tail(10))
				continue
			}
			if !strings.Contains(tr.p.tail(10), "TERM") {
				t.Errorf("trial %d (%s): the command never saw SIGTERM (it was meant to exit 0 on it):\n%s", trials, tr.p.name, tr.p.tail(10))
			}
			_, ev := s.waitEvent(t, mark, ipc.EventLost, tr.name)
			t.Logf("trial %d (%s): exit 79, event lost (%s)", trials, tr.p.name, ev.v.Reason)
		}
		g.cmd.Process.Signal(syscall.SIGCONT)
		for _, e := range s.events.all()[mark:] {
			if e.v.Event == ipc.EventReleased {
				t.Errorf("%s (token %s) reported released (%s), not lost", e.v.Lease, e.v.Token, e.v.Reason)
			}
		}
	}
}
