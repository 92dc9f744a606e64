package clockwatch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Defaults for WatcherConfig (with DefaultInterval, DefaultPauseThreshold
// and DefaultPauseWindow).
const (
	// DefaultDriftMarginPPM is added to an observed drift rate before it
	// raises rho: room for the estimate's error and for the rate to wander.
	DefaultDriftMarginPPM = 50.0
	// DefaultEventBuffer is the capacity of Watcher.Events.
	DefaultEventBuffer = 64
)

// EventKind names what a Watcher noticed. The values go on the socket as
// they are: never rename one.
type EventKind string

// The kinds of Event.
const (
	// EventSuspend: the host was suspended for Length (BOOTTIME moved
	// and MONOTONIC did not).
	EventSuspend EventKind = "suspend"
	// EventPause: this process did not run for about Length.
	EventPause EventKind = "pause"
	// EventDrift: the local clock's rate against the grantor's, RatePPM,
	// went beyond the configured rho.
	EventDrift EventKind = "drift"
	// EventUnsynced: the kernel reports its clock unsynchronised.
	EventUnsynced EventKind = "unsynced"
)

// Event is something a Watcher noticed that can only shorten validity.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// At is the BOOTTIME at which it was noticed.
	At Instant
	// Length is the suspend's or the pause's length (0 for other kinds).
	Length time.Duration
	// RatePPM is the observed drift for EventDrift (0 for other kinds).
	RatePPM float64
}

// WatcherConfig configures a Watcher. Zero fields take their defaults (a
// zero Rho is DefaultRho: no real clock has zero drift).
type WatcherConfig struct {
	// Clock is watched; nil means System.
	Clock Clock
	// Interval is how often the watcher wakes to look (DefaultInterval).
	Interval time.Duration
	// PauseThreshold is how late a wake-up must be to count as a pause
	// (DefaultPauseThreshold).
	PauseThreshold time.Duration
	// PauseWindow is how far back View's LongestRecentPause looks
	// (DefaultPauseWindow).
	PauseWindow time.Duration
	// Rho is the configured maximum drift rate (DefaultRho); an observed
	// rate beyond it is an EventDrift.
	Rho float64
	// DriftMarginPPM is added to the observed rate when EffectiveTiming
	// raises rho (DefaultDriftMarginPPM).
	DriftMarginPPM float64
	// Drift configures the estimator of the rate against the grantor.
	Drift DriftConfig
	// EventBuffer is the capacity of Events (DefaultEventBuffer).
	EventBuffer int
	// Kernel reads the kernel's clock discipline; nil means KernelClock.
	// Tests replace it.
	Kernel func() (KernelClockState, error)
}

// DefaultWatcherConfig returns the defaults, watching System.
func DefaultWatcherConfig() WatcherConfig {
	return WatcherConfig{
		Clock: System, Interval: DefaultInterval, PauseThreshold: DefaultPauseThreshold,
		PauseWindow: DefaultPauseWindow, Rho: DefaultRho, DriftMarginPPM: DefaultDriftMarginPPM,
		Drift: DefaultDriftConfig(), EventBuffer: DefaultEventBuffer, Kernel: KernelClock,
	}
}

// withDefaults fills the zero fields.
func (c WatcherConfig) withDefaults() WatcherConfig {
	d := DefaultWatcherConfig()
	if c.Clock == nil {
		c.Clock = d.Clock
	}
	if c.Interval == 0 {
		c.Interval = d.Interval
	}
	if c.PauseThreshold == 0 {
		c.PauseThreshold = d.PauseThreshold
	}
	if c.PauseWindow == 0 {
		c.PauseWindow = d.PauseWindow
	}
	if c.Rho == 0 {
		c.Rho = d.Rho
	}
	if c.DriftMarginPPM == 0 {
		c.DriftMarginPPM = d.DriftMarginPPM
	}
	if c.EventBuffer == 0 {
		c.EventBuffer = d.EventBuffer
	}
	if c.Kernel == nil {
		c.Kernel = d.Kernel
	}
	c.Drift = c.Drift.withDefaults()
	return c
}

