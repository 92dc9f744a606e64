package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/leaseside/leaseside/internal/safefs"
)

// TestStateDirLocked: a second daemon on a state directory another
// holds (review rev1's open finding 2: two daemons with one --state-dir
// and two sockets shared sessions and seqs, and wrote over each other's
// files) fails in New with ErrStateDirInUse, naming the directory and the
// holder's pid; once the first one's Run returns, a daemon starts on it.
// Fails without the lock: the second New succeeds.
func TestStateDirLocked(t *testing.T) {
	r := newRestartRig(t)
	_, stop1 := r.start(t)
	_, err := New(r.cfg)
	if !errors.Is(err, ErrStateDirInUse) || !strings.Contains(err.Error(), r.cfg.StateDir) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("a second daemon on the state dir: %v, want ErrStateDirInUse naming %s and pid %d", err, r.cfg.StateDir, os.Getpid())
	}
	stop1()
	r.start(t) // the first one's Run returned: the dir is free
}

// TestStateLockNotFollowed: a lock file that is a symbolic link (to a
// file of the daemon's user's choosing) is refused, not truncated.
func TestStateLockNotFollowed(t *testing.T) {
	r := newRestartRig(t)
	if err := os.MkdirAll(r.cfg.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(target, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(r.cfg.StateDir, stateLockName)); err != nil {
		t.Fatal(err)
	}
	if _, err := New(r.cfg); !errors.Is(err, safefs.ErrUnsafe) {
		t.Fatalf("a symbolic link as the lock file: %v, want safefs.ErrUnsafe", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep me\n" {
		t.Fatalf("the link's target was written: %q", b)
	}
}

// TestBoottimeOffset reads /proc/PID/timens_offsets' boottime line (its
// clock by name, or by number on older kernels), and refuses what is not
// CLOCK SECONDS NANOSECONDS.
func TestBoottimeOffset(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       int64
		bad        bool
	}{
		{name: "no time namespace", text: "monotonic           0         0\nboottime            0         0\n"},
		{name: "an offset", text: "monotonic           0         0\nboottime         1000       500\n", want: 1000e9 + 500},
		{name: "negative", text: "boottime -3 0\n", want: -3e9},
		{name: "by number", text: "1 0 0\n7 2 0\n", want: 2e9},
		{name: "no boottime line", text: "monotonic 5 0\n"},
		{name: "empty", text: ""},
		{name: "a field missing", text: "boottime 5\n", bad: true},
		{name: "not a number", text: "boottime five 0\n", bad: true},
		{name: "ns out of range", text: "boottime 1 1000000000\n", bad: true},
		{name: "seconds overflow", text: "boottime 9223372036854775807 0\n", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := boottimeOffset(tc.text)
			if (err != nil) != tc.bad || got != tc.want {
				t.Fatalf("boottimeOffset(%q) = %d, %v; want %d, error %v", tc.text, got, err, tc.want, tc.bad)
			}
		})
	}
}
