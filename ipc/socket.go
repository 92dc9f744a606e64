package ipc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SocketEnv is the environment variable that overrides the default socket.
const SocketEnv = "LEASESIDE_SOCKET"

// DefaultSocketPath returns where the daemon listens when no path is given:
// $LEASESIDE_SOCKET, else /run/leaseside/leaseside.sock for root, else
// $XDG_RUNTIME_DIR/leaseside/leaseside.sock (or a per-uid directory under
// the temporary directory when XDG_RUNTIME_DIR is unset).
func DefaultSocketPath() string {
	if p := os.Getenv(SocketEnv); p != "" {
		return p
	}
	if os.Geteuid() == 0 {
		return SystemSocketPath
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "leaseside", "leaseside.sock")
	}
	return filepath.Join(os.TempDir(), "leaseside-"+strconv.Itoa(os.Geteuid()), "leaseside.sock")
}

// ErrNoDaemon is returned by Dial when nothing answers on the socket.
var ErrNoDaemon = errors.New("cannot reach the leaseside daemon")

// ErrConnectionClosed is returned by Client calls once the daemon closed
// the connection (it stopped, or restarted).
var ErrConnectionClosed = errors.New("ipc: connection to daemon closed")

// ErrDaemonRunning is returned by Listen when a live daemon already serves
// the socket path.
var ErrDaemonRunning = errors.New("ipc: a daemon is already listening on this socket")

// ErrUnsafeSocketDir is returned by Listen for a socket directory that
// another user could use to replace the socket: one not owned by this
// process's user, or writable by its group or by others, a symbolic link
// another user owns, or one in a directory where another user may rename
// it.
var ErrUnsafeSocketDir = errors.New("ipc: unsafe socket directory")

// Listen creates the socket at path, its directory (mode 0750) included,
// and makes the socket mode 0660. A socket file left by a dead daemon is
// replaced; one a live daemon answers on is not (ErrDaemonRunning). The
// directory must be this process's user's and writable by nobody else,
// and so must every directory above it be root's or this user's, and not
// open to others without the sticky bit (ErrUnsafeSocketDir): otherwise
// another user could move the socket away and bind their own in its
// place.
func Listen(path string) (*net.UnixListener, error) { return ListenGroup(path, -1) }

// ListenGroup is Listen, and gives the socket to group gid (-1: none) so
// that members of the group may use the daemon. The directory is given to
// the group too when it is the daemon's own: this call created it, or it
// holds nothing but the socket (a daemon's directory from an earlier
// run). A directory shared with other files keeps its group.
func ListenGroup(path string, gid int) (*net.UnixListener, error) {
	dir := filepath.Dir(path)
	own := false
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("ipc: socket directory: %w", err)
		}
		own = true
	}
	if err := checkSocketDir(dir); err != nil {
		return nil, err
	}
	own = own || holdsOnly(dir, filepath.Base(path))
	ln, err := listen(path)
	if err != nil || gid < 0 {
		return ln, err
	}
	paths := []string{path}
	if own {
		paths = append(paths, dir)
		if err := os.Chmod(dir, 0o750); err != nil {
			ln.Close()
			return nil, fmt.Errorf("ipc: socket directory: %w", err)
		}
	}
	for _, p := range paths {
		if err := os.Chown(p, -1, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("ipc: socket group: %w", err)
		}
	}
	return ln, nil
}

// holdsOnly reports whether dir holds no entry but name.
func holdsOnly(dir, name string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	return len(names) == 0 || len(names) == 1 && names[0] == name
}

