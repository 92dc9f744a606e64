package cli

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/coreos/go-systemd/v22/activation"
	"golang.org/x/sys/unix"
)

// activatedListener returns the socket systemd passed to this process by
// socket activation (systemd/leaseside.socket), and false when it passed
// none: LISTEN_FDS unset, or LISTEN_PID naming another process. It unsets
// LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES either way, so that commands
// the sidecar starts do not take the socket for theirs.
//
// leaseside listens on exactly one socket: a listening Unix stream socket
// (ListenStream= with a path, Accept=no). Anything else is an error, not a
// silent fallback, since the socket unit then does not say what the daemon
// serves. The socket's owner, group, mode and directory are the socket
// unit's to set (SocketUser=, SocketGroup=, SocketMode=, DirectoryMode=).
func activatedListener() (*net.UnixListener, bool, error) {
	files := activation.Files(true)
	if len(files) == 0 {
		return nil, false, nil
	}
	defer func() {
		for _, f := range files {
			f.Close() // a listener made from one holds a dup of its own
		}
	}()
	if len(files) != 1 {
		return nil, false, fmt.Errorf("socket activation: systemd passed %d sockets; leaseside serves one (a single ListenStream= in the socket unit)", len(files))
	}
	f := files[0]
	if err := checkListening(f); err != nil {
		return nil, false, fmt.Errorf("socket activation: fd %d (%s): %w", f.Fd(), f.Name(), err)
	}
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, false, fmt.Errorf("socket activation: fd %d (%s): %w", f.Fd(), f.Name(), err)
	}
	ul, ok := ln.(*net.UnixListener)
	if !ok || ul.Addr().Network() != "unix" {
		ln.Close()
		return nil, false, fmt.Errorf("socket activation: fd %d (%s) is a %s socket, not a Unix stream socket (use ListenStream=/run/leaseside/leaseside.sock)",
			f.Fd(), f.Name(), ln.Addr().Network())
	}
	// The socket file belongs to systemd: closing must not unlink it
	// (systemd does not set the flag net.ListenUnix would, but say so).
	ul.SetUnlinkOnClose(false)
	return ul, true, nil
}

// checkListening reports an error unless f is a socket in the listening
// state: systemd passes connected sockets when the unit has Accept=yes,
// and net.FileListener would take one of those without complaint.
func checkListening(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var listening int
	var serr error
	if err := rc.Control(func(fd uintptr) {
		listening, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	}); err != nil {
		return err
	}
	switch {
	case errors.Is(serr, unix.ENOTSOCK):
		return errors.New("not a socket")
	case serr != nil:
		return serr
	case listening == 0:
		return errors.New("not a listening socket (Accept=yes is not supported: leaseside accepts its own connections)")
	}
	return nil
}
