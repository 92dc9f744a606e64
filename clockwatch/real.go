package clockwatch

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Real is the Clock of the host: CLOCK_BOOTTIME and CLOCK_MONOTONIC read with
// clock_gettime (through the vDSO on linux/amd64, vdso_linux_amd64.go; the
// system call elsewhere, or when the vDSO is missing), and Go timers for
// wake-ups. The zero value is ready to use.
type Real struct{}

// System is the host clock.
var System Clock = Real{}

// Now reads CLOCK_BOOTTIME.
func (Real) Now() Instant { return read(unix.CLOCK_BOOTTIME) }

// Monotonic reads CLOCK_MONOTONIC.
func (Real) Monotonic() Instant { return read(unix.CLOCK_MONOTONIC) }

// NewTimer returns a Go timer behind the Timer interface.
func (Real) NewTimer(d time.Duration) Timer {
	t := &realTimer{c: make(chan struct{}, 1)}
	t.t = time.AfterFunc(d, t.fire)
	return t
}

func read(id int32) Instant {
	if ns, ok := readFast(id); ok {
		return Instant(ns)
	}
	return readSyscall(id)
}

// readSyscall reads clock id with the clock_gettime system call.
func readSyscall(id int32) Instant {
	var ts unix.Timespec
	if err := unix.ClockGettime(id, &ts); err != nil {
		// clock_gettime on these two clocks cannot fail on any kernel
		// leaseside supports (BOOTTIME exists since Linux 2.6.39).
		panic(fmt.Sprintf("clockwatch: clock_gettime(%d): %v", id, err))
	}
	return Instant(ts.Nano())
}

// CheckHost returns an error when the host's clocks cannot be trusted for
// leases: CLOCK_BOOTTIME behind CLOCK_MONOTONIC, which no sane host shows
// but a badly set time namespace can.
func CheckHost() error {
	m := System.Monotonic() // first: BOOTTIME read after it must not be behind
	b := System.Now()
	if b.Before(m) {
		return fmt.Errorf("clockwatch: CLOCK_BOOTTIME (%v) is behind CLOCK_MONOTONIC (%v) by %v; "+
			"this time namespace is misconfigured and lease deadlines would be wrong", b, m, m.Sub(b))
	}
	return nil
}

type realTimer struct {
	t *time.Timer
	c chan struct{}
}

func (t *realTimer) fire() {
	select {
	case t.c <- struct{}{}:
	default:
	}
}

func (t *realTimer) C() <-chan struct{} { return t.c }

func (t *realTimer) Stop() bool { return t.t.Stop() }

func (t *realTimer) Reset(d time.Duration) {
	t.t.Stop()
	select {
	case <-t.c:
	default:
	}
	t.t.Reset(d)
}
