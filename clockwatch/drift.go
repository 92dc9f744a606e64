package clockwatch

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Sample is one keepalive exchange with a remote clock (the grantor's).
type Sample struct {
	// Sent is the local BOOTTIME read before the request went out.
	Sent Instant
	// Received is the local BOOTTIME read after the reply came in.
	Received Instant
	// Remote is the remote BOOTTIME carried in the reply. It was read at
	// some moment between Sent and Received: that is all that is known,
	// and all that the estimator assumes.
	Remote Instant
}

// DriftConfig bounds a DriftEstimator's memory and says when it has seen
// enough to report a rate.
type DriftConfig struct {
	// Bucket: samples sent closer together than this compete for one
	// place, and the one with the shortest round trip is kept (NTP's
	// clock filter). It bounds the memory that frequent keepalives use.
	Bucket time.Duration
	// MaxSamples is how many samples are kept at most.
	MaxSamples int
	// MaxSpan is how far back samples are kept: clocks' rates wander
	// with temperature over hours.
	MaxSpan time.Duration
	// MinSamples and MinSpan are what Rate needs before it reports.
	MinSamples int
	MinSpan    time.Duration
}

// DefaultDriftConfig keeps an hour of samples five seconds apart and
// reports after ten samples over two minutes. Over two minutes a round
// trip of 1ms bounds the rate to within about 8ppm; over an hour, to
// within a fraction of a ppm.
func DefaultDriftConfig() DriftConfig {
	return DriftConfig{
		Bucket: 5 * time.Second, MaxSamples: 720, MaxSpan: time.Hour,
		MinSamples: 10, MinSpan: 2 * time.Minute,
	}
}

// withDefaults replaces non-positive fields by the defaults.
func (c DriftConfig) withDefaults() DriftConfig {
	d := DefaultDriftConfig()
	if c.Bucket <= 0 {
		c.Bucket = d.Bucket
	}
	if c.MaxSamples < 2 {
		c.MaxSamples = d.MaxSamples
	}
	if c.MaxSpan <= 0 {
		c.MaxSpan = d.MaxSpan
	}
	if c.MinSamples < 2 {
		c.MinSamples = d.MinSamples
	}
	if c.MinSpan <= 0 {
		c.MinSpan = d.MinSpan
	}
	return c
}

// maxPlausibleRate is the largest rate difference between two clocks that
// the estimator believes (1%). Beyond it, two samples cannot come from the
// same remote clock running continuously: the grantor leader changed (each
// host has its own BOOTTIME) or a clock was reset, and the window restarts.
const maxPlausibleRate = 0.01

// DriftEstimate is what a DriftEstimator concludes from its window.
//
// Rates are the local clock's rate against the remote clock, in parts per
// million: +50 means the local clock counts 50µs more than the remote one
// every second, -50 that it counts 50µs less.
type DriftEstimate struct {
	// PPM is the estimate: the middle of [MinPPM, MaxPPM].
	PPM float64
	// MinPPM and MaxPPM bound the rates that every sample in the window
	// allows, however the network delayed each message either way.
	MinPPM, MaxPPM float64
	// Consistent is false when no single rate fits every sample (the
	// bounds crossed): a clock's rate changed within the window, or a
	// clock was stepped by less than the restart rule catches. The bounds
	// then span the conflicting rates.
	Consistent bool
	// Samples is how many samples the window holds; Span is the local
	// time from the first one's Sent to the last one's Received.
	Samples int
	Span    time.Duration
	// Restarts counts how often the window started over because a sample
	// could not come from the same clock as the ones before.
	Restarts uint64
}

// WorstPPM returns the largest rate magnitude the estimate allows:
// max(|MinPPM|, |MaxPPM|).
func (d DriftEstimate) WorstPPM() float64 {
	return max(math.Abs(d.MinPPM), math.Abs(d.MaxPPM))
}

// DriftEstimator estimates the rate of the local clock against a remote
// clock from keepalive round trips, robustly to network delay.
//
// Each sample says the remote clock read Remote at some local time between
// Sent and Received. Plotting remote time against local time, the line of
// the remote clock must pass below every point (Sent, Remote) and above
// every point (Received, Remote). Only the lower convex hull of the first
// set and the upper convex hull of the second constrain it; the steepest
// and the flattest line that fit between the two hulls bound the rate.
// Slow messages give loose points that fall inside the hulls, so the
// bounds come from the fastest round trips in the window whatever the
// delay distribution is, and tighten as the span grows.
//
// It is safe for concurrent use.
type DriftEstimator struct {
	cfg DriftConfig

	mu       sync.Mutex
	s        []Sample // by Sent, at most one per Bucket
	restarts uint64
}

// NewDriftEstimator returns an empty estimator. Zero fields of cfg take
// their values from DefaultDriftConfig.
func NewDriftEstimator(cfg DriftConfig) *DriftEstimator {
	cfg = cfg.withDefaults()
	return &DriftEstimator{cfg: cfg, s: make([]Sample, 0, min(cfg.MaxSamples, 64))}
}

// Add records a sample. Of the samples sent within one Bucket (counted
// from boot), only the one with the shortest round trip is kept. A sample
// whose Received is before its Sent, or sent in an earlier bucket than the
// newest sample kept, is ignored. A sample that no plausible rate connects
// to the one before (see maxPlausibleRate) restarts the window from itself.
func (e *DriftEstimator) Add(s Sample) {
	if s.Received.Before(s.Sent) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if n := len(e.s); n > 0 {
		last := e.s[n-1]
		bucket, lastBucket := floorDiv(int64(s.Sent), int64(e.cfg.Bucket)), floorDiv(int64(last.Sent), int64(e.cfg.Bucket))
		switch {
		case !plausible(last, s):
			e.s = e.s[:0]
			e.restarts++
		case bucket == lastBucket:
			if s.Received.Sub(s.Sent) < last.Received.Sub(last.Sent) {
				e.s[n-1] = s
			}
			return
		case bucket < lastBucket:
			return
		}
	}
	e.s = append(e.s, s)
	drop := max(len(e.s)-e.cfg.MaxSamples, 0)
	for drop < len(e.s)-1 && s.Received.Sub(e.s[drop].Sent) > e.cfg.MaxSpan {
		drop++
	}
	if drop > 0 {
		e.s = e.s[:copy(e.s, e.s[drop:])]
	}
}

// floorDiv is a/b rounded down, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// plausible reports whether b can follow a on one remote clock whose rate
// differs from the local one by at most maxPlausibleRate (with 1ms of
// slack for rounding and timestamp granularity).
func plausible(a, b Sample) bool {
	remote := float64(b.Remote.Sub(a.Remote))
	lo := float64(b.Sent.Sub(a.Received)) // least local time between the two remote readings
	hi := float64(b.Received.Sub(a.Sent)) // most
	slack := float64(time.Millisecond)
	return remote >= min(lo*(1-maxPlausibleRate), lo*(1+maxPlausibleRate))-slack &&
		remote <= max(hi*(1-maxPlausibleRate), hi*(1+maxPlausibleRate))+slack
}

// Reset forgets every sample. Call it when the remote clock changes, for
// example when another grantor becomes leader.
func (e *DriftEstimator) Reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.s = e.s[:0]
}

