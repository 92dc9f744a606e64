package clockwatch

import (
	"sync"
	"testing"
	"time"
)

func TestSuspendDetectorReportsLength(t *testing.T) {
	f := NewFake(Instant(time.Hour))
	s := NewSuspendDetector(f)
	if got := s.Check(); got != 0 {
		t.Fatalf("Check with no suspend = %v", got)
	}
	f.Advance(time.Minute) // running time is no suspend
	if got := s.Check(); got != 0 {
		t.Fatalf("Check after Advance = %v, want 0", got)
	}
	f.Suspend(90 * time.Second)
	if got := s.Check(); got != 90*time.Second {
		t.Fatalf("Check after a 90s suspend = %v", got)
	}
	if got := s.Check(); got != 0 {
		t.Fatalf("second Check after one suspend = %v, want 0", got)
	}
	f.Suspend(time.Second)
	f.Advance(time.Second)
	f.Suspend(2 * time.Second)
	if got := s.Check(); got != 3*time.Second {
		t.Fatalf("two suspends between Checks = %v, want their sum 3s", got)
	}
	st := s.Stats()
	if st.Total != 93*time.Second || st.Count != 2 || st.LastLength != 3*time.Second || st.LastAt != f.Now() {
		t.Fatalf("Stats = %+v", st)
	}
}

// Suspends shorter than the noise floor are not lost: they add up.
func TestSuspendDetectorAccumulatesBelowFloor(t *testing.T) {
	f := NewFake(0)
	s := NewSuspendDetector(f)
	f.Suspend(SuspendNoiseFloor * 6 / 10)
	if got := s.Check(); got != 0 {
		t.Fatalf("sub-floor suspend reported as %v", got)
	}
	f.Suspend(SuspendNoiseFloor * 6 / 10)
	if got, want := s.Check(), SuspendNoiseFloor*12/10; got != want {
		t.Fatalf("two sub-floor suspends = %v, want %v", got, want)
	}
}

// Suspends before the detector was made are not reported.
func TestSuspendDetectorBaselineAtStart(t *testing.T) {
	f := NewFake(0)
	f.Suspend(time.Hour)
	s := NewSuspendDetector(f)
	if got := s.Check(); got != 0 {
		t.Fatalf("Check = %v for a suspend before the detector existed", got)
	}
}

// Concurrent Checks share out each suspend exactly once.
func TestSuspendDetectorConcurrent(t *testing.T) {
	f := NewFake(0)
	s := NewSuspendDetector(f)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total time.Duration
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				d := s.Check()
				mu.Lock()
				total += d
				mu.Unlock()
			}
		}()
	}
	for range 100 {
		f.Suspend(10 * time.Millisecond)
	}
	wg.Wait()
	total += s.Check()
	if total != time.Second {
		t.Fatalf("Checks reported %v in all, want 1s", total)
	}
}

// On the real clock, nothing suspends during a test: no false positive
// from reading two clocks.
func TestSuspendDetectorRealClockQuiet(t *testing.T) {
	s := NewSuspendDetector(System)
	for range 1000 {
		if d := s.Check(); d != 0 {
			t.Fatalf("real clock: Check reported a %v suspend", d)
		}
	}
}
