package fence

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// RecordSuffix names the record file beside a fenced file: the highest
// token per lease that wrote PATH is kept in PATH + RecordSuffix.
const RecordSuffix = ".leaseside-fence"

// tempSuffix names the temporary file a write goes to before its rename.
const tempSuffix = ".leaseside-tmp-"

// ErrNotRegular: the path to write is a symbolic link, a directory or
// another file that is not a regular one.
var ErrNotRegular = errors.New("fence: not a regular file")

// WriteFile replaces the file at path with what r holds, fenced by lease
// and token: the write is refused with a *StaleTokenError if a token of
// lease higher than token has written path, and leaves path as it was.
//
// The content goes to a temporary file in path's directory and is synced
// there first (so reading it may take its time without holding anything).
// Then, under an exclusive flock on path's record file (path +
// RecordSuffix), the token is checked and recorded durably, the temporary
// file is renamed over path and the directory synced. Readers see the old
// file or the new one, whole; a writer with an older token changes
// nothing; a crash leaves the old file or the new one, and the record at
// least as high as the file's writer. A new file gets mode 0666 less the
// umask; a replaced file keeps its mode (not its owner).
//
// It holds where flock and rename are atomic among all the writers: a
// local filesystem; NFS only where its locks work (NFSv4, or v3 with
// lockd), and only if every writer uses WriteFile.
func WriteFile(path, lease string, token uint64, r io.Reader) error {
	if err := CheckLease(lease); err != nil {
		return err
	}
	if token == 0 {
		return fmt.Errorf("%w: 0 (tokens start at 1)", ErrBadToken)
	}
	mode, err := existingMode(path)
	if err != nil {
		return err
	}
	f, err := createTemp(path + tempSuffix)
	if err != nil {
		return fmt.Errorf("fence: write %s: %w", path, err)
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if !renamed {
			os.Remove(tmp)
		}
	}()
	if err := fillTemp(f, r, mode); err != nil {
		return fmt.Errorf("fence: write %s: %w", path, err)
	}
	rec, err := OpenRecord(path+RecordSuffix, true)
	if err != nil {
		return err
	}
	defer rec.Close()
	if err := rec.Admit(lease, token); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("fence: write %s: %w", path, err)
	}
	renamed = true
	return syncDir(filepath.Dir(path))
}

// existingMode returns the permission bits of the file at path, 0 if
// there is none, and ErrNotRegular for anything but a regular file.
func existingMode(path string) (os.FileMode, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("fence: write %s: %w", path, err)
	case fi.Mode()&os.ModeSymlink != 0:
		return 0, fmt.Errorf("%w: %s is a symbolic link (give the path it points to)", ErrNotRegular, path)
	case !fi.Mode().IsRegular():
		return 0, fmt.Errorf("%w: %s is a %s", ErrNotRegular, path, kind(fi.Mode()))
	}
	return fi.Mode().Perm(), nil
}

func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// fillTemp copies r into f, gives it mode (if not 0), syncs and closes it.
func fillTemp(f *os.File, r io.Reader, mode os.FileMode) error {
	_, err := io.Copy(f, r)
	if err == nil && mode != 0 {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// createTemp creates a new file named prefix and a random suffix, mode
// 0666 less the umask, never through a symbolic link.
func createTemp(prefix string) (*os.File, error) {
	for {
		var b [8]byte
		rand.Read(b[:])
		f, err := os.OpenFile(prefix+hex.EncodeToString(b[:]), os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o666)
		if !errors.Is(err, os.ErrExist) {
			return f, err
		}
	}
}
