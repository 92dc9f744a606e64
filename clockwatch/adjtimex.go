package clockwatch

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// KernelClockState is the kernel's view of its own clock discipline, as
// adjtimex(2) reports it: whether NTP (or PTP, or chrony) has it in sync,
// and how much it is correcting.
type KernelClockState struct {
	// Synced is false when the kernel says the clock is not synchronised:
	// the STA_UNSYNC status bit is set or adjtimex returned TIME_ERROR.
	// A host without any time daemon is never synced; its clock then runs
	// at the oscillator's raw rate.
	Synced bool
	// State is adjtimex's return value (TIME_OK, TIME_INS, ... TIME_ERROR).
	State int
	// Status holds the raw STA_* bits.
	Status int32
	// FreqPPM is the frequency correction the kernel applies, in parts
	// per million: an estimate of how far the oscillator is off.
	FreqPPM float64
	// Offset is the remaining phase correction being slewed in.
	Offset time.Duration
	// MaxError is the kernel's bound on the clock's error against true
	// time; it grows by 500ppm of elapsed time while nobody refreshes it.
	MaxError time.Duration
	// EstError is the kernel's estimate of the clock's error.
	EstError time.Duration
}

// KernelClock reads the kernel's clock discipline with a read-only
// adjtimex(2) call (modes 0, which needs no privilege).
func KernelClock() (KernelClockState, error) {
	var tx unix.Timex // Modes 0: read only
	state, err := unix.Adjtimex(&tx)
	if err != nil {
		return KernelClockState{}, fmt.Errorf("clockwatch: adjtimex: %w", err)
	}
	return kernelClockFrom(&tx, state), nil
}

// kernelClockFrom decodes what adjtimex returned.
func kernelClockFrom(tx *unix.Timex, state int) KernelClockState {
	offset := time.Duration(tx.Offset) * time.Microsecond
	if tx.Status&unix.STA_NANO != 0 {
		offset = time.Duration(tx.Offset)
	}
	return KernelClockState{
		Synced:   tx.Status&unix.STA_UNSYNC == 0 && state != unix.TIME_ERROR,
		State:    state,
		Status:   tx.Status,
		FreqPPM:  float64(tx.Freq) / 65536, // scaled ppm: 16 fraction bits
		Offset:   offset,
		MaxError: time.Duration(tx.Maxerror) * time.Microsecond,
		EstError: time.Duration(tx.Esterror) * time.Microsecond,
	}
}
