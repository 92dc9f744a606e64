package clockwatch

import (
	"context"
	"sync"
	"time"
)

// Fake is a Clock that moves only when a test says so. It keeps a BOOTTIME
// and a MONOTONIC reading: Advance moves both, Suspend moves only BOOTTIME,
// as a host suspend does. Timers run on the monotonic reading, like Go's, so
// a simulated suspend fires no timer, exactly the hazard a real suspend is.
//
// Fake stands in for the real clock only where the real thing cannot run in a
// test: nobody can suspend the test host.
type Fake struct {
	mu      sync.Mutex
	boot    Instant
	mono    Instant
	timers  map[*fakeTimer]struct{}
	changed chan struct{} // closed and replaced whenever timers change
}

// NewFake returns a fake clock whose BOOTTIME and MONOTONIC both read start.
func NewFake(start Instant) *Fake {
	return &Fake{boot: start, mono: start, timers: map[*fakeTimer]struct{}{}, changed: make(chan struct{})}
}

// Now returns the fake BOOTTIME.
func (f *Fake) Now() Instant {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.boot
}

// Monotonic returns the fake MONOTONIC.
func (f *Fake) Monotonic() Instant {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mono
}

// Advance moves both clocks forward by d and fires every timer that is due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.boot = f.boot.Add(d)
	f.mono = f.mono.Add(d)
	for t := range f.timers {
		if !t.when.After(f.mono) {
			delete(f.timers, t)
			t.fire()
		}
	}
	f.notifyLocked()
	f.mu.Unlock()
}

// Suspend simulates a host suspend of length d: BOOTTIME jumps, MONOTONIC
// does not, and no timer fires.
func (f *Fake) Suspend(d time.Duration) {
	f.mu.Lock()
	f.boot = f.boot.Add(d)
	f.mu.Unlock()
}

// NewTimer returns a timer that fires when the fake monotonic clock has
// advanced by d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, c: make(chan struct{}, 1)}
	t.Reset(d)
	return t
}

// Timers returns how many timers are waiting to fire.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// WaitTimers blocks until at least n timers are waiting, or ctx ends. Tests
// use it to know that the code under test has gone to sleep before they
// advance the clock.
func (f *Fake) WaitTimers(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		have, ch := len(f.timers), f.changed
		f.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

type fakeTimer struct {
	f    *Fake
	c    chan struct{}
	when Instant // on the monotonic clock; guarded by f.mu
}

func (t *fakeTimer) fire() {
	select {
	case t.c <- struct{}{}:
	default:
	}
}

func (t *fakeTimer) C() <-chan struct{} { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	_, ok := t.f.timers[t]
	delete(t.f.timers, t)
	t.f.notifyLocked()
	return ok
}

func (t *fakeTimer) Reset(d time.Duration) {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	select {
	case <-t.c:
	default:
	}
	t.when = t.f.mono.Add(d)
	if d <= 0 {
		delete(t.f.timers, t)
		t.fire()
	} else {
		t.f.timers[t] = struct{}{}
	}
	t.f.notifyLocked()
}
