package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// A restart of the sidecar keeps every lease of the host (issue 24.1):
// 20 leases of each owner kind (detached, a pid, a connection: the Go
// client's; many, so that the state file and the resumes carry a table
// rather than one entry; a larger table adds time, not proof) and a `run`
// and an `elect` child, through a SIGTERM and a start, then a kill -9 and
// a start, on one socket and its state: after each, every lease is held
// with its token, the connection's client resumed its leases by itself,
// the new process renews them, and neither child got a signal nor
// stopped. Fails on the old code: the new process held nothing, the
// connection leases ended with the connection, and run and elect stopped
// their children.
func TestSidecarRestartKeepsLeases(t *testing.T) {
	t.Parallel()
	c := newLoopbackCluster(t, 1)
	c.startAll()
	socket := tempSocket(t)
	args := []string{"--grantors", c.rpcAddrs()}
	s := startSidecarOn(t, "sidecar 1", nil, socket, args...)
	ctx := tctx(t)
	const n = 20
	const ttl = 30 * time.Second

	owner := exec.Command("sleep", "3600") // the pid owner
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		owner.Process.Kill()
		owner.Wait()
	})
	cl := &ipc.Client{Socket: socket}
	t.Cleanup(func() { cl.Close() })
	tokens := map[string]string{}
	var connLeases []*ipc.Lease
	for i := range n {
		for _, kind := range []string{"detached", "pid", "conn"} {
			name := fmt.Sprintf("restart/%s/%03d", kind, i)
			opt := ipc.AcquireOptions{TTL: ttl}
			switch kind {
			case "detached":
				opt.Owner = ipc.OwnerDetached
			case "pid":
				opt.Owner, opt.OwnerPID = ipc.OwnerPID, owner.Process.Pid
			}
			l, err := cl.Acquire(ctx, name, opt)
			if err != nil {
				t.Fatalf("acquire %s: %v", name, err)
			}
			tokens[name] = l.Token
			if kind == "conn" {
				connLeases = append(connLeases, l)
			}
		}
	}

	// The children note any signal they get in a file, and say when they
	// run.
	dir := t.TempDir()
	child := func(tag string) []string {
		f := filepath.Join(dir, tag+".signals")
		return []string{"sh", "-c", fmt.Sprintf(`for s in TERM INT HUP USR1 USR2; do trap "echo $s >> %s; exit 0" $s; done; echo %s child running; while :; do sleep 1; done`, f, tag)}
	}
	run := startProcess(t, "run", exec.Command(bin, append([]string{"run", "restart/run", "--socket", socket, "--ttl", ttl.String(), "--"}, child("run")...)...))
	run.waitLine(t, 0, "run child running")
	elect := startProcess(t, "elect", exec.Command(bin, append([]string{"elect", "restart/elect", "--socket", socket, "--value", "a", "--ttl", ttl.String(), "--"}, child("elect")...)...))
	elect.waitLine(t, 0, "elect child running")
	// The Python client's connection owns a lease too.
	py := exec.Command("python3", "-c", pythonHolder, socket)
	py.Dir = "../../clients/python"
	python := startProcess(t, "python holder", py)
	_, line := python.waitLine(t, 0, "python holds")
	tokens["restart/python"] = strings.Fields(line.v)[2]
	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range st {
		if g.Lease == "restart/run" || g.Lease == "restart/elect" {
			tokens[g.Lease] = g.Token
		}
	}
	if len(tokens) != 3*n+3 {
		t.Fatalf("%d leases held before the restart, want %d", len(tokens), 3*n+3)
	}

	for i, how := range []string{"SIGTERM", "kill -9"} {
		before := heldOn(t, socket)
		mark := s.out.mark()
		switch how {
		case "SIGTERM":
			s.term(t)
			s.waitLine(t, mark, "leaseside daemon stopped")
		default:
			s.kill(t)
		}
		stopped := boottime()
		s = startSidecarOn(t, fmt.Sprintf("sidecar %d (after %s)", i+2, how), nil, socket, args...)
		_, resumed := s.waitLine(t, 0, "resumed the previous daemon's leases")
		if !strings.Contains(resumed.v, fmt.Sprintf("leases=%d", 3*n+3)) || !strings.Contains(resumed.v, "lapsed=0") {
			t.Fatalf("after %s: %s, want all %d leases resumed", how, resumed.v, 3*n+3)
		}
		// Every connection lease's client comes back: the Go client's
		// n, run's, elect's and the Python client's.
		waitResumed(t, s, connNames(tokens))
		// The new process renews them: run's lease gets a deadline later
		// than any the previous process told.
		ch := make(chan *ipc.Event, 16)
		w := &ipc.Client{Socket: socket}
		w.Notify(ch)
		if err := w.Watch(ctx, "restart/run"); err != nil {
			t.Fatal(err)
		}
		for renewed := false; !renewed; {
			select {
			case ev := <-ch:
				renewed = ev.Event == ipc.EventRenewed && ev.DeadlineBoottimeNs > before["restart/run"].DeadlineBoottimeNs
				if ev.Event == ipc.EventLost || ev.Event == ipc.EventReleased {
					t.Fatalf("after %s: %+v", how, ev)
				}
			case <-ctx.Done():
				t.Fatalf("after %s: no renewal of restart/run", how)
			}
		}
		w.Close()
		after := heldOn(t, socket)
		for name, want := range tokens {
			if g, ok := after[name]; !ok || g.Token != want {
				t.Errorf("after %s: %s is held with token %q, want %s", how, name, g.Token, want)
			}
		}
		for _, l := range connLeases {
			select {
			case <-l.Done():
				t.Fatalf("after %s: the Go client's %s ended: %s", how, l.Lease, l.Reason())
			default:
			}
		}
		for _, p := range []*process{run, elect, python} {
			if p.done() {
				t.Fatalf("after %s: %s exited; output:\n%s", how, p.name, p.tail(20))
			}
		}
		for _, tag := range []string{"run", "elect"} {
			if b, err := os.ReadFile(filepath.Join(dir, tag+".signals")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("after %s: the %s child got signals: %q (%v)", how, tag, b, err)
			}
		}
		if lost := s.lost(); len(lost) > 0 {
			t.Fatalf("after %s: lost events %v", how, lost[0].v)
		}
		t.Logf("%s: the sidecar was down %s and resumed %d leases; run's lease renewed", how, ms(resumed.at.Sub(stopped)), len(after))
	}
	// A last check that the children kept running through it all.
	for _, p := range []*process{run, elect} {
		if err := p.cmd.Process.Signal(syscall.Signal(0)); err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
	}
}

