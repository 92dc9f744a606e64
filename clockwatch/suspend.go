package clockwatch

import (
	"sync"
	"time"
)

// SuspendNoiseFloor is the smallest growth of BOOTTIME-MONOTONIC that a
// SuspendDetector reports. Two real clock reads are microseconds apart;
// growth below the floor is left to accumulate until it crosses it, so no
// suspended time is ever lost, only reported late.
const SuspendNoiseFloor = time.Millisecond

// offsetReadTries is how many times a SuspendDetector reads the clocks to
// find a reading whose MONOTONIC bracket is narrow.
const offsetReadTries = 3

// SuspendDetector notices host suspends by watching CLOCK_BOOTTIME minus
// CLOCK_MONOTONIC: the kernel adds the length of every suspend to BOOTTIME
// and not to MONOTONIC, so the difference grows by exactly that much and
// never otherwise.
//
// It is safe for concurrent use.
type SuspendDetector struct {
	c Clock

	mu       sync.Mutex
	baseline time.Duration // upper bound of BOOTTIME-MONOTONIC before any unreported suspend
	total    time.Duration // all suspends reported since NewSuspendDetector
	count    uint64
	lastAt   Instant       // BOOTTIME when the last suspend was noticed
	lastLen  time.Duration // its length
}

// NewSuspendDetector returns a detector whose baseline is the current
// BOOTTIME-MONOTONIC of c: suspends before this call are not reported.
func NewSuspendDetector(c Clock) *SuspendDetector {
	s := &SuspendDetector{c: c}
	_, s.baseline, _ = s.offset()
	return s
}

// Check returns the total length of the suspends since the previous Check
// (or since NewSuspendDetector), 0 if there was none.
//
// Several suspends between two Checks are reported as their sum: the
// clocks keep no record of how the time was split.
func (s *SuspendDetector) Check() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	lo, hi, now := s.offset()
	grown := lo - s.baseline
	if grown < SuspendNoiseFloor {
		// Noise, or less than the floor so far. Keep the baseline (only
		// tightening it) so that small real growth adds up instead of
		// being absorbed.
		s.baseline = min(s.baseline, hi)
		return 0
	}
	s.baseline = hi
	s.total += grown
	s.count++
	s.lastAt, s.lastLen = now, grown
	return grown
}

// SuspendStats is what a SuspendDetector has seen since it was made.
type SuspendStats struct {
	// Total is the sum of all suspends reported.
	Total time.Duration
	// Count is how many Checks reported a suspend.
	Count uint64
	// LastAt is the BOOTTIME at which the last suspend was noticed (zero
	// if Count is 0); LastLength is its length.
	LastAt     Instant
	LastLength time.Duration
}

// Stats returns the suspends reported so far. It does not read the clock:
// a suspend not yet seen by Check is not included.
func (s *SuspendDetector) Stats() SuspendStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SuspendStats{Total: s.total, Count: s.count, LastAt: s.lastAt, LastLength: s.lastLen}
}

// offset brackets BOOTTIME-MONOTONIC: it reads MONOTONIC on both sides of
// BOOTTIME, so the true difference lies in [lo, hi], and keeps the
// narrowest of a few brackets. Check compares the lower bound now with an
// upper bound from before, so being descheduled between two reads can
// make a suspend look a few microseconds shorter, never invent one.
func (s *SuspendDetector) offset() (lo, hi time.Duration, at Instant) {
	bestGap := time.Duration(-1)
	for range offsetReadTries {
		m0 := s.c.Monotonic()
		b := s.c.Now()
		m1 := s.c.Monotonic()
		if gap := m1.Sub(m0); bestGap < 0 || gap < bestGap {
			lo, hi, at, bestGap = b.Sub(m1), b.Sub(m0), b, gap
		}
		if bestGap < SuspendNoiseFloor/100 {
			break
		}
	}
	return lo, hi, at
}
