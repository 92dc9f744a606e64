package clockwatch

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Timing holds the two parameters of the lease timing model (docs/design.md
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

// MaxObservedRho caps the Rho that WithObservedRate sets. At 1, a
// holder's deadline t0 + d(1-rho) - eps is t0 - eps: no validity at all.
const MaxObservedRho = 1.0

// WithObservedRate returns t with Rho raised to |ratePPM| + marginPPM
// (both in parts per million) when that is larger: the reaction rule of
// docs/design.md section 4, validity computed with the larger of the configured
// and the observed drift. It never lowers Rho nor touches Epsilon, so the
// result's HolderDeadline is never later, and its GrantorExpiry never
// earlier, than t's, for any inputs:
//
//   - a negative rate counts by its magnitude: drift either way is drift;
//   - a NaN rate carries no information and leaves t as it is;
//   - an infinite rate (or margin), or one beyond MaxObservedRho, sets
//     Rho to MaxObservedRho: a holder gets no validity;
//   - a negative or NaN margin counts as 0.
func (t Timing) WithObservedRate(ratePPM, marginPPM float64) Timing {
	if math.IsNaN(ratePPM) {
		return t
	}
	if !(marginPPM > 0) { // also NaN
		marginPPM = 0
	}
	r := min((math.Abs(ratePPM)+marginPPM)*1e-6, MaxObservedRho)
	if r > t.Rho {
		t.Rho = r
	}
	return t
}

func scale(d time.Duration, f float64) time.Duration {
	return time.Duration(float64(d) * f)
}
