package grantor

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A second node on a data dir in use fails at once, naming the dir and
// the pid that holds it; once the first is stopped the dir can be used.
func TestNewRefusesDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	first := start(t, fastConfig(t, dir), true)

	cfg := fastConfig(t, dir)
	n, err := New(cfg)
	if err == nil {
		n.Shutdown()
		t.Fatal("a second node started on a data dir in use")
	}
	var inUse *DataDirInUseError
	if !errors.As(err, &inUse) || !errors.Is(err, ErrDataDirInUse) {
		t.Fatalf("second New: %v, want a DataDirInUseError", err)
	}
	if inUse.Dir != dir || inUse.PID != os.Getpid() {
		t.Fatalf("error names dir %q pid %d, want %q pid %d", inUse.Dir, inUse.PID, dir, os.Getpid())
	}
	if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("message %q does not name the dir and the pid", msg)
	}

	first.stop()
	again := start(t, fastConfig(t, dir), true)
	again.stop()
}

// nobody is a uid other than this test's (they run as root): what another
// local user owns.
const nobody = 65534

// A data dir another user controls is refused before anything is
// written in or through it, naming what is wrong, and a lock file that
// points elsewhere (a symbolic link, a hard link) is never opened for
// writing: the file it reaches keeps its bytes (issue 21: with
// grantor.lock a symlink to a root-only file, New truncated it and wrote
// its pid into it).
func TestNewRefusesADataDirAnotherUserControls(t *testing.T) {
	const secret = "root's file\n"
	tests := []struct {
		name string
		// prep makes the case in a fresh dir and returns the data dir
		// and what the refusal must name; victim is a file of root's
		// outside it.
		prep func(t *testing.T, dir, victim string) (data, names string)
	}{
		{name: "lock file a symbolic link", prep: func(t *testing.T, dir, victim string) (string, string) {
			must(t, os.Symlink(victim, filepath.Join(dir, lockFileName)))
			return dir, filepath.Join(dir, lockFileName) + " is a symbolic link"
		}},
		{name: "lock file a hard link", prep: func(t *testing.T, dir, victim string) (string, string) {
			must(t, os.Link(victim, filepath.Join(dir, lockFileName)))
			return dir, "has 2 names"
		}},
		{name: "lock file another user's", prep: func(t *testing.T, dir, victim string) (string, string) {
			p := filepath.Join(dir, lockFileName)
			must(t, os.WriteFile(p, []byte(secret), 0o600))
			must(t, os.Chown(p, nobody, nobody))
			return dir, p + " belongs to uid 65534"
		}},
		{name: "data dir another user's", prep: func(t *testing.T, dir, victim string) (string, string) {
			must(t, os.Chown(dir, nobody, nobody))
			return dir, dir + " belongs to uid 65534"
		}},
		{name: "data dir writable by its group", prep: func(t *testing.T, dir, victim string) (string, string) {
			must(t, os.Chmod(dir, 0o770))
			return dir, dir + " is writable by its group or by others"
		}},
		{name: "new data dir in another user's dir", prep: func(t *testing.T, dir, victim string) (string, string) {
			must(t, os.Chown(dir, nobody, nobody))
			return filepath.Join(dir, "data"), "is inside " + dir + ", which belongs to uid 65534"
		}},
		{name: "data dir in a dir open to all without the sticky bit", prep: func(t *testing.T, dir, victim string) (string, string) {
			must(t, os.Chmod(dir, 0o777))
			data := filepath.Join(dir, "data")
			must(t, os.Mkdir(data, 0o700))
			return data, "is inside " + dir + ", which others may write to"
		}},
		{name: "data dir a symbolic link of another user's", prep: func(t *testing.T, dir, victim string) (string, string) {
			real := filepath.Join(dir, "real")
			must(t, os.Mkdir(real, 0o700))
			link := filepath.Join(dir, "data")
			must(t, os.Symlink(real, link))
			must(t, os.Lchown(link, nobody, nobody))
			return link, link + " is a symbolic link owned by uid 65534"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			victim := filepath.Join(t.TempDir(), "victim")
			must(t, os.WriteFile(victim, []byte(secret), 0o600))
			dir := t.TempDir()
			data, names := tt.prep(t, dir, victim)
			n, err := New(fastConfig(t, data))
			if err == nil {
				n.Shutdown()
				t.Fatal("New started on a data dir another user controls")
			}
			if !errors.Is(err, ErrUnsafeDataDir) || !strings.Contains(err.Error(), names) {
				t.Fatalf("New: %v, want ErrUnsafeDataDir saying %q", err, names)
			}
			if b, err := os.ReadFile(victim); err != nil || string(b) != secret {
				t.Fatalf("the victim file now holds %q (%v), want %q", b, err, secret)
			}
			if _, err := os.Stat(filepath.Join(data, "raft")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("New made its raft dir in the refused data dir (%v)", err)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
