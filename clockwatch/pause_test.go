package clockwatch

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// waitFor bounds every wait on an event in these tests: generous for a
// loaded machine; passing tests never reach it.
const waitFor = 30 * time.Second

// runPause starts p.Run with its ticks sent to the returned channel, and
// waits until it has armed its first timer on f.
func runPause(t *testing.T, f *Fake, p *PauseDetector) <-chan Tick {
	t.Helper()
	ticks := make(chan Tick, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, func(tk Tick) { ticks <- tk }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v after cancel, want nil", err)
		}
	})
	waitArmed(t, f)
	return ticks
}

// waitArmed waits until a timer is waiting on f: the code under test has
// finished handling the last wake-up and gone back to sleep.
func waitArmed(t *testing.T, f *Fake) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := f.WaitTimers(ctx, 1); err != nil {
		t.Fatalf("nothing went to sleep on the fake clock: %v", err)
	}
}

func nextTick(t *testing.T, ticks <-chan Tick) Tick {
	t.Helper()
	select {
	case tk := <-ticks:
		return tk
	case <-time.After(waitFor):
		t.Fatal("no tick")
		return Tick{}
	}
}

func TestPauseDetectorOnTimeTickIsNoPause(t *testing.T) {
	f := NewFake(Instant(time.Hour))
	p := NewPauseDetector(f, 100*time.Millisecond, 500*time.Millisecond, time.Minute)
	ticks := runPause(t, f, p)
	for range 5 {
		f.Advance(100 * time.Millisecond)
		if tk := nextTick(t, ticks); tk.Paused || tk.Late != 0 || tk.At != f.Now() {
			t.Fatalf("on-time tick = %+v at %v", tk, f.Now())
		}
		waitArmed(t, f)
	}
	if p.Pauses() != 0 || p.Histogram().Count != 5 {
		t.Fatalf("after 5 on-time ticks: %d pauses, histogram %+v", p.Pauses(), p.Histogram())
	}
}

// Time passing far beyond the interval before the ticker runs again is a
// pause of the excess: what a SIGSTOP or a frozen cgroup looks like.
func TestPauseDetectorLateTickIsPause(t *testing.T) {
	f := NewFake(0)
	p := NewPauseDetector(f, 100*time.Millisecond, 500*time.Millisecond, time.Minute)
	ticks := runPause(t, f, p)
	f.Advance(10 * time.Second)
	tk := nextTick(t, ticks)
	if !tk.Paused || tk.Late != 10*time.Second-100*time.Millisecond {
		t.Fatalf("tick after a 10s stall = %+v, want a pause of 9.9s", tk)
	}
	waitArmed(t, f)
	// Late, but within the threshold: measured, not a pause.
	f.Advance(400 * time.Millisecond)
	if tk := nextTick(t, ticks); tk.Paused || tk.Late != 300*time.Millisecond {
		t.Fatalf("tick 300ms late = %+v", tk)
	}
	if p.Pauses() != 1 {
		t.Fatalf("Pauses = %d, want 1", p.Pauses())
	}
	if got := p.LongestRecent(f.Now()); got != 9900*time.Millisecond {
		t.Fatalf("LongestRecent = %v, want 9.9s", got)
	}
}

// A suspend is not a pause: the monotonic clock the ticker runs on does
// not move, so the ticker is not late (SuspendDetector reports suspends).
func TestPauseDetectorIgnoresSuspend(t *testing.T) {
	f := NewFake(0)
	p := NewPauseDetector(f, 100*time.Millisecond, 500*time.Millisecond, time.Minute)
	ticks := runPause(t, f, p)
	f.Suspend(time.Hour)
	f.Advance(100 * time.Millisecond)
	if tk := nextTick(t, ticks); tk.Paused {
		t.Fatalf("a suspend counted as a pause: %+v", tk)
	}
}

