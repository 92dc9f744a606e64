package clockwatch

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel answers a read-only adjtimex on this host with sane numbers.
// Whether it is synced depends on the host, so that is not asserted.
func TestKernelClockReads(t *testing.T) {
	k, err := KernelClock()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel clock: %+v", k)
	// The kernel limits its frequency correction to 500ppm (MAXFREQ).
	if k.FreqPPM < -600 || k.FreqPPM > 600 {
		t.Errorf("FreqPPM %v outside the kernel's +-500ppm", k.FreqPPM)
	}
	// maxerror is capped at NTP_PHASE_LIMIT (16s).
	if k.MaxError < 0 || k.MaxError > 17*time.Second {
		t.Errorf("MaxError %v out of range", k.MaxError)
	}
	if k.EstError < 0 || k.EstError > 17*time.Second {
		t.Errorf("EstError %v out of range", k.EstError)
	}
	if k.State < unix.TIME_OK || k.State > unix.TIME_ERROR {
		t.Errorf("State %d is not a TIME_* value", k.State)
	}
}

func TestKernelClockDecode(t *testing.T) {
	tests := []struct {
		name   string
		tx     unix.Timex
		state  int
		synced bool
		freq   float64
		offset time.Duration
	}{
		{name: "synced", tx: unix.Timex{Freq: 12 << 16, Maxerror: 5000, Esterror: 20, Offset: 7}, state: unix.TIME_OK, synced: true, freq: 12, offset: 7 * time.Microsecond},
		{name: "unsync bit", tx: unix.Timex{Status: unix.STA_UNSYNC, Freq: -(5 << 15)}, state: unix.TIME_OK, synced: false, freq: -2.5},
		{name: "time error", tx: unix.Timex{}, state: unix.TIME_ERROR, synced: false},
		{name: "nanosecond offset", tx: unix.Timex{Status: unix.STA_NANO, Offset: 7}, state: unix.TIME_OK, synced: true, offset: 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := kernelClockFrom(&tc.tx, tc.state)
			if k.Synced != tc.synced || k.FreqPPM != tc.freq || k.Offset != tc.offset {
				t.Fatalf("decoded %+v; want synced %v, freq %v ppm, offset %v", k, tc.synced, tc.freq, tc.offset)
			}
			if k.MaxError != time.Duration(tc.tx.Maxerror)*time.Microsecond || k.EstError != time.Duration(tc.tx.Esterror)*time.Microsecond {
				t.Fatalf("errors decoded as %v, %v", k.MaxError, k.EstError)
			}
		})
	}
}
