package connlimit

import (
	"sync"
	"time"
)

// Bounds of what a Reporter tracks in one interval.
const (
	// MaxReportKeys bounds the (source, reason) pairs; refusals of
	// further pairs are counted under the source OtherSources.
	MaxReportKeys = 256
	// MaxReasonsPerSource bounds the reasons of one source; further ones
	// are counted under the reason OtherReasons.
	MaxReasonsPerSource = 8
)

// What refusals past the bounds are counted under.
const (
	OtherSources = "(other sources)"
	OtherReasons = "(other reasons)"
)

// Reporter aggregates refusals: the first of a (source, reason) pair in
// an interval is emitted at once with count 1, the rest of that interval
// as one emission with their count when the interval ends. Lines per
// interval are thus at most twice the pairs seen, and the pairs are
// bounded by MaxReasonsPerSource per source and MaxReportKeys in all.
// Safe for concurrent use.
type Reporter struct {
	interval time.Duration
	emit     func(source, reason string, count int)

	mu      sync.Mutex
	pending map[reportKey]int // refusals not emitted yet, per pair seen
	reasons map[string]int    // pairs seen, per source
	timer   *time.Timer       // ends the interval; nil when none runs
	closed  bool
}

type reportKey struct{ source, reason string }

// NewReporter returns a Reporter that calls emit for what it reports,
// one call at a time and under the Reporter's lock (so that lines keep
// their order): emit must not call back into the Reporter.
func NewReporter(interval time.Duration, emit func(source, reason string, count int)) *Reporter {
	return &Reporter{interval: interval, emit: emit, pending: map[reportKey]int{}, reasons: map[string]int{}}
}

// Refused records one refusal.
func (r *Reporter) Refused(source, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := reportKey{source, reason}
	n, seen := r.pending[k]
	if !seen && r.reasons[source] >= MaxReasonsPerSource {
		k.reason = OtherReasons
		n, seen = r.pending[k]
	}
	if !seen && len(r.pending) >= MaxReportKeys {
		k = reportKey{OtherSources, OtherReasons}
		n, seen = r.pending[k]
	}
	if seen {
		r.pending[k] = n + 1
		return
	}
	r.pending[k] = 0
	r.reasons[k.source]++
	if r.timer == nil && !r.closed {
		r.timer = time.AfterFunc(r.interval, r.Flush)
	}
	r.emit(k.source, k.reason, 1)
}

// Flush ends the interval: it emits the counts not emitted yet and
// forgets the pairs seen.
func (r *Reporter) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	for k, n := range r.pending {
		if n > 0 {
			r.emit(k.source, k.reason, n)
		}
	}
	clear(r.pending)
	clear(r.reasons)
}

// Close flushes and stops the interval timer for good.
func (r *Reporter) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.Flush()
}
