package safefs

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLockRefusesWhatIsNotItsFile (review rev3 of 99f1967): Lock takes
// only a regular file of this user's with one name, and never follows a
// symbolic link (a dangling one is not created through); what is there
// instead is refused with a message naming it, and left as it is.
func TestLockRefusesWhatIsNotItsFile(t *testing.T) {
	tests := []struct {
		name string
		prep func(t *testing.T, path string)
		want string
	}{
		{name: "a directory", prep: func(t *testing.T, path string) { mkdir(t, filepath.Dir(path), filepath.Base(path), 0o700) }, want: "is a directory"},
		{name: "a FIFO", prep: func(t *testing.T, path string) {
			if err := mkfifo(path); err != nil {
				t.Fatal(err)
			}
		}, want: "is not a regular file"},
		{name: "another user's file", prep: func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("1\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			chown(t, path)
		}, want: "belongs to uid 65534"},
		{name: "a dangling symbolic link", prep: func(t *testing.T, path string) {
			if err := os.Symlink(path+".target", path); err != nil {
				t.Fatal(err)
			}
		}, want: "is a symbolic link"},
		{name: "a second name of a file", prep: func(t *testing.T, path string) {
			if err := os.WriteFile(path+".other", nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(path+".other", path); err != nil {
				t.Fatal(err)
			}
		}, want: "has 2 names"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.lock")
			tt.prep(t, path)
			f, err := Lock(path)
			if err == nil {
				f.Close()
				t.Fatalf("Lock took %s", tt.name)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Lock: %v, want it to say %q", err, tt.want)
			}
			if _, err := os.Lstat(path + ".target"); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a file was made through the link: %v", err)
			}
		})
	}
}

// TestLockHeldAndReleased: a second Lock of a held file fails at once with
// a *LockedError naming the holder's pid (matching ErrLocked), and the
// file is taken again once the holder's file is closed, as it is when a
// process ends however it ends.
func TestLockHeldAndReleased(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	f, err := Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file holds %q (%v), want this pid", b, err)
	}
	_, err = Lock(path)
	var held *LockedError
	if !errors.As(err, &held) || !errors.Is(err, ErrLocked) || held.PID != os.Getpid() {
		t.Fatalf("second Lock: %v, want a LockedError naming pid %d", err, os.Getpid())
	}
	f.Close()
	f2, err := Lock(path)
	if err != nil {
		t.Fatalf("Lock after the holder closed it: %v", err)
	}
	f2.Close()
}
