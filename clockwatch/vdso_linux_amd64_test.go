//go:build linux && amd64

package clockwatch

import (
	"io"
	"runtime"
	"runtime/pprof"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestVDSOReadsTheSameClock: a vDSO reading of each clock lies between two
// system-call readings of that clock taken around it. CLOCK_REALTIME is in
// the list because on a host that never slept BOOTTIME and MONOTONIC
// agree: a realtime reading is decades from a monotonic one, so a clock id
// the call dropped or mixed up fails here.
func TestVDSOReadsTheSameClock(t *testing.T) {
	if vdsoClockgettimeSym == 0 {
		t.Fatal("the runtime found no vDSO clock_gettime on linux/amd64")
	}
	for _, id := range []int32{unix.CLOCK_BOOTTIME, unix.CLOCK_MONOTONIC, unix.CLOCK_REALTIME} {
		for range 1000 {
			before := readSyscall(id)
			ns, ok := readFast(id)
			after := readSyscall(id)
			if !ok {
				t.Fatalf("clock %d: the vDSO call failed", id)
			}
			if got := Instant(ns); got.Before(before) || after.Before(got) {
				t.Fatalf("clock %d: vDSO read %d, not between the system call's %d and %d", id, ns, before, after)
			}
		}
	}
}

// TestVDSORefusesAnUnknownClock: the vDSO's error comes back as an error
// (readFast not ok), so read falls back to the system call, which panics
// with the errno, rather than returning a made-up time.
func TestVDSORefusesAnUnknownClock(t *testing.T) {
	if _, ok := readFast(1 << 20); ok {
		t.Fatal("readFast of clock id 1<<20 succeeded")
	}
}

// TestVDSOUnderSignalsAndStackGrowth reads the clock from many goroutines
// at once, each from a fresh small stack and from deep in a recursion,
// while a CPU profile sends SIGPROF (some of which land inside the vDSO)
// and the collector runs: readings on each goroutine never go back.
func TestVDSOUnderSignalsAndStackGrowth(t *testing.T) {
	if err := pprof.StartCPUProfile(io.Discard); err != nil {
		t.Fatal(err)
	}
	defer pprof.StopCPUProfile()
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for g := range 16 {
		wg.Go(func() {
			var last Instant
			var deep func(n int)
			deep = func(n int) {
				if n > 0 {
					var pad [64]byte
					_ = pad
					deep(n - 1)
					return
				}
				for range 2000 {
					now := Real{}.Now()
					if now.Before(last) {
						errs <- "BOOTTIME went back"
						return
					}
					last = now
				}
			}
			deep(g * 7)
			if g%4 == 0 {
				runtime.GC()
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// BenchmarkClockNow compares a BOOTTIME read through the vDSO (what Real
// does) with the system call (what it did).
func BenchmarkClockNow(b *testing.B) {
	b.Run("vdso", func(b *testing.B) {
		for b.Loop() {
			Real{}.Now()
		}
	})
	b.Run("syscall", func(b *testing.B) {
		for b.Loop() {
			readSyscall(unix.CLOCK_BOOTTIME)
		}
	})
}
