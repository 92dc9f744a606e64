package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// errNoProcess is returned by watchPID when the process does not exist.
var errNoProcess = errors.New("no such process")

// watchPID calls onExit once, from its own goroutine, when process pid
// ends. It uses a pidfd, which the runtime's poller watches, so an exit is
// noticed at once and no thread blocks. After stop returns, onExit is not
// called unless it had already begun.
func watchPID(pid int, onExit func()) (stop func(), err error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("process %d: %w", pid, errNoProcess)
		}
		return nil, fmt.Errorf("pidfd_open(%d): %w", pid, err)
	}
	f := os.NewFile(uintptr(fd), fmt.Sprintf("pidfd:%d", pid))
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	stopped := make(chan struct{})
	go func() {
		defer f.Close()
		// A pidfd becomes readable when the process exits. Returning false
		// parks this goroutine in the poller until then.
		err := rc.Read(func(fd uintptr) bool {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, _ := unix.Poll(fds, 0)
			return n == 1
		})
		select {
		case <-stopped:
			return
		default:
		}
		if err == nil {
			onExit()
		}
	}()
	return func() {
		close(stopped)
		f.Close()
	}, nil
}

// processIdentity returns a process's start time (in clock ticks since
// boot, from /proc/PID/stat: with the pid, it names the process even
// after the pid is reused) and its owner's uid.
func processIdentity(pid int) (start uint64, uid int, err error) {
	dir := "/proc/" + strconv.Itoa(pid)
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("process %d: %w", pid, errNoProcess)
	}
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return 0, 0, fmt.Errorf("process %d: %w", pid, errNoProcess)
	}
	// The command name (field 2) may hold spaces and parentheses: count
	// fields from the last ')'. starttime is field 22.
	rest := string(b[bytes.LastIndexByte(b, ')')+1:])
	f := strings.Fields(rest)
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("process %d: unreadable /proc stat", pid)
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("process %d: start time: %w", pid, err)
	}
	return start, int(fi.Sys().(*syscall.Stat_t).Uid), nil
}
