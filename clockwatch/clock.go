package clockwatch

import (
	"strconv"
	"time"
)

// Instant is a point on CLOCK_BOOTTIME (or CLOCK_MONOTONIC, where a method
// says so), in nanoseconds since the host booted. It is the same number a
// program gets from clock_gettime(CLOCK_BOOTTIME), so it can be handed to
// programs in other languages as deadline_boottime_ns.
type Instant int64

// Add returns i+d.
func (i Instant) Add(d time.Duration) Instant { return i + Instant(d) }

// Sub returns the duration i-j.
func (i Instant) Sub(j Instant) time.Duration { return time.Duration(i - j) }

// Before reports whether i is strictly before j.
func (i Instant) Before(j Instant) bool { return i < j }

// After reports whether i is strictly after j.
func (i Instant) After(j Instant) bool { return i > j }

// Nanoseconds returns i as nanoseconds since boot.
func (i Instant) Nanoseconds() int64 { return int64(i) }

// String formats i as seconds since boot, for logs.
func (i Instant) String() string {
	return "boot+" + strconv.FormatFloat(time.Duration(i).Seconds(), 'f', 3, 64) + "s"
}

// Clock is the source of time for every lease decision.
//
// Implementations must be safe for concurrent use.
type Clock interface {
	// Now returns the current instant on CLOCK_BOOTTIME.
	Now() Instant
	// Monotonic returns the current instant on CLOCK_MONOTONIC, which does
	// not advance while the host is suspended. Now()-Monotonic() grows by
	// the length of every suspend.
	Monotonic() Instant
	// NewTimer returns a timer that fires once d has passed on the
	// monotonic clock, as Go's timers do. A timer only wakes its reader:
	// the reader must read Now again before deciding anything.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot wake-up from a Clock.
type Timer interface {
	// C returns the channel that receives a value when the timer fires.
	C() <-chan struct{}
	// Stop prevents the timer from firing. It reports whether the call
	// stopped the timer (false if it had already fired or been stopped).
	Stop() bool
	// Reset makes the timer fire d from now, whether or not it had fired.
	// A value from an earlier firing that was not received is discarded.
	Reset(d time.Duration)
}

// Until returns how long from c.Now() until deadline (negative if passed).
func Until(c Clock, deadline Instant) time.Duration { return deadline.Sub(c.Now()) }
