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

	"github.com/leaseside/leaseside/internal/safefs"
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

// ErrNoDaemon is returned by Dial when the socket cannot be used: nothing
// answers on it, or (the error also matches ErrSocketPermission) this
// user may not use it.
var ErrNoDaemon = errors.New("cannot reach the leaseside daemon")

// ErrSocketPermission is returned by Dial, besides ErrNoDaemon, when a
// socket is there but this user may not connect to it (its mode and
// group, or its directory's): the daemon may well be running.
var ErrSocketPermission = errors.New("permission denied on its socket")

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
	_, err := os.Stat(dir)
	own := errors.Is(err, os.ErrNotExist)
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

// checkSocketDir makes the socket directory if it is not there (mode
// 0750, nothing made inside a directory that fails the rule), and
// refuses a directory another user could replace the socket in (the rule
// of internal/safefs, shared with the grantors' data dirs): one that is
// not this user's, or is writable by others; one
// reached through a symbolic link another user owns (a squatter's link
// in /tmp to a directory of ours, which they can later swap for their
// own); or one inside a directory where another user may rename it away
// (not root's or ours, or writable by others without the sticky bit).
func checkSocketDir(dir string) error {
	err := safefs.MkdirAll(dir, 0o750)
	if errors.Is(err, safefs.ErrUnsafe) {
		return fmt.Errorf("%w: %w, and replace the socket; choose another --socket", ErrUnsafeSocketDir, err)
	}
	if err != nil {
		return fmt.Errorf("ipc: socket directory: %w", err)
	}
	return nil
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
// own they can trust at the per-user path (see ClientSocket) and no
// $LEASESIDE_SOCKET uses the system daemon's socket. ClientSocket says
// why.
func ClientSocketPath() string {
	p, _ := ClientSocket()
	return p
}

// systemSocket is SystemSocketPath; tests point it elsewhere.
var systemSocket = SystemSocketPath

// warnOut is where a client warns that it did not trust the per-user
// socket; tests read it.
var warnOut io.Writer = os.Stderr

// ClientSocket returns ClientSocketPath and, for messages, why that path:
// which of the rules above chose it. A system socket the caller may not
// even look at (its directory is 0750, for the leaseside group) counts as
// there: dialing it then says "permission denied", which is the truth.
//
// The per-user path (a directory under /tmp when XDG_RUNTIME_DIR is
// unset) is used only when its directory is the caller's and writable by
// nobody else: any local user may create /tmp/leaseside-UID first and run
// a daemon there that hands out fake leases (review R8-6). Otherwise the
// system daemon's socket is used, and why says so.
func ClientSocket() (path, why string) {
	path, why, _ = clientSocket()
	return path, why
}

// clientSocket is ClientSocket, and says whether the path is the per-user
// one, which Dial checks the server of, and why a per-user socket that
// is there was not trusted ("" if it was, or is not there).
func clientSocket() (path, why string, distrust string) {
	if p := os.Getenv(SocketEnv); p != "" {
		return p, "from $" + SocketEnv, ""
	}
	p := DefaultSocketPath()
	if p == SystemSocketPath {
		return systemSocket, "the system daemon's socket, root's default", ""
	}
	return pickSocket(os.Geteuid(), p)
}

// pickSocket chooses between the per-user socket user of a caller of uid
// euid and the system daemon's.
func pickSocket(euid int, user string) (path, why, distrust string) {
	if _, err := os.Stat(user); err == nil {
		if err := checkClientDir(filepath.Dir(user), euid); err != nil {
			return systemSocket, "the system daemon's socket, since " + err.Error(), err.Error()
		}
		return user, "your own daemon's socket", ""
	}
	if _, err := os.Stat(systemSocket); err == nil || errors.Is(err, os.ErrPermission) {
		return systemSocket, "the system daemon's socket, since you run no daemon of your own at " + user, ""
	}
	return user, "your own daemon's socket, since there is no system daemon at " + systemSocket, ""
}

// checkClientDir refuses, for a client, a per-user socket directory
// another user could have put a socket in: one not owned by euid, or
// writable by its group or others (the daemon's own rule, checkSocketDir).
func checkClientDir(dir string, euid int) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	switch {
	case int(st.Uid) != euid:
		return fmt.Errorf("%s belongs to uid %d, not to you (uid %d): another user's daemon may listen there", dir, st.Uid, euid)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by its group or others (mode %#o): another user may have put a socket there", dir, fi.Mode().Perm())
	}
	return nil
}

// checkServer refuses a daemon at a socket the client chose itself that
// runs as neither the caller's uid euid nor root.
func checkServer(c *net.UnixConn, euid int) error {
	cred, err := PeerCred(c)
	if err != nil {
		return err
	}
	if cred.UID != euid && cred.UID != 0 {
		return fmt.Errorf("the daemon at %s runs as uid %d, neither you (uid %d) nor root", c.RemoteAddr(), cred.UID, euid)
	}
	return nil
}

// Dial connects to the daemon's socket at path ("" means ClientSocketPath).
// A path given (or from $LEASESIDE_SOCKET) is the caller's choice and is
// dialed as it is. A per-user socket Dial chose itself is used only if
// its directory passes ClientSocket's check and the daemon on it runs as
// the caller's uid or root (SO_PEERCRED); otherwise Dial warns on
// standard error, naming why, and dials the system daemon's socket.
func Dial(ctx context.Context, path string) (*net.UnixConn, error) {
	if path != "" {
		return dial(ctx, path)
	}
	path, _, distrust := clientSocket()
	if distrust != "" {
		warnFallback(distrust)
	}
	if path == systemSocket || os.Getenv(SocketEnv) != "" {
		return dial(ctx, path)
	}
	return dialUser(ctx, path, os.Geteuid())
}

// dialUser dials the per-user socket a caller of uid euid chose itself,
// and falls back to the system daemon's if the daemon on it is not the
// caller's or root's.
func dialUser(ctx context.Context, path string, euid int) (*net.UnixConn, error) {
	c, err := dial(ctx, path)
	if err != nil {
		return nil, err
	}
	if err := checkServer(c, euid); err != nil {
		c.Close()
		warnFallback(err.Error())
		return dial(ctx, systemSocket)
	}
	return c, nil
}

// warnFallback warns, on warnOut, that the client does not use the
// per-user socket, and why.
func warnFallback(why string) {
	fmt.Fprintf(warnOut, "leaseside: warning: not using the per-user socket: %s; using the system daemon's at %s\n", why, systemSocket)
}

// dial connects to the socket at path.
func dial(ctx context.Context, path string) (*net.UnixConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, dialError(path, err)
	}
	return c.(*net.UnixConn), nil
}

// dialError says why the socket at path could not be used: not there or
// nobody listening (is the daemon running?), or no permission (it may
// well be running).
func dialError(path string, err error) error {
	switch {
	case errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM):
		return fmt.Errorf("%w at %s: %w (it is for root and the socket's group: join that group, or run your own daemon with 'leaseside dev'): %w",
			ErrNoDaemon, path, ErrSocketPermission, err)
	case errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w at %s (is it running? 'leaseside dev' starts one): %w", ErrNoDaemon, path, err)
	}
	return fmt.Errorf("%w at %s: %w", ErrNoDaemon, path, err)
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
