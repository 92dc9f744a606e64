package daemon

import (
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

// Issue 25 item 3: a retry of the renew loop waits a uniform share of its
// backoff, never more than the backoff nor a quarter of the validity the
// soonest lease has left, so hosts that failed together come back spread
// out and still try several times before a deadline.
func TestRetryDelayBounds(t *testing.T) {
	for failures := 1; failures <= 8; failures++ {
		for _, left := range []time.Duration{-time.Second, 0, 40 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second, time.Hour} {
			ceiling := min(backoff(failures), max(left/4, 0))
			for _, u := range []float64{0, 0.25, 0.5, 0.999999} {
				got := retryDelay(failures, left, u)
				if got < 0 || got > ceiling || (ceiling > 0 && got == ceiling) {
					t.Fatalf("retryDelay(%d, %v, %v) = %v, want in [0, %v)", failures, left, u, got, ceiling)
				}
			}
			// Full jitter: the lower half of the backoff is used too.
			if ceiling > 0 && retryDelay(failures, left, 0.25) >= ceiling/2 {
				t.Fatalf("retryDelay(%d, %v, 0.25) = %v: not spread below half of %v", failures, left, retryDelay(failures, left, 0.25), ceiling)
			}
		}
	}
	if got := retryDelay(10, time.Hour, 0.999999); got < 999*time.Millisecond {
		t.Errorf("after many failures the backoff reaches %v, want about the 1 s cap", got)
	}
}

// A session's retry delay is bounded by the soonest deadline of its
// settled leases, which the batch took when it was made (on a fake clock
// here): a lease with 400 ms left bounds the wait to 100 ms whatever the
// backoff; a pending lease (its first renewal not in) does not count.
func TestSessionRetryDelayBoundedBySoonestDeadline(t *testing.T) {
	clock := clockwatch.NewFake(start)
	now := clock.Now()
	s := &gsession{id: "s", ttl: ttl}
	d := &Daemon{clock: clock, leases: map[string]*lease{
		"far":     {name: "far", sess: s, state: stateHeld, deadline: now.Add(time.Hour)},
		"soon":    {name: "soon", sess: s, state: stateHeld, deadline: now.Add(400 * time.Millisecond)},
		"pending": {name: "pending", sess: s, state: statePending, deadline: now.Add(time.Millisecond)},
	}}
	due := d.dueSessions(now, nil)
	if len(due) != 1 || due[0].soonest != now.Add(400*time.Millisecond) {
		t.Fatalf("due sessions %+v, want one whose soonest deadline is the 400 ms one", due)
	}
	sb := due[0]
	for range 200 {
		if got := sb.retryDelay(now, 8); got < 0 || got >= 100*time.Millisecond {
			t.Fatalf("retryDelay = %v with 400 ms left, want in [0, 100ms)", got)
		}
	}
	clock.Advance(time.Second) // past the soonest deadline: no wait at all
	if got := sb.retryDelay(clock.Now(), 8); got != 0 {
		t.Fatalf("retryDelay = %v past a deadline, want 0", got)
	}
	var most time.Duration
	far := &sessionBatch{s: s, soonest: now.Add(time.Hour)}
	for range 200 {
		most = max(most, far.retryDelay(clock.Now(), 8))
	}
	if most <= 100*time.Millisecond || most >= time.Second {
		t.Fatalf("with an hour left the largest of 200 waits is %v, want spread up to the 1 s backoff", most)
	}
}
