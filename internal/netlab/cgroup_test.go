package netlab

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cpuTime is the CPU time pid has used (user and system), from
// /proc/PID/stat.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// inLabGroup reports whether pid is in one of the lab's groups.
func inLabGroup(t *testing.T, pid int) bool {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), fmt.Sprintf("/netlab-%d-", os.Getpid()))
}

// A busy loop limited to 5% of a CPU uses at most a small part of the
// time that passes; Unlimit puts it back where it was and removes the
// lab's group. (A bound from below on what the limit allows: load on the
// machine only lowers the use further.)
func TestLimitCPU(t *testing.T) {
	l := New(t, 1)
	cmd := l.Host(0).Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	pid := cmd.Process.Pid
	if err := l.LimitCPU(pid, 0.05); err != nil {
		if errors.Is(err, ErrNoLimit) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	if !inLabGroup(t, pid) {
		t.Fatalf("pid %d is not in a group of the lab", pid)
	}
	used0, start := cpuTime(t, pid), time.Now()
	time.Sleep(2 * time.Second) // the measurement: how much CPU the loop gets in this time
	used, wall := cpuTime(t, pid)-used0, time.Since(start)
	if used > wall/4 {
		t.Errorf("limited to 5%% of a CPU, the loop used %v in %v", used, wall)
	}
	l.mu.Lock()
	dir := l.limits[0].dir
	l.mu.Unlock()
	if err := l.Unlimit(pid); err != nil {
		t.Fatal(err)
	}
	if inLabGroup(t, pid) {
		t.Errorf("pid %d still in the lab's group after Unlimit", pid)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there after Unlimit: %v", dir, err)
	}
}

// A process limited to 10 writes a second to the disk of a directory
// takes seconds for 10 synchronous writes there, which take milliseconds
// unlimited.
func TestLimitDiskWrites(t *testing.T) {
	l := New(t, 1)
	dir := t.TempDir()
	cmd := l.Host(0).Command("sh", "-c", `read go && dd if=/dev/zero of="$1" bs=4k count=10 oflag=dsync 2>/dev/null && echo done`, "sh", filepath.Join(dir, "f"))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	if err := l.LimitDiskWrites(cmd.Process.Pid, dir, 10); err != nil {
		if errors.Is(err, ErrNoLimit) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	start := time.Now()
	io.WriteString(in, "go\n")
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "done\n" {
		t.Fatalf("dd: %q, %v", line, err)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("10 synchronous writes at 10 a second took %v", took)
	}
	if err := l.Unlimit(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
}

// A data directory on no block device cannot be slowed down, and the
// error says so.
func TestLimitDiskWritesNoDevice(t *testing.T) {
	l := New(t, 1)
	err := l.LimitDiskWrites(os.Getpid(), "/proc", 5)
	if !errors.Is(err, ErrNoLimit) || !strings.Contains(err.Error(), "not a block device") {
		t.Fatalf("LimitDiskWrites on /proc: %v, want ErrNoLimit saying why", err)
	}
}
