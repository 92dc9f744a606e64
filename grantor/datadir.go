package grantor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/leaseside/leaseside/internal/safefs"
)

// lockFileName is the file in the data dir that a running grantor holds an
// exclusive flock on, with its pid written in it.
const lockFileName = "grantor.lock"

// ErrDataDirInUse is returned by New when another process (or another Node
// in this one) has the data dir open. See DataDirInUseError.
var ErrDataDirInUse = errors.New("grantor: data dir in use")

// DataDirInUseError names the data dir and the pid that holds it. It
// matches ErrDataDirInUse with errors.Is.
type DataDirInUseError struct {
	// Dir is the data dir.
	Dir string
	// PID is the process holding it, 0 when it could not be read.
	PID int
}

// Error names the dir and the pid.
func (e *DataDirInUseError) Error() string {
	who := "another process"
	if e.PID > 0 {
		who = "pid " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("grantor: data dir %s is in use by %s (another grantor or leaseside dev runs on it)", e.Dir, who)
}

// Is makes errors.Is(err, ErrDataDirInUse) true.
func (e *DataDirInUseError) Is(target error) bool { return target == ErrDataDirInUse }

// ErrUnsafeDataDir is returned by New for a data dir that another user
// controls: one that is not this process's user's or is writable by its
// group or others, reached through another user's symbolic link, or
// inside a directory another user may rename it in (not root's or this
// user's, or writable by others without the sticky bit); or one whose lock
// file is a symbolic link, another user's, or has other names. Another
// user could otherwise swap the raft log and snapshots, or make this
// process write over a file of their choosing.
var ErrUnsafeDataDir = errors.New("grantor: unsafe data dir")

// makeDataDir makes dir (the data dir, or one in it) and the dirs it
// needs (mode 0700), refusing with ErrUnsafeDataDir one another user
// controls, before anything is made inside it.
func makeDataDir(dir string) error {
	err := safefs.MkdirAll(dir, 0o700)
	if errors.Is(err, safefs.ErrUnsafe) {
		return fmt.Errorf("%w: %w: choose another --data-dir, or make it this user's (uid %d) and writable by nobody else",
			ErrUnsafeDataDir, err, os.Geteuid())
	}
	if err != nil {
		return fmt.Errorf("grantor: creating data dir %s: %w", dir, err)
	}
	return nil
}

// lockDataDir takes the data dir for this process: an exclusive,
// non-blocking flock on DIR/grantor.lock, which then holds our pid. A dir
// held by another process fails at once with a *DataDirInUseError, instead
// of blocking for good on the raft log's own lock. The lock file is opened
// without following a symbolic link, and only a regular file of this
// user's with no other name is locked and written (ErrUnsafeDataDir): it
// is truncated only after that. The lock ends when the returned file is
// closed, or with the process.
func lockDataDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := safefs.Lock(path)
	var held *safefs.LockedError
	switch {
	case errors.As(err, &held):
		return nil, &DataDirInUseError{Dir: dir, PID: held.PID}
	case errors.Is(err, safefs.ErrUnsafe):
		return nil, fmt.Errorf("%w: %w: remove it", ErrUnsafeDataDir, err)
	case err != nil:
		return nil, fmt.Errorf("grantor: %w", err)
	}
	return f, nil
}
