package cli

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// watch prints every way a lease ends with its snake_case reason, and
// clock events with their length, against a real daemon: releases by a
// request, by the owning connection closing, by the owner process
// exiting, the owner of a lease with a lock-delay disconnecting (the
// grantor keeps the delay: the daemon reports the release at once); and
// the daemon stopped (SIGSTOP) and
// continued.
func TestWatchPrintsReasonsAndClockEvents(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	dev := startProc(t, "dev", "dev", "--socket", sock, "--data-dir", filepath.Join(t.TempDir(), "dev"))
	dev.waitLine(t, "leaseside dev ready")

	out := newOutput()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- execute(ctx, []string{"watch", "--socket", sock}, out, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	// The watch is on once a first acquire shows.
	acquire := func(name string, opt ipc.AcquireOptions) (*ipc.Client, string) {
		t.Helper()
		c := &ipc.Client{Socket: sock}
		t.Cleanup(func() { c.Close() })
		if opt.TTL == 0 {
			opt.TTL = 10 * time.Second
		}
		l, err := c.Acquire(context.Background(), name, opt)
		if err != nil {
			t.Fatalf("acquire %s: %v", name, err)
		}
		return c, l.Token
	}
	line := func(event, lease, token, rest string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^` + event + ` +` + regexp.QuoteMeta(lease+" token "+token+rest) + `$`)
	}
	for start := time.Now(); ; {
		c, tok := acquire("first", ipc.AcquireOptions{})
		c.Release(context.Background(), "first")
		if m := regexp.MustCompile(`(?m)^acquired +first token ` + tok + `$`).FindString(out.text()); m != "" {
			out.waitMatch(t, line("released", "first", tok, " (explicit_release)"))
			break
		}
		if time.Since(start) > procTimeout {
			t.Fatalf("watch printed nothing:\n%s", out.text())
		}
		<-time.After(100 * time.Millisecond) // the watch may not be on yet: acquire again
	}

	c, tok := acquire("conn", ipc.AcquireOptions{})
	c.Close()
	out.waitMatch(t, line("released", "conn", tok, " (owner_disconnected)"))

	c, tok = acquire("delayed", ipc.AcquireOptions{LockDelay: time.Second})
	c.Close()
	out.waitMatch(t, line("released", "delayed", tok, " (owner_disconnected)"))

	owner := exec.Command("sleep", "1000")
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	_, tok = acquire("pid", ipc.AcquireOptions{Owner: ipc.OwnerPID, OwnerPID: owner.Process.Pid})
	owner.Process.Kill()
	owner.Wait()
	out.waitMatch(t, line("released", "pid", tok, " (owner_exited)"))

	dev.cmd.Process.Signal(syscall.SIGSTOP)
	<-time.After(1500 * time.Millisecond) // the fault: the daemon is stopped this long
	dev.cmd.Process.Signal(syscall.SIGCONT)
	out.waitMatch(t, regexp.MustCompile(`(?m)^pause +daemon paused for (1\.[0-9]+|[2-9]|[1-9][0-9]+)(\.[0-9]+)?s$`))
}

// Every event has a line of its own shape.
func TestEventLine(t *testing.T) {
	tests := []struct {
		ev   ipc.Event
		want string
	}{
		{ipc.Event{Event: ipc.EventLost, Lease: "a", Token: "7", Reason: ipc.ReasonRenewFailed}, "lost       a token 7 (renew_failed)"},
		{ipc.Event{Event: ipc.EventRenewed, Lease: "a", Token: "7", ValidMs: 14900}, "renewed    a token 7 valid 14.9s"},
		{ipc.Event{Event: ipc.EventSuspend, LengthMs: 90_000}, "suspend    host suspended for 1m30s"},
		{ipc.Event{Event: ipc.EventPause, LengthMs: 1234}, "pause      daemon paused for 1.234s"},
		{ipc.Event{Event: ipc.EventDrift, RatePPM: 612}, "drift      clock drifts +612.0 ppm against the grantor"},
		{ipc.Event{Event: ipc.EventUnsynced}, "unsynced   kernel clock not synchronised"},
		{ipc.Event{Event: ipc.EventJeopardy, Lease: "a", Token: "7", ValidMs: 4900}, "jeopardy   a token 7 valid 4.9s"},
		{ipc.Event{Event: ipc.EventSafe, Lease: "a", Token: "7", ValidMs: 14900}, "safe       a token 7 valid 14.9s"},
		{ipc.Event{Event: ipc.EventHolder, Lease: "p", Change: ipc.ChangeSync, Limit: 3, Holders: []ipc.Holder{{Token: "4"}, {Token: "9"}}},
			"holder     p sync; holders 2/3: 4 9"},
		{ipc.Event{Event: ipc.EventHolder, Lease: "p", Change: ipc.ChangeExpired, Token: "4", Holder: "web1", Limit: 3, Holders: []ipc.Holder{{Token: "9"}}},
			"holder     p expired token 4 on web1; holders 1/3: 9"},
		{ipc.Event{Event: ipc.EventHolder, Lease: "e", Change: ipc.ChangeProclaimed, Token: "5", Holder: "insecure", Value: "10.0.0.5", Holders: []ipc.Holder{{Token: "5"}}},
			`holder     e proclaimed token 5 value "10.0.0.5"; holders 1: 5`},
		{ipc.Event{Event: ipc.EventHolder, Lease: "e", Change: ipc.ChangeReleased, Token: "5"}, "holder     e released token 5; holders 0"},
		{ipc.Event{Event: ipc.EventLeader, Lease: "e", Token: "5", Holder: "web1", Value: "10.0.0.5"}, `leader     e token 5 on web1 value "10.0.0.5"`},
		{ipc.Event{Event: ipc.EventNoLeader, Lease: "e"}, "no_leader  e"},
	}
	for _, tt := range tests {
		if got := eventLine(&tt.ev); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.ev.Event, got, tt.want)
		}
	}
}

// Signals by name, with or without SIG, in any case, or by number.
func TestParseSignal(t *testing.T) {
	for in, want := range map[string]syscall.Signal{"": 0, "SIGUSR1": syscall.SIGUSR1, "usr2": syscall.SIGUSR2, "Hup": syscall.SIGHUP, "10": syscall.Signal(10), "40": syscall.Signal(40)} {
		if got, err := parseSignal(in); err != nil || got != want {
			t.Errorf("parseSignal(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"SIGNOPE", "0", "65", "-1", "USR"} {
		if _, err := parseSignal(in); err == nil {
			t.Errorf("parseSignal(%q) accepted", in)
		}
	}
}
