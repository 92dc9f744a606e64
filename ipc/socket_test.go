package ipc

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// nobody is a uid and gid other than the test's.
const nobody = 65534

// A socket directory another user could replace the socket in is
// refused, with its path in the error: one owned by another user (a
// squatted /tmp/leaseside-UID), one writable by group or others, a
// symbolic link another user made (to a directory of ours: they could
// swap it for their own later), and one inside a directory another user
// owns or may write to without the sticky bit (they could rename it).
func TestListenRefusesUnsafeSocketDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give a directory to another user")
	}
	// Each prep gets a fresh directory of the test's (0700, in a 0700
	// parent of root's) and returns the socket directory to listen in.
	for _, tt := range []struct {
		name string
		prep func(dir string) (string, error)
		want string
	}{
		{name: "another user's", prep: func(dir string) (string, error) { return dir, os.Chown(dir, nobody, nobody) }, want: "belongs to uid 65534"},
		{name: "writable by others", prep: func(dir string) (string, error) { return dir, os.Chmod(dir, 0o777) }, want: "writable by its group or by others"},
		{name: "writable by its group", prep: func(dir string) (string, error) { return dir, os.Chmod(dir, 0o770) }, want: "writable by its group or by others"},
		{name: "another user's link", prep: func(dir string) (string, error) {
			link := dir + "-link"
			if err := os.Symlink(dir, link); err != nil {
				return "", err
			}
			return link, os.Lchown(link, nobody, nobody)
		}, want: "symbolic link owned by uid 65534"},
		{name: "in another user's directory", prep: func(dir string) (string, error) {
			return filepath.Join(dir, "sub"), errors.Join(os.Mkdir(filepath.Join(dir, "sub"), 0o700), os.Chown(dir, nobody, nobody))
		}, want: "which belongs to uid 65534"},
		{name: "new, in another user's directory", prep: func(dir string) (string, error) {
			// Refused before it is made: nothing is made in their directory.
			return filepath.Join(dir, "new"), os.Chown(dir, nobody, nobody)
		}, want: "which belongs to uid 65534"},
		{name: "in a directory others may write to", prep: func(dir string) (string, error) {
			return filepath.Join(dir, "sub"), errors.Join(os.Mkdir(filepath.Join(dir, "sub"), 0o700), os.Chmod(dir, 0o777))
		}, want: "no sticky bit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "leaseside-1000")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			sdir, err := tt.prep(dir)
			if err != nil {
				t.Fatal(err)
			}
			ln, err := Listen(filepath.Join(sdir, "s.sock"))
			if err == nil {
				ln.Close()
				t.Fatal("listened in an unsafe directory")
			}
			if !errors.Is(err, ErrUnsafeSocketDir) || !strings.Contains(err.Error(), sdir) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q, want ErrUnsafeSocketDir naming %s and saying %q", err, sdir, tt.want)
			}
			if _, err := os.Stat(filepath.Join(sdir, "s.sock")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the socket is there after the refusal (%v)", err)
			}
			if filepath.Base(sdir) == "new" {
				if _, err := os.Stat(sdir); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("the refused directory was made (%v)", err)
				}
			}
		})
	}
}

// The safe places are accepted: a directory of ours in a sticky,
// world-writable one (/tmp's kind), and our own link to one.
func TestListenAcceptsSafeSocketDir(t *testing.T) {
	tmp := t.TempDir()
	if err := os.Chmod(tmp, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "leaseside-1000")
	link := filepath.Join(tmp, "link")
	if err := errors.Join(os.Mkdir(dir, 0o700), os.Symlink(dir, link)); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, link} {
		ln, err := Listen(filepath.Join(d, "s.sock"))
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		ln.Close()
	}
}

// ListenGroup gives the socket to the group, and the directory too only
// when it is the daemon's own (created now, or holding nothing but the
// socket): a directory shared with other files keeps its group.
func TestListenGroupChangesOnlyADirectoryItCreated(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give files to another group")
	}
	gidOf := func(p string) int {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return int(fi.Sys().(*syscall.Stat_t).Gid)
	}
	existing := t.TempDir()
	if err := os.WriteFile(filepath.Join(existing, "other"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	before := gidOf(existing)
	ln, err := ListenGroup(filepath.Join(existing, "s.sock"), nobody)
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if got := gidOf(existing); got != before {
		t.Fatalf("the existing directory's group went from %d to %d", before, got)
	}
	made := filepath.Join(t.TempDir(), "made")
	sock := filepath.Join(made, "s.sock")
	ln, err = ListenGroup(sock, nobody)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if gidOf(made) != nobody || gidOf(sock) != nobody {
		t.Fatalf("created directory group %d, socket group %d; want both %d", gidOf(made), gidOf(sock), nobody)
	}
	if fi, _ := os.Stat(made); fi.Mode().Perm() != 0o750 {
		t.Fatalf("created directory mode %#o, want 0750", fi.Mode().Perm())
	}
	// The next run finds its own directory, with the stale socket only.
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if err := os.Chown(made, -1, 0); err != nil {
		t.Fatal(err)
	}
	ln, err = ListenGroup(sock, nobody)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if gidOf(made) != nobody {
		t.Fatalf("the daemon's own directory from an earlier run has group %d, want %d", gidOf(made), nobody)
	}
}

// A socket this user may not use is told apart from one nobody listens
// on: both match ErrNoDaemon, only the first ErrSocketPermission, and
// only the second asks whether the daemon runs.
func TestDialErrorTellsPermissionFromNoDaemon(t *testing.T) {
	for _, tt := range []struct {
		errno      syscall.Errno
		permission bool
		says       string
	}{
		{syscall.EACCES, true, "permission denied on its socket (it is for root and the socket's group"},
		{syscall.ENOENT, false, "(is it running?"},
		{syscall.ECONNREFUSED, false, "(is it running?"},
	} {
		err := dialError("/run/x.sock", &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", tt.errno)})
		if !errors.Is(err, ErrNoDaemon) || errors.Is(err, ErrSocketPermission) != tt.permission || !errors.Is(err, tt.errno) {
			t.Errorf("%v: %v matches ErrNoDaemon %v, ErrSocketPermission %v, the errno %v", tt.errno, err,
				errors.Is(err, ErrNoDaemon), errors.Is(err, ErrSocketPermission), errors.Is(err, tt.errno))
		}
		if !strings.Contains(err.Error(), "cannot reach the leaseside daemon at /run/x.sock") || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%v: %q does not say %q", tt.errno, err, tt.says)
		}
		if tt.permission && strings.Contains(err.Error(), "is it running") {
			t.Errorf("%v: %q asks whether it runs", tt.errno, err)
		}
	}
}
