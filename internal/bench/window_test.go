package bench

import (
	"testing"
	"time"
)

// ended reports whether w has ended, without waiting.
func ended(w *Window) bool {
	select {
	case <-w.Ended():
		return true
	default:
		return false
	}
}

// A window whose nominal length passed with too few events counted stays
// open, counts operations that end after the nominal end, and ends at the
// latest end of those it waited for.
func TestWindowWaitsForEvents(t *testing.T) {
	w := NewWindowUntil(0, 0, 2)
	<-time.After(time.Millisecond) // the nominal end lies in the past
	now := time.Now()
	if !w.Open(now) {
		t.Fatal("the window ended with no operation counted")
	}
	if w.Holds(w.Start.Add(-time.Nanosecond), now) {
		t.Error("an operation that started before the window was counted")
	}
	t1, t2 := now.Add(2*time.Second), now.Add(time.Second)
	if !w.Holds(w.Start, t1) {
		t.Fatal("the first operation ending after the nominal end was not counted while the window waits")
	}
	if ended(w) || !w.Open(now) {
		t.Fatal("the window ended after one operation of the two it waits for")
	}
	if !w.Holds(w.Start, t2) {
		t.Fatal("the second operation was not counted")
	}
	select {
	case <-w.Ended():
	case <-time.After(time.Minute):
		t.Fatal("the window did not end after the operations it waits for")
	}
	if got := w.End(); !got.Equal(t1) {
		t.Errorf("the window ended at %v, want the latest counted end %v", got, t1)
	}
	if w.Open(t1) || !w.Open(t2) {
		t.Error("Open disagrees with the end")
	}
	if w.Holds(w.Start, t1.Add(time.Nanosecond)) {
		t.Error("an operation ending after the end was counted")
	}
	if !w.Holds(w.Start, t1) {
		t.Error("an operation ending at the end, seen late, was not counted")
	}
	if r := w.Rate(4); r <= 0 {
		t.Errorf("rate %v", r)
	}
}

// A window that counted what it waits for ends at its nominal end: an
// operation ending after it does not count.
func TestWindowEndsAtNominalEnd(t *testing.T) {
	d := 20 * time.Millisecond
	w := NewWindowUntil(0, d, 1)
	nominal := w.Start.Add(d)
	if !w.Holds(w.Start, w.Start) {
		t.Fatal("an operation in the window was not counted")
	}
	if w.Holds(w.Start, nominal.Add(time.Nanosecond)) {
		t.Error("an operation ending after the nominal end was counted though the window had what it waits for")
	}
	select {
	case <-w.Ended():
	case <-time.After(time.Minute):
		t.Fatal("the window did not end")
	}
	if got := w.End(); !got.Equal(nominal) {
		t.Errorf("ended at %v, want the nominal end %v", got, nominal)
	}
	if !w.Holds(w.Start, nominal) {
		t.Error("an operation ending at the nominal end was not counted")
	}
}

// A window still in its nominal length is open and has not ended, however
// many operations it counted.
func TestWindowOpenBeforeNominalEnd(t *testing.T) {
	w := NewWindowUntil(0, time.Hour, 1)
	for range 3 {
		if !w.Holds(w.Start, time.Now()) {
			t.Fatal("an operation in the window was not counted")
		}
	}
	if !w.Open(time.Now()) || ended(w) {
		t.Error("the window ended before its nominal end")
	}
}