// Rate returns the estimated rate of the local clock against the remote
// one in ppm (DriftEstimate.PPM), and whether the window holds enough
// samples over enough span to say.
func (e *DriftEstimator) Rate() (ppm float64, ok bool) {
	d, ok := e.Estimate()
	return d.PPM, ok
}

// Estimate returns the full estimate, and whether the window holds at
// least MinSamples over at least MinSpan (without that, only Samples,
// Span and Restarts are meaningful).
func (e *DriftEstimator) Estimate() (DriftEstimate, bool) {
	e.mu.Lock()
	s := slices.Clone(e.s)
	d := DriftEstimate{Samples: len(s), Restarts: e.restarts}
	e.mu.Unlock()
	if len(s) == 0 {
		return d, false
	}
	d.Span = s[len(s)-1].Received.Sub(s[0].Sent)
	if len(s) < 2 {
		return d, false
	}

	// Work in offsets from the first sample, and plot the remote clock's
	// lead over the local one (y) against local time (x): the slope of a
	// line through them is then remote/local rate - 1, small numbers
	// computed from exact integer differences.
	l0, r0 := s[0].Sent, s[0].Remote
	sent := make([]point, len(s))
	recv := make([]point, len(s))
	for i, x := range s {
		remote := x.Remote.Sub(r0)
		sent[i] = point{float64(x.Sent.Sub(l0)), float64(remote - x.Sent.Sub(l0))}
		recv[i] = point{float64(x.Received.Sub(l0)), float64(remote - x.Received.Sub(l0))}
	}
	below := lowerHull(sent) // the line passes on or below these
	above := upperHull(recv) // and on or above these
	lo, hi := math.Inf(-1), math.Inf(1)
	for _, u := range below {
		for _, v := range above {
			switch dx := u.x - v.x; {
			case dx > 0:
				hi = min(hi, (u.y-v.y)/dx)
			case dx < 0:
				lo = max(lo, (u.y-v.y)/dx)
			}
		}
	}
	if math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return d, false
	}
	// The slope e is remote/local - 1; local/remote - 1 = -e/(1+e) falls
	// as e rises, so the steepest line gives the lowest local rate.
	d.Consistent = lo <= hi
	d.MinPPM, d.MaxPPM = localPPM(hi), localPPM(lo)
	if !d.Consistent {
		d.MinPPM, d.MaxPPM = d.MaxPPM, d.MinPPM
	}
	d.PPM = (d.MinPPM + d.MaxPPM) / 2
	ok := len(s) >= e.cfg.MinSamples && d.Span >= e.cfg.MinSpan &&
		!math.IsNaN(d.PPM) && !math.IsInf(d.MinPPM, 0) && !math.IsInf(d.MaxPPM, 0)
	return d, ok
}

