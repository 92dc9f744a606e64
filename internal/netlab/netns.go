package netlab

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// netns is a network namespace that no process need live in: the lab keeps
// it alive by holding an open file of it. When the file is closed (by
// Cleanup, or by the kernel when the test binary dies however it dies) and
// no process, socket or mount refers to it any more, the kernel destroys
// the namespace together with every device in it.
type netns struct {
	name string   // for messages: "switch", "host 0", ...
	f    *os.File // the nsfs file; holding it keeps the namespace alive
	fd   int      // f's descriptor, kept so that path() needs no call on f
	dev  uint64   // identity of the namespace: device and inode of its nsfs file
	ino  uint64
}

// newNetns creates an empty network namespace (with only a loopback, down)
// without moving the calling goroutine, any thread or any process into it.
//
// It unshares on a thread of its own, locked to a goroutine of its own,
// opens the new namespace there and moves the thread back. Should moving
// back fail, the goroutine returns still locked and the Go runtime discards
// the thread, so no goroutine ever runs in the wrong namespace.
func newNetns(name string) (*netns, error) {
	type result struct {
		ns  *netns
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: err}
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("unshare(CLONE_NEWNET): %w", err)}
			return
		}
		ns, openErr := openNetns(name, "/proc/thread-self/ns/net")
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// Stay locked: the thread dies with this goroutine.
			if ns != nil {
				ns.close()
			}
			done <- result{err: fmt.Errorf("returning to the original network namespace: %w", err)}
			return
		}
		runtime.UnlockOSThread()
		done <- result{ns: ns, err: openErr}
	}()
	r := <-done
	return r.ns, r.err
}

// openNetns opens the namespace file at path.
func openNetns(name, path string) (*netns, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, err
	}
	return &netns{name: name, f: f, fd: int(f.Fd()), dev: uint64(st.Dev), ino: st.Ino}, nil
}

// path is a file name of the namespace that other processes can open, for
// `nsenter --net=PATH` and `ip link ... netns PATH`. It is valid while the
// namespace is open.
func (n *netns) path() string {
	return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), n.fd)
}

// is reports whether the stat st is of this namespace.
func (n *netns) is(st *syscall.Stat_t) bool {
	return uint64(st.Dev) == n.dev && st.Ino == n.ino
}

// close releases the lab's hold on the namespace.
func (n *netns) close() error {
	return n.f.Close()
}

// run calls fn on a thread that is in the namespace, so that sockets fn
// creates on its own goroutine belong to the namespace (a socket keeps the
// namespace it was created in for life). fn must not create sockets on
// other goroutines: those would be in the test binary's own namespace.
func (n *netns) run(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer orig.Close()
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("entering the network namespace of %s: %w", n.name, err)
			return
		}
		fnErr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// Stay locked: the thread dies with this goroutine.
			done <- errors.Join(fnErr, fmt.Errorf("returning to the original network namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		done <- fnErr
	}()
	return <-done
}

// errWrongNetns is what a socket check returns for a socket created
// outside the namespace it was meant for. It would be a bug in netlab.
var errWrongNetns = errors.New("netlab: socket created outside the host's network namespace")

// checkSocket is a net.Dialer or net.ListenConfig Control function that
// refuses (before any bind or connect) a socket not in the namespace: a
// guard that traffic meant for the lab never leaves from the test binary's
// own namespace, whatever the net package does with goroutines.
func (n *netns) checkSocket(network, address string, c syscall.RawConn) error {
	var checkErr error
	err := c.Control(func(fd uintptr) {
		nsfd, err := unix.IoctlRetInt(int(fd), unix.SIOCGSKNS)
		if err != nil {
			checkErr = fmt.Errorf("netlab: SIOCGSKNS: %w", err)
			return
		}
		defer unix.Close(nsfd)
		var st syscall.Stat_t
		if err := syscall.Fstat(nsfd, &st); err != nil {
			checkErr = err
			return
		}
		if !n.is(&st) {
			checkErr = fmt.Errorf("%w (%s %s in %s)", errWrongNetns, network, address, n.name)
		}
	})
	if err != nil {
		return err
	}
	return checkErr
}
