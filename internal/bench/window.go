package bench

import (
	"sync"
	"time"
)

// Window is the measured part of a timed workload: from the end of the
// warmup to its end. A window lasts at least its nominal length and does
// not end before the events it waits for (operations that lie in it, see
// Holds) were counted, so that a workload on a machine too busy to answer
// within the nominal length measures what it waited for rather than
// nothing. Its methods are safe for concurrent use.
type Window struct {
	// Start is the end of the warmup.
	Start   time.Time
	nominal time.Time // Start + the nominal length
	want    int       // events to count before the window may end

	mu      sync.Mutex
	counted int
	last    time.Time // the latest end of a counted operation
	due     bool      // the nominal end passed
	end     time.Time // zero until the window ended
	ended   chan struct{}
	timer   *time.Timer
}

// NewWindow returns the window that starts warmup from now and lasts d,
// and then until at least one operation that lies in it was counted.
func NewWindow(warmup, d time.Duration) *Window {
	return NewWindowUntil(warmup, d, 1)
}

// NewWindowUntil returns the window that starts warmup from now and lasts
// d, and then until at least n operations that lie in it were counted.
func NewWindowUntil(warmup, d time.Duration, n int) *Window {
	start := time.Now().Add(warmup)
	w := &Window{Start: start, nominal: start.Add(d), want: n, ended: make(chan struct{})}
	w.timer = time.AfterFunc(time.Until(w.nominal), func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.due = true
		w.closeIfDone()
	})
	return w
}

// closeIfDone ends the window if its nominal end passed and it counted
// what it waits for: at the nominal end or at the end of the latest
// operation counted after it. w.mu is held.
func (w *Window) closeIfDone() {
	if !w.end.IsZero() || !w.due || w.counted < w.want {
		return
	}
	w.end = w.nominal
	if w.last.After(w.end) {
		w.end = w.last
	}
	w.timer.Stop()
	close(w.ended)
}

// Open reports whether the window has not ended at t: a workload starts
// another operation while it is.
func (w *Window) Open(t time.Time) bool {
	if t.Before(w.nominal) {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.due = true
	w.closeIfDone()
	return w.end.IsZero() || t.Before(w.end)
}

// Holds reports whether an operation from t0 to t1 lies in w, and counts
// it if it does. An operation lies in the window if it started at or
// after Start and ended by the window's end; one that ends after the
// nominal end lies in it only while the window still waits for events,
// and the window then ends at the latest such operation's end.
func (w *Window) Holds(t0, t1 time.Time) bool {
	if t0.Before(w.Start) {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case !w.end.IsZero():
		if t1.After(w.end) {
			return false
		}
	case !t1.After(w.nominal):
	case w.counted >= w.want:
		// The nominal end passed with enough counted: the window ends
		// there (the timer may not have run yet).
		w.due = true
		w.closeIfDone()
		return false
	default:
		w.due = true
	}
	w.counted++
	if t1.After(w.last) {
		w.last = t1
	}
	w.closeIfDone()
	return true
}

// Ended is closed when the window ends.
func (w *Window) Ended() <-chan struct{} { return w.ended }

// End returns when the window ended, waiting for it to end.
func (w *Window) End() time.Time {
	<-w.ended
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.end
}

// Rate is n per second of w, once it ended (it waits).
func (w *Window) Rate(n int) float64 {
	return float64(n) / w.End().Sub(w.Start).Seconds()
}
