package daemon

import (
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// deadlineOf returns the daemon's deadline of the lease name and its
// state, or fails when it holds none.
func (r *rig) deadlineOf(t *testing.T, name string) (clockwatch.Instant, leaseState) {
	t.Helper()
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	l := r.d.leases[name]
	if l == nil {
		t.Fatalf("the daemon no longer holds %s", name)
	}
	return l.deadline, l.state
}

// waitAnswered waits until the daemon has taken in n keepalive answers
// in all (its keepalives_ok count), polling it: nothing else tells.
func (r *rig) waitAnswered(t *testing.T, n uint64) {
	t.Helper()
	ctx := ctxT(t)
	for r.d.metrics.keepalivesOK.Load() < n {
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("the daemon took in %d keepalive answers, not %d", r.d.metrics.keepalivesOK.Load(), n)
		}
	}
}

// Lane review of 2026-12-03, finding K2: a grantor that withholds a
// session's listing (the digests differ, and the listing would take this
// sidecar past its queued_bytes) has not said which of the session's
// grants still stand, so its answer renews nothing: the lease keeps the
// deadline it had and is not lost either, and the session is asked after
// again, until an answer lists it or agrees. The same holds for an answer
// that says renewed without a listing while the digests differ, whatever
// it says of withholding: a deadline moves only on an answer that agrees
// with the daemon's digest or lists the grants. Before, the withheld
// answer (renewed false) lost the lease; the unlisted one extended it.
func TestAnswerWithoutTheListingNeverExtendsADeadline(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply func(*grantorpb.SessionRenewal, *grantorpb.SessionRenewed)
	}{
		{name: "withheld", reply: func(req *grantorpb.SessionRenewal, res *grantorpb.SessionRenewed) {
			*res = grantorpb.SessionRenewed{Session: req.Session, Withheld: true, TtlNs: req.TtlNs, LeaseSetVersion: req.LeaseSetVersion + 1}
		}},
		{name: "renewed, digest differs, nothing listed", reply: func(req *grantorpb.SessionRenewal, res *grantorpb.SessionRenewed) {
			*res = grantorpb.SessionRenewed{Session: req.Session, Renewed: true, TtlNs: req.TtlNs, LeaseSetVersion: req.LeaseSetVersion + 1}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			if _, err := r.c.Acquire(ctxT(t), "a", ipc.AcquireOptions{TTL: ttl}); err != nil {
				t.Fatal(err)
			}
			held, _ := r.deadlineOf(t, "a")
			r.g.set(func() { r.g.sessionReply = tc.reply })
			answered := r.d.metrics.keepalivesOK.Load()
			r.clock.Advance(ttl / 3)
			r.waitKeepAlive(t)
			// Each answer is taken in before the session is sent again
			// (one keepalive in flight per session): three more asked,
			// each after a pause of at most the 1 s backoff, counted from
			// when the daemon took the answer in. The clock moves only
			// once it has: under load the walk could otherwise pass the
			// 2 s before the pause even began.
			for range 3 {
				answered++
				r.waitAnswered(t, answered)
				r.advanceUntilKeepAlive(t, 2*time.Second)
				if dl, st := r.deadlineOf(t, "a"); dl != held || st == stateLost {
					t.Fatalf("after an answer without the listing: deadline %v (held %v), state %v: want it unchanged", dl, held, st)
				}
			}
			r.waitAnswered(t, answered+1)
			r.g.set(func() { r.g.sessionReply = nil })
			r.advanceUntilKeepAlive(t, 2*time.Second)
			if ev := r.waitLeaseEvent(t, ipc.EventRenewed, "a"); clockwatch.Instant(ev.DeadlineBoottimeNs) <= held {
				t.Fatalf("renewed again once the grantor agreed: %+v, want a later deadline than %v", ev, held)
			}
		})
	}
}
