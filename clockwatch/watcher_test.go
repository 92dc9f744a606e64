package clockwatch

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// syncedKernel stands in for adjtimex in watcher tests.
func syncedKernel() (KernelClockState, error) { return KernelClockState{Synced: true}, nil }

// stubKernel is a kernel clock state a test sets.
type stubKernel struct {
	mu  sync.Mutex
	st  KernelClockState
	err error
}

func (k *stubKernel) read() (KernelClockState, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.st, k.err
}

func (k *stubKernel) set(st KernelClockState, err error) {
	k.mu.Lock()
	k.st, k.err = st, err
	k.mu.Unlock()
}

// startWatcher runs w until the test ends and waits for its first sleep.
func startWatcher(t *testing.T, f *Fake, w *Watcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v when its context ended, want nil", err)
			}
		case <-time.After(waitFor):
			t.Error("Run did not return when its context ended")
		}
	})
	waitArmed(t, f)
}

// tick advances f by d and waits until the watcher has handled the
// wake-up and gone back to sleep.
func tick(t *testing.T, f *Fake, d time.Duration) {
	t.Helper()
	f.Advance(d)
	waitArmed(t, f)
}

func nextEvent(t *testing.T, w *Watcher) Event {
	t.Helper()
	select {
	case e := <-w.Events():
		return e
	case <-time.After(waitFor):
		t.Fatal("no event")
		return Event{}
	}
}

func noEvent(t *testing.T, w *Watcher) {
	t.Helper()
	select {
	case e := <-w.Events():
		t.Fatalf("unexpected event %+v", e)
	default:
	}
}

func newTestWatcher(f *Fake) *Watcher {
	return NewWatcher(WatcherConfig{Clock: f, Kernel: syncedKernel})
}

func TestWatcherQuietOnNormalTicks(t *testing.T) {
	f := NewFake(Instant(time.Hour))
	w := newTestWatcher(f)
	startWatcher(t, f, w)
	for range 20 {
		tick(t, f, DefaultInterval)
	}
	noEvent(t, w)
	v := w.View()
	if v.Pauses != 0 || v.PauseHistogram.Count != 20 || v.Suspend.Count != 0 || !v.Kernel.Synced {
		t.Fatalf("view after 20 quiet ticks: %+v", v)
	}
}

// A suspend is reported, with its length, at the first tick after it.
func TestWatcherReportsSuspend(t *testing.T) {
	f := NewFake(Instant(time.Hour))
	w := newTestWatcher(f)
	startWatcher(t, f, w)
	f.Suspend(45 * time.Minute)
	noEvent(t, w) // nothing ran yet: no timer fires during a suspend
	tick(t, f, DefaultInterval)
	e := nextEvent(t, w)
	if e.Kind != EventSuspend || e.Length != 45*time.Minute || e.At != f.Now() {
		t.Fatalf("event %+v, want a 45m suspend at %v", e, f.Now())
	}
	noEvent(t, w) // the suspend is not a pause
	v := w.View()
	if v.Suspend.Total != 45*time.Minute || v.Suspend.LastLength != 45*time.Minute || v.Suspend.LastAt != e.At {
		t.Fatalf("view: %+v", v.Suspend)
	}
}

// Time passing far beyond the interval between ticks is a pause of the
// excess.
func TestWatcherReportsPause(t *testing.T) {
	f := NewFake(0)
	w := newTestWatcher(f)
	startWatcher(t, f, w)
	tick(t, f, 30*time.Second)
	e := nextEvent(t, w)
	if e.Kind != EventPause || e.Length != 30*time.Second-DefaultInterval {
		t.Fatalf("event %+v, want a pause of 30s - interval", e)
	}
	tick(t, f, DefaultInterval+DefaultPauseThreshold) // late, but not beyond the threshold
	noEvent(t, w)
	v := w.View()
	if v.Pauses != 1 || v.LongestRecentPause != 30*time.Second-DefaultInterval {
		t.Fatalf("view: %d pauses, longest recent %v", v.Pauses, v.LongestRecentPause)
	}
}

func TestWatcherReportsUnsyncOncePerCrossing(t *testing.T) {
	f := NewFake(0)
	k := &stubKernel{st: KernelClockState{Synced: true, FreqPPM: 12.5}}
	w := NewWatcher(WatcherConfig{Clock: f, Kernel: k.read})
	startWatcher(t, f, w)
	tick(t, f, DefaultInterval)
	noEvent(t, w)
	if v := w.View(); !v.Kernel.Synced || v.Kernel.FreqPPM != 12.5 {
		t.Fatalf("view kernel %+v", v.Kernel)
	}
	k.set(KernelClockState{Synced: false}, nil)
	tick(t, f, DefaultInterval)
	if e := nextEvent(t, w); e.Kind != EventUnsynced || e.At != f.Now() {
		t.Fatalf("event %+v, want unsynced", e)
	}
	tick(t, f, DefaultInterval)
	noEvent(t, w) // still unsynced: no second event
	k.set(KernelClockState{}, errors.New("adjtimex: no"))
	tick(t, f, DefaultInterval)
	if v := w.View(); v.KernelErr == nil {
		t.Fatal("view does not show the kernel read error")
	}
	k.set(KernelClockState{Synced: true}, nil)
	tick(t, f, DefaultInterval)
	k.set(KernelClockState{Synced: false}, nil)
	tick(t, f, DefaultInterval)
	if e := nextEvent(t, w); e.Kind != EventUnsynced {
		t.Fatalf("event %+v, want unsynced again after a resync", e)
	}
}

