package clockwatch

import (
	"errors"
	"fmt"
	"time"
)

// Timing holds the two parameters of the lease timing model (DESIGN.md
// section 2): the largest clock drift rate Rho either side may have, and the
// safety margin Epsilon. The holder and the grantor use the same formulas
// from here, so they cannot disagree about which side of a term they are on.
type Timing struct {
	// Rho is the maximum drift rate between any two clocks, as a fraction
	// (500e-6 is 500 ppm).
	Rho float64
	// Epsilon is a fixed safety margin added on the grantor side and taken
	// off on the holder side.
	Epsilon time.Duration
}

// Defaults for Timing: generous for quartz clocks, small against terms of
// a second or more.
const (
	DefaultRho     = 500e-6
	DefaultEpsilon = 100 * time.Millisecond
)

// DefaultTiming returns Timing{DefaultRho, DefaultEpsilon}.
func DefaultTiming() Timing { return Timing{Rho: DefaultRho, Epsilon: DefaultEpsilon} }

// Validate checks that the model is usable.
func (t Timing) Validate() error {
	if t.Rho < 0 || t.Rho >= 0.1 {
		return fmt.Errorf("clockwatch: drift rate rho %v out of range [0, 0.1)", t.Rho)
	}
	if t.Epsilon < 0 {
		return errors.New("clockwatch: safety margin epsilon is negative")
	}
	return nil
}

// HolderDeadline is rule 3: a holder that sent its request at t0 (read
// before sending) treats a term d as valid until t0 + d(1-rho) - eps.
func (t Timing) HolderDeadline(t0 Instant, d time.Duration) Instant {
	return t0.Add(scale(d, 1-t.Rho) - t.Epsilon)
}

// GrantorExpiry is rule 2: a grantor that granted or renewed at tG keeps
// the lease until tG + d(1+rho) + eps.
func (t Timing) GrantorExpiry(tG Instant, d time.Duration) Instant {
	return tG.Add(scale(d, 1+t.Rho) + t.Epsilon)
}

// MinTerm is the shortest term for which a holder is left any validity.
func (t Timing) MinTerm() time.Duration {
	return time.Duration(float64(t.Epsilon)/(1-t.Rho)) + 1
}

func scale(d time.Duration, f float64) time.Duration {
	return time.Duration(float64(d) * f)
}
