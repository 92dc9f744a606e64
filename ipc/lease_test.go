package ipc

import (
	"testing"
	"time"
)

// After a host suspend CLOCK_BOOTTIME has moved on while the Go timer
// behind Done (CLOCK_MONOTONIC) has not: the deadline has passed, Done is
// still open. Valid, the check before each action, reads CLOCK_BOOTTIME:
// it says not valid and ends the lease at once (review R11-4). The
// suspend is simulated by moving the deadline into the past behind the
// watchdog's back, which is what a suspend looks like from here.
func TestValidEndsLeaseWhoseBoottimeDeadlinePassed(t *testing.T) {
	l := newLease(&Grant{Lease: "jobs/x", Token: "1", DeadlineBoottimeNs: boottime() + int64(time.Hour)})
	if !l.Valid() {
		t.Fatal("a lease an hour from its deadline is not valid")
	}
	l.mu.Lock()
	l.deadline = boottime() - int64(time.Second) // an hour-long suspend: the watchdog still waits
	l.mu.Unlock()
	select {
	case <-l.Done():
		t.Fatal("Done closed before anything looked at the clock; the test simulates nothing")
	default:
	}
	if l.Valid() {
		t.Fatal("Valid: true for a lease whose CLOCK_BOOTTIME deadline passed")
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Valid found the deadline passed but Done is still open")
	}
	if r := l.Reason(); r != ReasonDeadlinePassed {
		t.Fatalf("Reason %q, want %q", r, ReasonDeadlinePassed)
	}
}