// keepalives feeds w n keepalives from l, five seconds apart.
func keepalives(w *Watcher, l *link, n int) {
	for range n {
		w.ObserveKeepAlive(l.next(5 * time.Second))
	}
}

func TestWatcherDriftEventOncePerCrossing(t *testing.T) {
	f := NewFake(0)
	w := newTestWatcher(f) // rho 500ppm
	rng := rand.New(rand.NewPCG(5, 5))
	l := &link{ratePPM: 200, local0: Instant(time.Hour), remote0: Instant(9 * time.Hour)}
	l.out, l.back = asymmetric(rng)
	base := DefaultTiming()

	keepalives(w, l, 100)
	noEvent(t, w) // 200ppm is within rho
	if got := w.EffectiveTiming(base); got != base {
		t.Fatalf("EffectiveTiming at 200ppm = %+v, want the base %+v", got, base)
	}

	// Another grantor, whose clock this one runs 900ppm fast against.
	w.ResetDrift()
	l = &link{ratePPM: 900, local0: l.local(float64(l.trueTime)), remote0: Instant(70 * time.Hour)}
	l.out, l.back = asymmetric(rng)
	keepalives(w, l, 100)
	e := nextEvent(t, w)
	if e.Kind != EventDrift || math.Abs(e.RatePPM-900) > 5 {
		t.Fatalf("event %+v, want drift of about 900ppm", e)
	}
	keepalives(w, l, 100)
	noEvent(t, w) // once per crossing

	eff := w.EffectiveTiming(base)
	if eff.Rho < 900e-6+DefaultDriftMarginPPM*1e-6-1e-6 || eff.Epsilon != base.Epsilon {
		t.Fatalf("EffectiveTiming at 900ppm = %+v, want rho >= 950ppm", eff)
	}
	t0, d := Instant(time.Hour), 15*time.Second
	if !eff.HolderDeadline(t0, d).Before(base.HolderDeadline(t0, d)) {
		t.Fatal("observed drift beyond rho did not shorten the holder deadline")
	}
	v := w.View()
	if !v.DriftKnown || v.EffectiveRho != eff.Rho || v.Rho != DefaultRho || math.Abs(v.Drift.PPM-900) > 5 {
		t.Fatalf("view: %+v", v)
	}
}

// Events never block the watcher: with nobody reading, the oldest go and
// are counted.
func TestWatcherEventsDropOldest(t *testing.T) {
	f := NewFake(0)
	w := NewWatcher(WatcherConfig{Clock: f, Kernel: syncedKernel, EventBuffer: 2})
	startWatcher(t, f, w)
	for i := range 5 {
		f.Suspend(time.Duration(i+1) * time.Second)
		tick(t, f, DefaultInterval)
	}
	if got := w.View().DroppedEvents; got != 3 {
		t.Fatalf("DroppedEvents = %d, want 3", got)
	}
	if e := nextEvent(t, w); e.Length != 4*time.Second {
		t.Fatalf("oldest kept event %+v, want the 4s suspend", e)
	}
	if e := nextEvent(t, w); e.Length != 5*time.Second {
		t.Fatalf("newest event %+v, want the 5s suspend", e)
	}
}

func TestWatcherConfig(t *testing.T) {
	if err := DefaultWatcherConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (WatcherConfig{}).Validate(); err != nil {
		t.Fatalf("zero config (all defaults): %v", err)
	}
	for name, c := range map[string]WatcherConfig{
		"rho too large":   {Rho: 0.5},
		"negative rho":    {Rho: -1e-6},
		"NaN margin":      {DriftMarginPPM: math.NaN()},
		"negative margin": {DriftMarginPPM: -1},
		"negative tick":   {Interval: -time.Second},
	} {
		if c.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
		c.Clock, c.Kernel = NewFake(0), syncedKernel
		if err := NewWatcher(c).Run(context.Background()); err == nil {
			t.Errorf("%s: Run started", name)
		}
	}
}

// The same property through the Watcher, fed arbitrary keepalive samples.
func TestEffectiveTimingNeverExtends(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 99))
	base := DefaultTiming()
	for i := range 300 {
		w := NewWatcher(WatcherConfig{Clock: NewFake(0), Kernel: syncedKernel, Drift: DriftConfig{MinSamples: 2, MinSpan: time.Second}})
		ratePPM := (rng.Float64()*2 - 1) * math.Pow(10, rng.Float64()*4.5)
		l := &link{ratePPM: ratePPM, local0: Instant(rng.Int64N(1 << 50)), remote0: Instant(rng.Int64N(1 << 50))}
		l.out, l.back = asymmetric(rng)
		for range 30 {
			s := l.next(time.Duration(1 + rng.Int64N(int64(10*time.Second))))
			if i%3 == 0 && rng.IntN(5) == 0 { // garbage
				s = Sample{Sent: Instant(rng.Int64()), Received: Instant(rng.Int64()), Remote: Instant(rng.Int64())}
			}
			w.ObserveKeepAlive(s)
			t0 := Instant(rng.Int64N(1 << 50))
			d := time.Duration(rng.Int64N(int64(24 * time.Hour)))
			checkNeverLater(t, base, w.EffectiveTiming(base), t0, d, "EffectiveTiming")
			if v := w.View(); v.EffectiveRho < v.Rho {
				t.Fatalf("View: effective rho %v below configured %v", v.EffectiveRho, v.Rho)
			}
		}
	}
}
