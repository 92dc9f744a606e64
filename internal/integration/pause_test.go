package integration

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// SIGSTOP the real daemon for longer than a lease's term, then SIGCONT
// it: the daemon reports the pause, the owner gets lost, and no answer
// after the resume carries a deadline from before the pause.
func TestStoppedDaemonReportsPauseAndLoses(t *testing.T) {
	t.Parallel()
	socket := tempSocket(t)
	dev := startDev(t, socket, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	watcher := &ipc.Client{Socket: socket}
	defer watcher.Close()
	wev := make(chan *ipc.Event, 256)
	watcher.Notify(wev)
	if err := watcher.Watch(ctx, ""); err != nil {
		t.Fatal(err)
	}
	owner := &ipc.Client{Socket: socket}
	defer owner.Close()
	const term = 2 * time.Second
	l, err := owner.Acquire(ctx, "jobs/stopped", ipc.AcquireOptions{TTL: term})
	if err != nil {
		t.Fatal(err)
	}

	dev.cmd.Process.Signal(syscall.SIGSTOP)
	<-time.After(term + time.Second) // the fault: the daemon is stopped this long
	resumed := clockwatch.System.Now()
	dev.cmd.Process.Signal(syscall.SIGCONT)

	select {
	case <-l.Done():
		if r := l.Reason(); r != ipc.ReasonDeadlinePassed && r != ipc.ReasonRenewFailed {
			t.Errorf("lost reason %q", r)
		}
	case <-ctx.Done():
		t.Fatal("the owner was not told its lease was lost")
	}
	for pause := false; !pause; {
		select {
		case ev := <-wev:
			if ev.Event == ipc.EventPause {
				pause = true
				if ev.LengthMs < term.Milliseconds() {
					t.Errorf("pause reported as %dms, the daemon was stopped %v", ev.LengthMs, term+time.Second)
				}
			}
		case <-ctx.Done():
			t.Fatal("the daemon did not report the pause")
		}
	}
	leases, err := watcher.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range leases {
		if clockwatch.Instant(g.DeadlineBoottimeNs).Before(resumed) {
			t.Fatalf("after the resume, status shows %s with a deadline from before it", g.Lease)
		}
	}
	if _, err := watcher.Check(ctx, "jobs/stopped", ""); err == nil {
		t.Fatal("check says the lost lease is held")
	}
}
