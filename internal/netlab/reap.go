package netlab

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// reapTimeout bounds how long Cleanup waits for one killed process to
// exit. SIGKILL is not refusable, so it is only ever reached when the
// machine is badly overloaded, or a process is stuck in the kernel.
const reapTimeout = 30 * time.Second

// pidsIn lists the processes whose network namespace is one of nss.
// Zombies are not listed: a process leaves its namespaces when it exits,
// before anyone waits for it.
func pidsIn(nss []*netns) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Stat("/proc/"+e.Name()+"/ns/net", &st); err != nil {
			continue // gone, a zombie, or a kernel thread
		}
		for _, n := range nss {
			if n.is(&st) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids, nil
}

// killAllIn kills every process in the namespaces nss, children of the
// test binary or not (a daemon's own children, say), and returns when they
// have all exited. Processes that fork while being killed are caught by
// the next round.
func killAllIn(nss []*netns) error {
	for round := 0; round < 10; round++ {
		pids, err := pidsIn(nss)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		var errs []error
		for _, pid := range pids {
			if err := killAndWait(pid); err != nil {
				errs = append(errs, fmt.Errorf("pid %d: %w", pid, err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	pids, _ := pidsIn(nss)
	return fmt.Errorf("processes %v keep appearing in the lab's namespaces", pids)
}

// killAndWait sends SIGKILL to pid through a pidfd (so a recycled pid is
// never hit) and waits for the process to exit. It works for processes
// that are not children of the test binary; it does not reap children,
// which is left to whoever waits for them (exec.Cmd.Wait).
func killAndWait(pid int) error {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(pidfd)
	if err := unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("pidfd_send_signal: %w", err)
	}
	deadline := time.Now().Add(reapTimeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("still running %v after SIGKILL", reapTimeout)
		}
		// A pidfd polls readable once the process has exited.
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll pidfd: %w", err)
		}
		if n > 0 {
			return nil
		}
	}
}
