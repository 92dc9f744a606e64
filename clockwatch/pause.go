package clockwatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// Defaults for a PauseDetector and a Watcher.
const (
	// DefaultInterval is how often the ticker wakes.
	DefaultInterval = 100 * time.Millisecond
	// DefaultPauseThreshold is how late a wake-up must be to be a pause.
	DefaultPauseThreshold = 500 * time.Millisecond
	// DefaultPauseWindow is how far back LongestRecent looks.
	DefaultPauseWindow = 5 * time.Minute
)

// Tick is one wake-up of a PauseDetector.
type Tick struct {
	// At is the BOOTTIME read on waking.
	At Instant
	// Late is how much later than asked the ticker woke, measured on the
	// monotonic clock (so a host suspend is not counted: SuspendDetector
	// sees those). Never negative.
	Late time.Duration
	// Paused reports Late > the detector's threshold: the process (or the
	// whole host) was stalled for about Late.
	Paused bool
}

// PauseDetector is a ticker that measures its own lateness, like jHiccup:
// it asks the Clock for a wake-up every interval and measures, on the
// monotonic clock, how late it woke. Lateness comes from anything that
// stops the process from running: GC, SIGSTOP, a frozen cgroup, CPU
// starvation, a descheduled VM. Lateness beyond the threshold is a pause.
//
// Its statistics methods are safe for concurrent use with Run.
type PauseDetector struct {
	c         Clock
	interval  time.Duration
	threshold time.Duration

	mu     sync.Mutex
	hist   Histogram
	pauses uint64
	recent recentMax
}

// NewPauseDetector returns a detector that wakes every interval and calls
// a wake-up more than threshold late a pause. window is how far back
// LongestRecent looks. Non-positive values are replaced by 100ms, 500ms
// and 5 minutes.
func NewPauseDetector(c Clock, interval, threshold, window time.Duration) *PauseDetector {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if threshold <= 0 {
		threshold = DefaultPauseThreshold
	}
	if window <= 0 {
		window = DefaultPauseWindow
	}
	return &PauseDetector{
		c: c, interval: interval, threshold: threshold,
		hist:   newHistogram(),
		recent: recentMax{slot: window / recentSlots},
	}
}

// Run ticks until ctx ends, calling onTick (which may be nil) on every
// wake-up, from Run's goroutine, before it asks for the next one. It
// returns nil when ctx ends.
func (p *PauseDetector) Run(ctx context.Context, onTick func(Tick)) error {
	start := p.c.Monotonic() // before arming: lateness can only be overestimated
	t := p.c.NewTimer(p.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		tick := p.observe(p.c.Now(), p.c.Monotonic().Sub(start)-p.interval)
		if onTick != nil {
			onTick(tick)
		}
		start = p.c.Monotonic()
		t.Reset(p.interval)
	}
}

// observe records one wake-up that came late (negative late counts as 0).
func (p *PauseDetector) observe(at Instant, late time.Duration) Tick {
	late = max(late, 0)
	tick := Tick{At: at, Late: late, Paused: late > p.threshold}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hist.add(late)
	p.recent.add(at, late)
	if tick.Paused {
		p.pauses++
	}
	return tick
}

// Histogram returns a copy of the lateness of every tick so far.
func (p *PauseDetector) Histogram() Histogram {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hist.clone()
}

// Pauses returns how many ticks were late beyond the threshold.
func (p *PauseDetector) Pauses() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pauses
}

// LongestRecent returns the largest lateness of a tick within the window
// before now (BOOTTIME), to a resolution of a tenth of the window, and 0
// if there was none.
func (p *PauseDetector) LongestRecent(now Instant) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.recent.max(now)
}

