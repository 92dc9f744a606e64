package safefs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nobody is a uid other than this test's (they run as root).
const nobody = 65534

// CheckDir holds a directory to the rule: this user's, writable by
// nobody else, and inside directories of this user's or root's that
// others may not rename it in. A sticky directory open to all (/tmp) may
// hold one; another user's directory is refused also there.
func TestCheckDir(t *testing.T) {
	tests := []struct {
		name string
		// prep makes the case under base (this user's, 0700) and
		// returns the dir to check.
		prep func(t *testing.T, base string) string
		want string // "" for no refusal
	}{
		{name: "this user's, 0700", prep: func(t *testing.T, base string) string { return mkdir(t, base, "d", 0o700) }},
		{name: "this user's, 0755", prep: func(t *testing.T, base string) string { return mkdir(t, base, "d", 0o755) }},
		{name: "in a sticky dir open to all", prep: func(t *testing.T, base string) string {
			chmod(t, base, 0o777|os.ModeSticky)
			return mkdir(t, base, "d", 0o700)
		}},
		{name: "another user's in a sticky dir", prep: func(t *testing.T, base string) string {
			chmod(t, base, 0o777|os.ModeSticky)
			d := mkdir(t, base, "d", 0o700)
			chown(t, d)
			return d
		}, want: "belongs to uid 65534"},
		{name: "writable by others", prep: func(t *testing.T, base string) string { return mkdir(t, base, "d", 0o777) },
			want: "writable by its group or by others"},
		{name: "in a dir open to all without the sticky bit", prep: func(t *testing.T, base string) string {
			chmod(t, base, 0o777)
			return mkdir(t, base, "d", 0o700)
		}, want: "which others may write to"},
		{name: "in another user's dir", prep: func(t *testing.T, base string) string {
			d := mkdir(t, base, "d", 0o700)
			chown(t, base)
			return d
		}, want: "which belongs to uid 65534"},
		{name: "a file", prep: func(t *testing.T, base string) string {
			p := filepath.Join(base, "f")
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, want: "is not a directory"},
		{name: "through this user's link", prep: func(t *testing.T, base string) string {
			d := mkdir(t, base, "d", 0o700)
			l := filepath.Join(base, "l")
			if err := os.Symlink(d, l); err != nil {
				t.Fatal(err)
			}
			return l
		}},
		{name: "through another user's link", prep: func(t *testing.T, base string) string {
			d := mkdir(t, base, "d", 0o700)
			l := filepath.Join(base, "l")
			if err := os.Symlink(d, l); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(l, nobody, nobody); err != nil {
				t.Fatal(err)
			}
			return l
		}, want: "is a symbolic link owned by uid 65534"},
		{name: "a link to a dir inside another user's", prep: func(t *testing.T, base string) string {
			o := mkdir(t, base, "other", 0o755)
			d := mkdir(t, o, "d", 0o700)
			chown(t, o)
			l := filepath.Join(base, "l")
			if err := os.Symlink(d, l); err != nil {
				t.Fatal(err)
			}
			return l
		}, want: "which belongs to uid 65534"},
		{name: "this user's link in a dir open to all without the sticky bit", prep: func(t *testing.T, base string) string {
			d := mkdir(t, base, "d", 0o700)
			o := mkdir(t, base, "open", 0o700)
			l := filepath.Join(o, "l")
			if err := os.Symlink(d, l); err != nil {
				t.Fatal(err)
			}
			chmod(t, o, 0o777)
			return l
		}, want: "which others may write to"},
		{name: "a dir below another user's link", prep: func(t *testing.T, base string) string {
			o := mkdir(t, base, "o", 0o755)
			mkdir(t, o, "d", 0o700)
			l := filepath.Join(base, "l")
			if err := os.Symlink(o, l); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(l, nobody, nobody); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(l, "d")
		}, want: "a symbolic link owned by uid 65534"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.prep(t, t.TempDir())
			err := CheckDir(dir)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("CheckDir(%s): %v, want nil", dir, err)
				}
				return
			}
			var ue *UnsafeError
			if !errors.Is(err, ErrUnsafe) || !errors.As(err, &ue) || ue.Path != dir || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CheckDir(%s): %v, want an UnsafeError naming it and saying %q", dir, err, tt.want)
			}
		})
	}
}

// MkdirAll makes nothing inside a directory another user controls.
func TestMkdirAllMakesNothingInAnotherUsersDir(t *testing.T) {
	base := t.TempDir()
	chown(t, base)
	dir := filepath.Join(base, "a", "b")
	if err := MkdirAll(dir, 0o700); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "which belongs to uid 65534") {
		t.Fatalf("MkdirAll: %v, want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(base, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("MkdirAll made a dir in another user's (%v)", err)
	}
	mine := filepath.Join(t.TempDir(), "a", "b")
	if err := MkdirAll(mine, 0o700); err != nil {
		t.Fatalf("MkdirAll in this user's dir: %v", err)
	}
}

// OpenFile opens a regular file of this user's with one name, and refuses
// a symbolic link, a hard link, another user's file and a FIFO (without
// waiting on it), leaving what they reach as it was.
func TestOpenFile(t *testing.T) {
	const secret = "secret\n"
	tests := []struct {
		name string
		prep func(t *testing.T, path, victim string)
		want string
	}{
		{name: "new file", prep: func(t *testing.T, path, victim string) {}},
		{name: "existing file", prep: func(t *testing.T, path, victim string) { write(t, path) }},
		{name: "symbolic link", prep: func(t *testing.T, path, victim string) {
			if err := os.Symlink(victim, path); err != nil {
				t.Fatal(err)
			}
		}, want: "is a symbolic link"},
		{name: "hard link", prep: func(t *testing.T, path, victim string) {
			if err := os.Link(victim, path); err != nil {
				t.Fatal(err)
			}
		}, want: "has 2 names"},
		{name: "another user's", prep: func(t *testing.T, path, victim string) {
			write(t, path)
			chown(t, path)
		}, want: "belongs to uid 65534"},
		{name: "FIFO", prep: func(t *testing.T, path, victim string) {
			if err := mkfifo(path); err != nil {
				t.Fatal(err)
			}
		}, want: "is not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			victim := filepath.Join(t.TempDir(), "victim")
			if err := os.WriteFile(victim, []byte(secret), 0o600); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "f")
			tt.prep(t, path, victim)
			f, err := OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("OpenFile: %v", err)
				}
				if _, err := f.WriteString("x"); err != nil {
					t.Fatal(err)
				}
				f.Close()
				return
			}
			if err == nil {
				f.Close()
				t.Fatal("OpenFile opened it")
			}
			if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), path+" "+tt.want) {
				t.Fatalf("OpenFile: %v, want a refusal saying %q", err, tt.want)
			}
			if b, _ := os.ReadFile(victim); string(b) != secret {
				t.Fatalf("the victim holds %q", b)
			}
		})
	}
}

func mkdir(t *testing.T, parent, name string, mode os.FileMode) string {
	t.Helper()
	d := filepath.Join(parent, name)
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	chmod(t, d, mode)
	return d
}

func chmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, p string) {
	t.Helper()
	if err := os.Chown(p, nobody, nobody); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p, []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}