// Validate checks c after zero fields take their defaults.
func (c WatcherConfig) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Interval < 0 || c.PauseThreshold < 0 || c.PauseWindow < 0:
		return errors.New("clockwatch: negative watcher interval, pause threshold or window")
	case c.EventBuffer < 0:
		return errors.New("clockwatch: negative event buffer")
	case !(c.DriftMarginPPM >= 0) || math.IsInf(c.DriftMarginPPM, 0):
		return fmt.Errorf("clockwatch: drift margin %v ppm is not a finite non-negative number", c.DriftMarginPPM)
	}
	return Timing{Rho: c.Rho}.Validate()
}

// Watcher watches the clock for everything that can make a lease deadline
// wrong, for the sidecar and the grantor: host suspends, stalls of this
// process, the kernel losing NTP sync, and the local clock drifting
// against the grantor's. It reports each as an Event and keeps a View.
// Nothing it does can lengthen a validity: EffectiveTiming only ever
// raises rho.
//
// Its methods are safe for concurrent use; Run must not be called twice at
// once.
type Watcher struct {
	cfg     WatcherConfig
	suspend *SuspendDetector
	pause   *PauseDetector
	drift   *DriftEstimator
	events  chan Event

	emitMu  sync.Mutex // makes drop-oldest-then-send atomic
	mu      sync.Mutex
	dropped uint64
	kernel  KernelClockState
	kerr    error
	kread   bool // kernel read at least once
	drifted bool // the estimate is beyond Rho: the next crossing needs a fall below first
}

// NewWatcher returns a Watcher for cfg; zero fields of cfg take their
// defaults. It starts the suspend baseline now; Run starts the rest.
func NewWatcher(cfg WatcherConfig) *Watcher {
	cfg = cfg.withDefaults()
	return &Watcher{
		cfg:     cfg,
		suspend: NewSuspendDetector(cfg.Clock),
		pause:   NewPauseDetector(cfg.Clock, cfg.Interval, cfg.PauseThreshold, cfg.PauseWindow),
		drift:   NewDriftEstimator(cfg.Drift),
		events:  make(chan Event, max(cfg.EventBuffer, 1)),
	}
}

// Run watches until ctx ends, then returns nil. It returns an error at
// once if the configuration is invalid. Every Interval it checks for a
// suspend, measures its own lateness and reads the kernel's sync state.
func (w *Watcher) Run(ctx context.Context) error {
	if err := w.cfg.Validate(); err != nil {
		return err
	}
	w.readKernel(w.cfg.Clock.Now())
	return w.pause.Run(ctx, w.onTick)
}

func (w *Watcher) onTick(t Tick) {
	if s := w.suspend.Check(); s > 0 {
		w.emit(Event{Kind: EventSuspend, At: t.At, Length: s})
	}
	if t.Paused {
		w.emit(Event{Kind: EventPause, At: t.At, Length: t.Late})
	}
	w.readKernel(t.At)
}

// readKernel refreshes the kernel state and reports a fall out of sync.
func (w *Watcher) readKernel(at Instant) {
	k, err := w.cfg.Kernel()
	w.mu.Lock()
	wasSynced := !w.kread || w.kerr != nil || w.kernel.Synced
	w.kerr = err
	if err == nil {
		w.kernel, w.kread = k, true
	}
	w.mu.Unlock()
	if err == nil && !k.Synced && wasSynced {
		w.emit(Event{Kind: EventUnsynced, At: at})
	}
}

// ObserveKeepAlive feeds one keepalive round trip with the grantor to the
// drift estimator. When the estimated rate first goes beyond Rho, it emits
// an EventDrift; another comes only after the estimate has fallen back to
// 90% of Rho or less (or ResetDrift).
func (w *Watcher) ObserveKeepAlive(s Sample) {
	w.drift.Add(s)
	ppm, ok := w.drift.Rate()
	if !ok {
		return
	}
	limit := w.cfg.Rho * 1e6
	w.mu.Lock()
	cross := false
	switch a := math.Abs(ppm); {
	case a > limit && !w.drifted:
		w.drifted, cross = true, true
	case a <= 0.9*limit:
		w.drifted = false
	}
	w.mu.Unlock()
	if cross {
		w.emit(Event{Kind: EventDrift, At: w.cfg.Clock.Now(), RatePPM: ppm})
	}
}