// heldOn returns the grant of every lease the sidecar on socket holds, by
// name.
func heldOn(t *testing.T, socket string) map[string]ipc.Grant {
	t.Helper()
	c := &ipc.Client{Socket: socket}
	defer c.Close()
	grants, err := c.Status(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]ipc.Grant{}
	for _, g := range grants {
		m[g.Lease] = g
	}
	return m
}

// pythonHolder holds a lease owned by its connection through the Python
// client (argv[1] is the socket), says so, and says if it ever ends.
const pythonHolder = `
import sys, leaseside
c = leaseside.Client(sys.argv[1])
l = c.acquire("restart/python", ttl=30)
print("python holds", l.token, flush=True)
l.lost.wait()
print("python lost", l.reason, flush=True)
sys.exit(1)
`

// connNames are the leases of tokens whose owner is a connection.
func connNames(tokens map[string]string) map[string]bool {
	m := map[string]bool{}
	for name := range tokens {
		if !strings.Contains(name, "/detached/") && !strings.Contains(name, "/pid/") {
			m[name] = true
		}
	}
	return m
}

// waitResumed waits until the sidecar logged a resume of every one of
// names, and names those missing if it does not in time.
func waitResumed(t *testing.T, s *sidecar, names map[string]bool) {
	t.Helper()
	left := maps.Clone(names)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for from := 0; len(left) > 0; from++ {
		i, line, err := s.out.wait(ctx, from, containsAll("a client resumed its lease"))
		if err != nil {
			t.Fatalf("%s: no resume of %v (%v)", s.name, slices.Sorted(maps.Keys(left)), err)
		}
		from = i
		for name := range left {
			if strings.Contains(line.v, "lease="+name+" ") {
				delete(left, name)
			}
		}
	}
}
