package daemon

import (
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

// TestJeopardyComesBeforeDeadlineForShortTerms: when d*rho + eps >= d/3
// (a valid configuration: MinTTL 1s with epsilon 400ms, or a grantor
// stating that epsilon, or a drift that raised rho) the deadline
// t0 + d(1-rho) - eps comes before t0 + 2d/3; jeopardy must still come
// before it, and after the renewal due at t0 + d/3 (review 9/12/13 S6).
func TestJeopardyComesBeforeDeadlineForShortTerms(t *testing.T) {
	timing := clockwatch.Timing{Rho: 0.001, Epsilon: 400 * time.Millisecond}
	if err := timing.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg := Config{MinTTL: time.Second, Timing: timing}
	if cfg.MinTTL <= cfg.Timing.MinTerm() {
		t.Fatalf("a 1s MinTTL is refused with %v", timing)
	}
	t0 := clockwatch.Instant(1000 * time.Second)
	l := &lease{state: stateHeld, ttl: time.Second, t0: t0, deadline: timing.HolderDeadline(t0, time.Second)}
	at := l.jeopardyAt()
	if !at.Before(l.deadline) {
		t.Fatalf("jeopardy at %v, deadline at %v: a lease of 1s with epsilon 400ms is never in jeopardy before it is lost",
			at.Sub(t0), l.deadline.Sub(t0))
	}
	if due := t0.Add(l.ttl / 3); !due.Before(at) {
		t.Fatalf("jeopardy at %v, not after the renewal due at %v", at.Sub(t0), due.Sub(t0))
	}
	long := &lease{state: stateHeld, ttl: 30 * time.Second, t0: t0, deadline: timing.HolderDeadline(t0, 30*time.Second)}
	if got, want := long.jeopardyAt(), t0.Add(20*time.Second); got != want {
		t.Fatalf("a 30s lease: jeopardy at %v, want 2d/3 = 20s", got.Sub(t0))
	}
}