// checkSocketDir refuses a directory another user could replace the
// socket in: one that is not this user's, or is writable by others; one
// reached through a symbolic link another user owns (a squatter's link
// in /tmp to a directory of ours, which they can later swap for their
// own); or one inside a directory where another user may rename it away
// (not root's or ours, or writable by others without the sticky bit).
func checkSocketDir(dir string) error {
	euid := os.Geteuid()
	if fi, err := os.Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		if uid := int(fi.Sys().(*syscall.Stat_t).Uid); uid != euid && uid != 0 {
			return fmt.Errorf("%w: %s is a symbolic link owned by uid %d, who could point it elsewhere and replace the socket; remove it, or choose another --socket",
				ErrUnsafeSocketDir, dir, uid)
		}
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("ipc: socket directory: %w", err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%w: %s is not a directory", ErrUnsafeSocketDir, dir)
	case int(st.Uid) != euid:
		return fmt.Errorf("%w: %s belongs to uid %d, not to this daemon's uid %d, so that user could replace the socket; remove it, or choose another --socket",
			ErrUnsafeSocketDir, dir, st.Uid, euid)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%w: %s is writable by its group or by others (mode %#o), who could replace the socket; make it 0750 or 0700, or choose another --socket",
			ErrUnsafeSocketDir, dir, fi.Mode().Perm())
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("ipc: socket directory: %w", err)
	}
	for p := filepath.Dir(real); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("ipc: socket directory: %w", err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		switch {
		case int(st.Uid) != euid && st.Uid != 0:
			return fmt.Errorf("%w: %s is inside %s, which belongs to uid %d, who could rename it and put their own in its place; choose another --socket",
				ErrUnsafeSocketDir, dir, p, st.Uid)
		case fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0:
			return fmt.Errorf("%w: %s is inside %s, which others may write to (mode %#o, no sticky bit), so they could rename it and put their own in its place; choose another --socket",
				ErrUnsafeSocketDir, dir, p, fi.Mode().Perm())
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// listen binds the socket in a checked directory.
func listen(path string) (*net.UnixListener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("ipc: %s exists and is not a socket; not replacing it", path)
		}
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("%w: %s", ErrDaemonRunning, path)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("ipc: probing existing socket %s: %w", path, err)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("ipc: removing stale socket: %w", err)
		}
	}
	// Create the socket with no access for others, then open it up to the
	// group, so there is no window in which it is wider than 0660.
	old := unix.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("ipc: listen: %w", err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("ipc: chmod socket: %w", err)
	}
	return ln, nil
}

// SystemSocketPath is where the system's daemon (the packaged service)
// listens.
const SystemSocketPath = "/run/leaseside/leaseside.sock"

// ClientSocketPath is the socket a client dials when given none:
// DefaultSocketPath, except that a non-root user with no daemon of their
// own (no socket at the per-user path) and no $LEASESIDE_SOCKET uses the
// system daemon's socket. ClientSocket says why.
func ClientSocketPath() string {
	p, _ := ClientSocket()
	return p
}

// ClientSocket returns ClientSocketPath and, for messages, why that path:
// which of the rules above chose it. A system socket the caller may not
// even look at (its directory is 0750, for the leaseside group) counts as
// there: dialing it then says "permission denied", which is the truth.
func ClientSocket() (path, why string) {
	if p := os.Getenv(SocketEnv); p != "" {
		return p, "from $" + SocketEnv
	}
	p := DefaultSocketPath()
	if p == SystemSocketPath {
		return p, "the system daemon's socket, root's default"
	}
	if _, err := os.Stat(p); err == nil {
		return p, "your own daemon's socket"
	}
	if _, err := os.Stat(SystemSocketPath); err == nil || errors.Is(err, os.ErrPermission) {
		return SystemSocketPath, "the system daemon's socket, since you run no daemon of your own at " + p
	}
	return p, "your own daemon's socket, since there is no system daemon at " + SystemSocketPath
}

// Dial connects to the daemon's socket at path ("" means ClientSocketPath).
func Dial(ctx context.Context, path string) (*net.UnixConn, error) {
	if path == "" {
		path = ClientSocketPath()
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("%w at %s (is it running?): %w", ErrNoDaemon, path, err)
	}
	return c.(*net.UnixConn), nil
}

// Cred is who is at the other end of a connection, from SO_PEERCRED and
// SO_PEERGROUPS, read when the connection was accepted.
type Cred struct {
	PID int
	UID int
	GID int
	// Groups are the peer's supplementary groups.
	Groups []int
}

// PeerCred reads the peer's credentials from a Unix connection.
func PeerCred(c *net.UnixConn) (Cred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Cred{}, err
	}
	var uc *unix.Ucred
	var groups []int
	var serr error
	if err := raw.Control(func(fd uintptr) {
		uc, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if serr == nil {
			groups, serr = peerGroups(int(fd))
		}
	}); err != nil {
		return Cred{}, err
	}
	if serr != nil {
		return Cred{}, fmt.Errorf("ipc: peer credentials: %w", serr)
	}
	return Cred{PID: int(uc.Pid), UID: int(uc.Uid), GID: int(uc.Gid), Groups: groups}, nil
}

// peerGroups reads SO_PEERGROUPS: the peer's supplementary groups as they
// were when it connected.
func peerGroups(fd int) ([]int, error) {
	buf := make([]uint32, 32)
	for {
		size := uint32(len(buf) * 4)
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)), 0)
		if errno == unix.ERANGE {
			buf = make([]uint32, size/4+1)
			continue
		}
		if errno != 0 {
			return nil, fmt.Errorf("SO_PEERGROUPS: %w", errno)
		}
		gs := make([]int, size/4)
		for i := range gs {
			gs[i] = int(buf[i])
		}
		return gs, nil
	}
}
