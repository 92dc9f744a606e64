package daemon

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// bootClock names the CLOCK_BOOTTIME a process reads: the boot's id and
// its time namespace's boottime offset (a process in a time namespace
// reads the host's BOOTTIME plus it). Deadlines written under one compare
// only with instants read under the same.
type bootClock struct {
	// ID is /proc/sys/kernel/random/boot_id.
	ID string
	// OffsetNs is the boottime line of /proc/self/timens_offsets, in ns
	// (0 without time namespaces).
	OffsetNs int64
}

// readBootClock reads this process's bootClock.
func readBootClock() (bootClock, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return bootClock{}, err
	}
	bc := bootClock{ID: strings.TrimSpace(string(b))}
	offs, err := os.ReadFile("/proc/self/timens_offsets")
	if errors.Is(err, os.ErrNotExist) {
		return bc, nil // a kernel without time namespaces
	}
	if err != nil {
		return bootClock{}, err
	}
	bc.OffsetNs, err = boottimeOffset(string(offs))
	return bc, err
}

// boottimeOffset reads the boottime offset in ns from the text of
// /proc/PID/timens_offsets (lines "CLOCK SECONDS NANOSECONDS"); no
// boottime line is 0.
func boottimeOffset(text string) (int64, error) {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || (f[0] != "boottime" && f[0] != "7") { // CLOCK_BOOTTIME is 7
			continue
		}
		if len(f) != 3 {
			return 0, fmt.Errorf("timens_offsets: %q is not CLOCK SECONDS NANOSECONDS", line)
		}
		sec, err1 := strconv.ParseInt(f[1], 10, 64)
		ns, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || ns < 0 || ns >= 1e9 || sec > math.MaxInt64/int64(time.Second)-1 || sec < math.MinInt64/int64(time.Second)+1 {
			return 0, fmt.Errorf("timens_offsets: %q is not CLOCK SECONDS NANOSECONDS", line)
		}
		return sec*1e9 + ns, nil
	}
	return 0, nil
}
