// Package safefs checks that nobody but this process's user controls the
// directories and files a leaseside process keeps its state in (the
// sidecar's socket directory, a grantor's data dir, `leaseside dev`'s), and
// opens state files without following symbolic links.
//
// The rule, for a directory: it is this process's user's (by its euid),
// not writable by its group or by others, not reached through a symbolic
// link another user owns, and every directory above it (after symbolic
// links) is this user's or root's and not writable by others unless it has
// the sticky bit (/tmp): otherwise another user could put files in it, or
// rename it away and put their own in its place. A directory owned by
// another user is refused also inside a sticky /tmp: its owner can change
// what is in it.
package safefs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrUnsafe matches every refusal of this package with errors.Is.
var ErrUnsafe = errors.New("safefs: a path another user controls")

// UnsafeError is a refusal: the path, and why another user controls it.
// It matches ErrUnsafe.
type UnsafeError struct {
	// Path is the directory or file refused.
	Path string
	// Why says who controls it and how, following the path in a sentence.
	Why string
}

// Error is the path and why.
func (e *UnsafeError) Error() string { return e.Path + " " + e.Why }

// Is makes errors.Is(err, ErrUnsafe) true.
func (e *UnsafeError) Is(target error) bool { return target == ErrUnsafe }

func unsafe(path, format string, args ...any) error {
	return &UnsafeError{Path: path, Why: fmt.Sprintf(format, args...)}
}

// CheckDir refuses dir unless nobody but this process's user controls it
// (the package's rule). A refusal is an *UnsafeError naming dir.
func CheckDir(dir string) error {
	euid := os.Geteuid()
	if fi, err := os.Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		if uid := owner(fi); uid != euid && uid != 0 {
			return unsafe(dir, "is a symbolic link owned by uid %d, who could point it elsewhere", uid)
		}
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	switch {
	case !fi.IsDir():
		return unsafe(dir, "is not a directory")
	case owner(fi) != euid:
		return unsafe(dir, "belongs to uid %d, not to this process's uid %d, so that user could change what is in it", owner(fi), euid)
	case fi.Mode().Perm()&0o022 != 0:
		return unsafe(dir, "is writable by its group or by others (mode %#o), who could change what is in it; make it 0750 or 0700", fi.Mode().Perm())
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	// Both the directories above the path as given (whoever may write
	// one may swap the symbolic link below it) and those above where it
	// leads.
	if err := checkAbove(dir, dir); err != nil {
		return err
	}
	return checkAbove(dir, real)
}

// checkAbove refuses dir (really at real) when a directory above real is
// another user's, or writable by others without the sticky bit, or is a
// symbolic link another user owns.
func checkAbove(dir, real string) error {
	euid := os.Geteuid()
	real, err := filepath.Abs(real)
	if err != nil {
		return err
	}
	for p := filepath.Dir(real); ; p = filepath.Dir(p) {
		if li, err := os.Lstat(p); err == nil && li.Mode()&os.ModeSymlink != 0 {
			if uid := owner(li); uid != euid && uid != 0 {
				return unsafe(dir, "is inside %s, a symbolic link owned by uid %d, who could point it elsewhere", p, uid)
			}
		}
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		switch uid := owner(fi); {
		case uid != euid && uid != 0:
			return unsafe(dir, "is inside %s, which belongs to uid %d, who could rename it and put their own in its place", p, uid)
		case fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0:
			return unsafe(dir, "is inside %s, which others may write to (mode %#o, no sticky bit), so they could rename it and put their own in its place",
				p, fi.Mode().Perm())
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// MkdirAll makes dir and the directories it needs (mode perm) and checks
// it (CheckDir). Nothing is made inside a directory that fails the rule
// for the directories above: the nearest one that exists is checked
// first.
func MkdirAll(dir string, perm os.FileMode) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		have := filepath.Dir(dir)
		for {
			if _, err := os.Stat(have); err == nil || have == filepath.Dir(have) {
				break
			}
			have = filepath.Dir(have)
		}
		real, err := filepath.EvalSymlinks(have)
		if err != nil {
			return err
		}
		if err := checkAbove(dir, filepath.Join(have, "x")); err != nil {
			return err
		}
		if err := checkAbove(dir, filepath.Join(real, "x")); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, perm); err != nil {
			return err
		}
	}
	return CheckDir(dir)
}

// OpenFile opens path as os.OpenFile does, without following a symbolic
// link at its end (O_NOFOLLOW) and close-on-exec, and refuses a file that
// is not a regular file, is another user's, or has another name (a hard
// link): what it writes then lands only in a file of this user's that no
// other path reaches. Give it no O_TRUNC: truncate after it returns, once
// the file is known to be the right one. It opens with O_NONBLOCK, so that
// a FIFO put in the file's place cannot hold it up (a regular file ignores
// the flag).
func OpenFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, perm)
	switch {
	case errors.Is(err, syscall.ELOOP):
		return nil, unsafe(path, "is a symbolic link; not following it")
	case errors.Is(err, syscall.ENXIO): // a FIFO without a reader, a socket
		return nil, unsafe(path, "is not a regular file (a FIFO or a socket)")
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	switch euid := os.Geteuid(); {
	case !fi.Mode().IsRegular():
		err = unsafe(path, "is not a regular file (%v)", fi.Mode().Type())
	case int(st.Uid) != euid:
		err = unsafe(path, "belongs to uid %d, not to this process's uid %d", st.Uid, euid)
	case st.Nlink > 1:
		err = unsafe(path, "has %d names (hard links), so writing it changes a file another path reaches", st.Nlink)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func owner(fi os.FileInfo) int { return int(fi.Sys().(*syscall.Stat_t).Uid) }