// ResetDrift forgets the keepalive samples: call it when the grantor
// leader changes, since every host has its own BOOTTIME.
func (w *Watcher) ResetDrift() {
	w.drift.Reset()
	w.mu.Lock()
	w.drifted = false
	w.mu.Unlock()
}

// EffectiveTiming returns base with rho raised to the observed drift plus
// the margin when that is larger (Timing.WithObservedRate), using the
// largest rate magnitude the samples allow. Until the estimator knows a
// rate, it returns base. Its HolderDeadline is never later than base's.
func (w *Watcher) EffectiveTiming(base Timing) Timing {
	d, ok := w.drift.Estimate()
	if !ok {
		return base
	}
	return base.WithObservedRate(d.WorstPPM(), w.cfg.DriftMarginPPM)
}

// Events returns the channel of events. It is buffered and the watcher
// never blocks on it: when it is full the oldest event is dropped (see
// View's DroppedEvents). Events are not replayed to late readers.
func (w *Watcher) Events() <-chan Event { return w.events }

// emit sends e, dropping the oldest queued event if the buffer is full.
func (w *Watcher) emit(e Event) {
	w.emitMu.Lock()
	defer w.emitMu.Unlock()
	for {
		select {
		case w.events <- e:
			return
		default:
		}
		select {
		case <-w.events:
			w.mu.Lock()
			w.dropped++
			w.mu.Unlock()
		default:
		}
	}
}

// View is the Watcher's current picture, for `leaseside status`,
// `leaseside clock` and metrics.
type View struct {
	// At is the BOOTTIME when the view was taken.
	At Instant
	// Kernel is the last kernel clock state read (zero before Run's first
	// read); KernelErr is the error of the last read, if it failed.
	Kernel    KernelClockState
	KernelErr error
	// Drift is the estimate against the grantor's clock; DriftKnown says
	// whether it has enough samples to count.
	Drift      DriftEstimate
	DriftKnown bool
	// Rho is the configured drift bound; EffectiveRho is what
	// EffectiveTiming uses with it: never less than Rho.
	Rho          float64
	EffectiveRho float64
	// LongestRecentPause is the largest lateness of a wake-up within
	// PauseWindow; Pauses counts the wake-ups late beyond the threshold.
	LongestRecentPause time.Duration
	PauseWindow        time.Duration
	Pauses             uint64
	// PauseHistogram holds the lateness of every wake-up.
	PauseHistogram Histogram
	// Suspend sums up the suspends seen since NewWatcher.
	Suspend SuspendStats
	// DroppedEvents counts events dropped because Events was full.
	DroppedEvents uint64
}

// View returns the current picture.
func (w *Watcher) View() View {
	v := w.Brief()
	v.PauseHistogram = w.pause.Histogram()
	return v
}

// Brief is View without PauseHistogram (left empty), which it copies:
// for callers that do not show the histogram, such as each status reply.
func (w *Watcher) Brief() View {
	now := w.cfg.Clock.Now()
	d, ok := w.drift.Estimate()
	v := View{
		At:                 now,
		Drift:              d,
		DriftKnown:         ok,
		Rho:                w.cfg.Rho,
		EffectiveRho:       w.cfg.Rho,
		LongestRecentPause: w.pause.LongestRecent(now),
		PauseWindow:        w.cfg.PauseWindow,
		Pauses:             w.pause.Pauses(),
		Suspend:            w.suspend.Stats(),
	}
	if ok {
		v.EffectiveRho = Timing{Rho: w.cfg.Rho}.WithObservedRate(d.WorstPPM(), w.cfg.DriftMarginPPM).Rho
	}
	w.mu.Lock()
	v.Kernel, v.KernelErr, v.DroppedEvents = w.kernel, w.kerr, w.dropped
	w.mu.Unlock()
	return v
}