// Histogram counts durations in fixed exponential buckets. Bucket i counts
// values v with Bounds[i-1] < v <= Bounds[i]; the last count, one more than
// there are bounds, counts values above every bound.
type Histogram struct {
	// Bounds are the inclusive upper bounds of the buckets, ascending:
	// 1ms, 2ms, 4ms, ... 65.536s (2^16 ms).
	Bounds []time.Duration
	// Counts has len(Bounds)+1 entries.
	Counts []uint64
	// Count is the number of values; Sum is their total.
	Count uint64
	Sum   time.Duration
}

// Cumulative returns the histogram as cumulative counts by upper bound in
// seconds (the overflow bucket is left to Count), the shape Prometheus'
// const histograms take.
func (h Histogram) Cumulative() map[float64]uint64 {
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, b := range h.Bounds {
		cum += h.Counts[i]
		buckets[b.Seconds()] = cum
	}
	return buckets
}

// histogramBuckets is the number of bounds: 1ms << 0 .. 1ms << 16.
const histogramBuckets = 17

func newHistogram() Histogram {
	h := Histogram{Bounds: make([]time.Duration, histogramBuckets), Counts: make([]uint64, histogramBuckets+1)}
	for i := range h.Bounds {
		h.Bounds[i] = time.Millisecond << i
	}
	return h
}

func (h *Histogram) add(v time.Duration) {
	i := 0
	for i < len(h.Bounds) && v > h.Bounds[i] {
		i++
	}
	h.Counts[i]++
	h.Count++
	h.Sum += v
}

func (h Histogram) clone() Histogram {
	h.Bounds = append([]time.Duration(nil), h.Bounds...)
	h.Counts = append([]uint64(nil), h.Counts...)
	return h
}

// recentSlots is how many slots a recentMax divides its window into.
const recentSlots = 10

// recentMax keeps the maximum of values over a sliding window, in slots of
// a tenth of the window keyed by BOOTTIME.
type recentMax struct {
	slot  time.Duration
	start [recentSlots]Instant // start of the period each slot holds
	used  [recentSlots]bool
	val   [recentSlots]time.Duration
}

func (r *recentMax) add(at Instant, v time.Duration) {
	n := floorDiv(int64(at), int64(r.slot))
	i := int(n - floorDiv(n, recentSlots)*recentSlots)
	st := Instant(n * int64(r.slot))
	if !r.used[i] || r.start[i] != st {
		r.start[i], r.used[i], r.val[i] = st, true, v
		return
	}
	r.val[i] = max(r.val[i], v)
}

func (r *recentMax) max(now Instant) time.Duration {
	var m time.Duration
	oldest := now.Add(-recentSlots * r.slot)
	for i := range r.val {
		if r.used[i] && r.start[i].After(oldest) && !r.start[i].After(now) {
			m = max(m, r.val[i])
		}
	}
	return m
}

// ErrNoProcess reports that a process does not exist (any more).
var ErrNoProcess = errors.New("clockwatch: no such process")

// ProcessStopped reports whether process pid is stopped: state 'T'
// (stopped by a signal such as SIGSTOP) or 't' (stopped by a tracer) in
// /proc/PID/stat. A stopped owner cannot act on its lease, and its own
// checks of the deadline are not running. An error wrapping ErrNoProcess
// means the process is gone.
func ProcessStopped(pid int) (bool, error) {
	if pid <= 0 {
		return false, fmt.Errorf("clockwatch: invalid pid %d", pid)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("%w: pid %d", ErrNoProcess, pid)
	}
	if err != nil {
		return false, fmt.Errorf("clockwatch: reading state of pid %d: %w", pid, err)
	}
	state, err := statState(b)
	if err != nil {
		return false, fmt.Errorf("clockwatch: pid %d: %w", pid, err)
	}
	return state == 'T' || state == 't', nil
}

// statState returns the state field of a /proc/PID/stat line. The field
// before it, the command name in parentheses, may itself hold spaces and
// parentheses, so the state is found after the last ')'.
func statState(stat []byte) (byte, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) || stat[i+1] != ' ' {
		return 0, fmt.Errorf("malformed /proc stat line %q", stat)
	}
	return stat[i+2], nil
}
