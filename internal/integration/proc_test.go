package integration

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaseside/leaseside/clockwatch"
)

// waitExit waits, without polling, for process pid (not necessarily our
// child) to end, and returns the CLOCK_BOOTTIME instant it saw the end at.
func waitExit(t *testing.T, pid int) clockwatch.Instant {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd_open(%d): %v", pid, err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(timeout.Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			t.Fatalf("process %d did not exit within %v (%v)", pid, timeout, err)
		}
		return clockwatch.System.Now()
	}
}

// background starts a command and returns a channel with its result.
func background(t *testing.T, cmd *exec.Cmd) (stdout *bufio.Reader, done <-chan result) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	ch := make(chan result, 1)
	r := bufio.NewReader(out)
	pr, pw := io.Pipe()
	go func() {
		io.Copy(pw, r)
		pw.Close()
	}()
	br := bufio.NewReader(pr)
	go func() {
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		ch <- result{code: code, stderr: errb.String()}
	}()
	return br, ch
}

func readLineT(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line := make(chan string, 1)
	go func() {
		s, _ := r.ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case s := <-line:
		return s
	case <-time.After(timeout):
		t.Fatal("no output line")
	}
	return ""
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return v
}

func waitResult(t *testing.T, done <-chan result) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(timeout):
		t.Fatal("command did not finish")
	}
	return result{}
}

// ownLag measures this test process's own stalls (CPU starvation on a
// busy machine, GC) from now on, and returns a func giving the longest
// so far. An instant the test observed (a process gone, a line read) may
// be late by that much: a bound checked on such an instant is
// inconclusive within it.
func ownLag(t *testing.T) func() time.Duration {
	t.Helper()
	p := clockwatch.NewPauseDetector(clockwatch.System, 10*time.Millisecond, time.Hour, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx, nil)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return func() time.Duration { return p.LongestRecent(clockwatch.System.Now()) }
}