// localPPM converts e = remote/local - 1 to (local/remote - 1) in ppm.
func localPPM(e float64) float64 {
	if e <= -1 {
		return math.Inf(1) // the remote clock stood still
	}
	return -e / (1 + e) * 1e6
}

type point struct{ x, y float64 }

// cross is the z component of (a-o) x (b-o): positive for a left turn.
func cross(o, a, b point) float64 {
	return (a.x-o.x)*(b.y-o.y) - (a.y-o.y)*(b.x-o.x)
}

// lowerHull returns the lower convex hull of p, left to right (Andrew's
// monotone chain). It sorts p.
func lowerHull(p []point) []point {
	sortPoints(p)
	var h []point
	for _, q := range p {
		for len(h) >= 2 && cross(h[len(h)-2], h[len(h)-1], q) <= 0 {
			h = h[:len(h)-1]
		}
		h = append(h, q)
	}
	return h
}

// upperHull returns the upper convex hull of p, left to right. It sorts p.
func upperHull(p []point) []point {
	sortPoints(p)
	var h []point
	for _, q := range p {
		for len(h) >= 2 && cross(h[len(h)-2], h[len(h)-1], q) >= 0 {
			h = h[:len(h)-1]
		}
		h = append(h, q)
	}
	return h
}

func sortPoints(p []point) {
	slices.SortFunc(p, func(a, b point) int {
		if a.x != b.x {
			if a.x < b.x {
				return -1
			}
			return 1
		}
		if a.y < b.y {
			return -1
		}
		if a.y > b.y {
			return 1
		}
		return 0
	})
}
