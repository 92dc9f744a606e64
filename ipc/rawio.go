package ipc

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// sockIO reads and writes a connection's socket with raw system calls
// (syscall.RawSyscall) through its syscall.RawConn: the socket is
// non-blocking (the net package made it so), so a read or write returns
// at once, and the runtime's bookkeeping of a system call that may block
// (handing the P over, waking sysmon when it sleeps) is not needed. That
// bookkeeping, with net.Conn's, was a third of the daemon's CPU a status
// round trip at 16 clients (docs/performance.md). A read that finds
// nothing waits in the runtime's poller, as net.Conn's does, and ends on
// the read deadline; a write never waits (Conn.writeWait does, through
// net.Conn, for what the socket did not take).
type sockIO struct {
	raw syscall.RawConn

	// The reader's: its buffer and what the read gave.
	rb     []byte
	rn     int
	rerr   syscall.Errno
	readFn func(fd uintptr) bool

	// The writer's (whoever set Conn.writing): its line and what the
	// write gave.
	wb      []byte
	wn      int
	werr    syscall.Errno
	writeFn func(fd uintptr) bool
}

// newSockIO returns the raw reads and writes of nc.
func newSockIO(nc *net.UnixConn) (*sockIO, error) {
	raw, err := nc.SyscallConn()
	if err != nil {
		return nil, err
	}
	s := &sockIO{raw: raw}
	s.readFn = func(fd uintptr) bool {
		for {
			n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&s.rb[0])), uintptr(len(s.rb)))
			switch errno {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait in the poller, then call again
			}
			s.rn, s.rerr = int(n), errno
			return true
		}
	}
	s.writeFn = func(fd uintptr) bool {
		for {
			n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&s.wb[0])), uintptr(len(s.wb)))
			if errno == syscall.EINTR {
				continue
			}
			s.wn, s.werr = int(n), errno
			return true // once: a full socket is writeWait's
		}
	}
	return s, nil
}

// Read is io.Reader's, for the connection's reader alone: it waits
// until the socket has something, the peer closed it (io.EOF), or the
// read deadline passed or the connection was closed (the poller's error).
func (s *sockIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.rb, s.rn, s.rerr = p, 0, 0
	err := s.raw.Read(s.readFn)
	s.rb = nil
	switch {
	case err != nil:
		return 0, err
	case s.rerr != 0:
		return 0, s.rerr
	case s.rn == 0:
		return 0, io.EOF
	}
	return s.rn, nil
}

// writeNow writes what of b the socket takes at once, without waiting,
// and returns how much it wrote. It returns an error only if the write
// failed: not when the socket was full, nor when the write deadline a
// writeWait set has passed since (then it writes nothing, and writeWait,
// which sets a new one, writes the rest). For whoever set Conn.writing;
// a nil s writes nothing.
func (s *sockIO) writeNow(b []byte) (int, error) {
	if s == nil || len(b) == 0 {
		return 0, nil
	}
	s.wb, s.wn, s.werr = b, 0, 0
	err := s.raw.Write(s.writeFn)
	s.wb = nil
	switch {
	case err != nil, s.werr == syscall.EAGAIN:
		return 0, nil
	case s.werr != 0:
		return 0, s.werr
	}
	return s.wn, nil
}
