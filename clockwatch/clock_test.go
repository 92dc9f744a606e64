package clockwatch

import (
	"context"
	"testing"
	"time"
)

func TestRealClockBoottimeNotBehindMonotonic(t *testing.T) {
	if err := CheckHost(); err != nil {
		t.Fatal(err)
	}
	a := System.Now()
	b := System.Now()
	if b.Before(a) {
		t.Fatalf("BOOTTIME went back: %v then %v", a, b)
	}
}

func TestRealTimerFiresAndResets(t *testing.T) {
	tm := System.NewTimer(time.Hour)
	tm.Reset(time.Millisecond)
	select {
	case <-tm.C():
	case <-time.After(30 * time.Second):
		t.Fatal("reset timer did not fire")
	}
	if tm.Stop() {
		t.Error("Stop reported stopping a timer that had fired")
	}
}

func TestFakeAdvanceFiresDueTimersOnly(t *testing.T) {
	f := NewFake(0)
	early, late := f.NewTimer(time.Second), f.NewTimer(3*time.Second)
	f.Advance(2 * time.Second)
	select {
	case <-early.C():
	default:
		t.Fatal("timer due at 1s did not fire at 2s")
	}
	select {
	case <-late.C():
		t.Fatal("timer due at 3s fired at 2s")
	default:
	}
	if f.Timers() != 1 {
		t.Fatalf("%d timers waiting, want 1", f.Timers())
	}
}

// A suspend moves BOOTTIME and not MONOTONIC, and fires no timer: Go's
// timers would not have fired either.
func TestFakeSuspend(t *testing.T) {
	f := NewFake(10)
	tm := f.NewTimer(time.Second)
	f.Suspend(time.Minute)
	if got := f.Now().Sub(f.Monotonic()); got != time.Minute {
		t.Fatalf("BOOTTIME-MONOTONIC = %v after a 1m suspend", got)
	}
	select {
	case <-tm.C():
		t.Fatal("a timer fired during a suspend")
	default:
	}
}

func TestFakeWaitTimers(t *testing.T) {
	f := NewFake(0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() { f.NewTimer(time.Second) }()
	if err := f.WaitTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
}

// The holder's interval always ends before the grantor's, for any t0 <= tG.
func TestTimingHolderEndsBeforeGrantor(t *testing.T) {
	tm := DefaultTiming()
	for _, d := range []time.Duration{time.Second, 15 * time.Second, time.Hour} {
		t0 := Instant(5 * time.Second)
		if h, g := tm.HolderDeadline(t0, d), tm.GrantorExpiry(t0, d); !h.Before(g) {
			t.Errorf("d=%v: holder deadline %v not before grantor expiry %v", d, h, g)
		}
		want := t0.Add(time.Duration(float64(d)*(1-tm.Rho)) - tm.Epsilon)
		if got := tm.HolderDeadline(t0, d); got != want {
			t.Errorf("d=%v: HolderDeadline %v, want t0+d(1-rho)-eps = %v", d, got, want)
		}
		want = t0.Add(time.Duration(float64(d)*(1+tm.Rho)) + tm.Epsilon)
		if got := tm.GrantorExpiry(t0, d); got != want {
			t.Errorf("d=%v: GrantorExpiry %v, want tG+d(1+rho)+eps = %v", d, got, want)
		}
	}
	if err := (Timing{Rho: -1}).Validate(); err == nil {
		t.Error("negative rho accepted")
	}
}

func TestHistogramCumulative(t *testing.T) {
	h := Histogram{Bounds: []time.Duration{time.Millisecond, 2 * time.Millisecond}, Counts: []uint64{3, 2, 1}, Count: 6}
	c := h.Cumulative()
	if c[0.001] != 3 || c[0.002] != 5 || len(c) != 2 {
		t.Fatalf("cumulative %v, want {0.001:3 0.002:5}", c)
	}
}
