package safefs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrLocked matches a LockedError with errors.Is.
var ErrLocked = errors.New("safefs: locked by another process")

// LockedError is Lock's answer for a file another process (or another
// open file of this one) holds the lock on: the file, and the pid its
// holder wrote in it.
type LockedError struct {
	// Path is the lock file.
	Path string
	// PID is the holder's pid, 0 when it could not be read.
	PID int
}

// Error names the file and the holder.
func (e *LockedError) Error() string {
	who := "another process"
	if e.PID > 0 {
		who = "pid " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("%s is locked by %s", e.Path, who)
}

// Is makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// Lock takes an exclusive, non-blocking flock on the file at path
// (created with mode 0600 if missing) and writes this process's pid in
// it. The file is opened as OpenFile opens it (no symbolic link followed,
// only a regular file of this user's with one name: an *UnsafeError
// otherwise), and truncated only once locked. A file locked already
// fails at once with a *LockedError naming the holder's pid. The lock
// lasts until the returned file is closed, or the process ends.
func Lock(path string) (*os.File, error) {
	f, err := OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &LockedError{Path: path, PID: readLockPID(path)}
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	return f, nil
}

// readLockPID reads the pid a lock holder wrote, 0 when there is none.
func readLockPID(path string) int {
	f, err := OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return 0
	}
	defer f.Close()
	b := make([]byte, 32)
	n, _ := f.Read(b)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