func TestHistogramBuckets(t *testing.T) {
	p := NewPauseDetector(NewFake(0), 0, 0, 0)
	for _, d := range []time.Duration{0, time.Millisecond, time.Millisecond + 1, 3 * time.Millisecond, time.Second, time.Hour} {
		p.observe(0, d)
	}
	p.observe(0, -time.Second) // counted as 0
	h := p.Histogram()
	if len(h.Bounds) != 17 || h.Bounds[0] != time.Millisecond || h.Bounds[16] != 65536*time.Millisecond || len(h.Counts) != 18 {
		t.Fatalf("bounds %v, %d counts", h.Bounds, len(h.Counts))
	}
	want := map[int]uint64{0: 3, 1: 1, 2: 1, 10: 1, 17: 1} // <=1ms, <=2ms, <=4ms, <=1.024s, overflow
	for i, c := range h.Counts {
		if c != want[i] {
			t.Errorf("bucket %d (<= %v) counts %d, want %d", i, h.Bounds[min(i, 16)], c, want[i])
		}
	}
	if h.Count != 7 || h.Sum != time.Hour+time.Second+5*time.Millisecond+1 {
		t.Errorf("Count %d, Sum %v", h.Count, h.Sum)
	}
	h.Counts[0] = 99 // a copy
	if p.Histogram().Counts[0] != 3 {
		t.Error("Histogram returned shared storage")
	}
}

func TestLongestRecentForgetsOldPauses(t *testing.T) {
	p := NewPauseDetector(NewFake(0), 0, 0, 10*time.Minute)
	at := Instant(time.Hour)
	p.observe(at, 5*time.Second)
	p.observe(at.Add(3*time.Minute), 2*time.Second)
	if got := p.LongestRecent(at.Add(5 * time.Minute)); got != 5*time.Second {
		t.Fatalf("5 minutes on: LongestRecent = %v, want 5s", got)
	}
	if got := p.LongestRecent(at.Add(11 * time.Minute)); got != 2*time.Second {
		t.Fatalf("11 minutes on: LongestRecent = %v, want 2s (the 5s pause left the window)", got)
	}
	if got := p.LongestRecent(at.Add(time.Hour)); got != 0 {
		t.Fatalf("an hour on: LongestRecent = %v, want 0", got)
	}
}

func TestProcessStopped(t *testing.T) {
	if stopped, err := ProcessStopped(os.Getpid()); err != nil || stopped {
		t.Fatalf("ProcessStopped(self) = %v, %v", stopped, err)
	}
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Wait for the stop itself, as a parent is told of it: no polling.
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, syscall.WUNTRACED, nil); err != nil || !ws.Stopped() {
		t.Fatalf("wait for stop: %v, status %v", err, ws)
	}
	if stopped, err := ProcessStopped(pid); err != nil || !stopped {
		t.Fatalf("ProcessStopped(stopped child) = %v, %v", stopped, err)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := syscall.Wait4(pid, &ws, syscall.WCONTINUED, nil); err != nil || !ws.Continued() {
		t.Fatalf("wait for continue: %v, status %v", err, ws)
	}
	if stopped, err := ProcessStopped(pid); err != nil || stopped {
		t.Fatalf("ProcessStopped(continued child) = %v, %v", stopped, err)
	}

	// Beyond any pid_max: no such process.
	if _, err := ProcessStopped(1 << 30); !errors.Is(err, ErrNoProcess) {
		t.Fatalf("ProcessStopped(no such pid) error = %v, want ErrNoProcess", err)
	}
	if _, err := ProcessStopped(0); err == nil {
		t.Fatal("ProcessStopped(0) gave no error")
	}
}

func TestStatState(t *testing.T) {
	tests := []struct {
		name  string
		line  string
		state byte
		bad   bool
	}{
		{name: "plain", line: "42 (sleep) S 1 42 42 0 -1", state: 'S'},
		{name: "stopped", line: "42 (sleep) T 1 42", state: 'T'},
		{name: "tracing stop", line: "42 (gdb target) t 1", state: 't'},
		{name: "parens and spaces in name", line: "42 (a) T (b)) R 1 2 3", state: 'R'},
		{name: "no parens", line: "42 sleep S", bad: true},
		{name: "truncated", line: "42 (sleep)", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := statState([]byte(tc.line))
			if tc.bad {
				if err == nil {
					t.Fatalf("no error for %q", tc.line)
				}
				return
			}
			if err != nil || got != tc.state {
				t.Fatalf("statState(%q) = %q, %v; want %q", tc.line, got, err, tc.state)
			}
		})
	}
}
