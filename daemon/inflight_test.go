package daemon

import (
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// Issue 22.6, keepalives in flight per term: the keepalive of a long-term
// session whose reply does not come holds back no short-term session.
// The short one comes due while the long one is unanswered (its batch
// times out only after RenewTimeout, 2 s, more than the short term's
// d/3), and it leaves and is renewed at once, from the t0 of its own
// keepalive. Before, one keepalive was in flight per daemon: the short
// session waited for the long one's timeout and a backoff, and a lease
// of a 1-2 s term was lost behind it.
func TestStalledLongTermKeepAliveDoesNotDelayShortTerm(t *testing.T) {
	const long, short = 30 * time.Second, 3 * time.Second
	r := newRig(t)
	if r.d.cfg.RenewTimeout <= short/3 {
		t.Fatalf("RenewTimeout %v: the long batch would time out before the short session is due", r.d.cfg.RenewTimeout)
	}
	isLong := func(ka *grantorpb.KeepAliveRequest) bool {
		for _, s := range ka.Sessions {
			if s.TtlNs == int64(long) {
				return true
			}
		}
		return false
	}
	r.g.set(func() { r.g.holdReply = isLong })
	if _, err := r.c.Acquire(ctxT(t), "jobs/long", ipc.AcquireOptions{TTL: long}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(long/3 - short/3/2)
	sg, err := r.c.Acquire(ctxT(t), "jobs/short", ipc.AcquireOptions{TTL: short})
	if err != nil {
		t.Fatal(err)
	}
	shortT0 := r.clock.Now()
	r.clock.Advance(short / 3 / 2) // the long session is due: its keepalive leaves, and no reply comes
	if ka := r.waitKeepAlive(t); !isLong(ka) || len(ka.Sessions) != 1 {
		t.Fatalf("first keepalive %v, want the long session alone", ka.Sessions)
	}
	longSent := r.clock.Now()
	r.clock.Advance(shortT0.Add(short / 3).Sub(r.clock.Now())) // the short session is due
	if !r.clock.Now().Before(longSent.Add(r.d.cfg.RenewTimeout)) {
		t.Fatal("the long keepalive timed out already; the test proves nothing")
	}
	ka := r.waitKeepAlive(t)
	if isLong(ka) || len(ka.Sessions) != 1 || ka.Sessions[0].TtlNs != int64(short) {
		t.Fatalf("keepalive %v, want the short session alone while the long one is unanswered", ka.Sessions)
	}
	sent := r.clock.Now()
	ev := r.waitLeaseEvent(t, ipc.EventRenewed, "jobs/short")
	if ev.Token != sg.Token || ev.DeadlineBoottimeNs != int64(r.timing.HolderDeadline(sent, short)) {
		t.Fatalf("short renewed %+v, want token %s until t0 + d(1-rho) - eps of its own keepalive", ev, sg.Token)
	}
	// The long batch times out in its turn: its stream goes, and the long
	// session is sent again on a new one, and renewed there.
	ended := make(chan struct{}, 1)
	r.g.set(func() { r.g.holdReply, r.g.streamsEnded = nil, ended })
	r.clock.Advance(longSent.Add(r.d.cfg.RenewTimeout).Sub(r.clock.Now()))
	// The daemon drops the stream once it has counted the failure and set
	// the long session's backoff (from the clock as it is now), at most
	// 100ms.
	select {
	case <-ended:
	case <-ctxT(t).Done():
		t.Fatal("the daemon never gave up on the stream of the unanswered keepalive")
	}
	r.clock.Advance(100 * time.Millisecond)
	for {
		if ka := r.waitKeepAlive(t); isLong(ka) {
			break
		}
	}
	r.waitLeaseEvent(t, ipc.EventRenewed, "jobs/long")
}
