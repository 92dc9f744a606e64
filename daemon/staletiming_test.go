package daemon

import (
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// TestRenewalAfterRaiseUsesRaisedFloor (review rev3): a keepalive reply
// reads the timing (d.timing) before it takes d.mu; a drift found
// meanwhile raises the floor and shortens every deadline, and the reply,
// applied after, must not lengthen them again with the timing it read
// before. The interleaving: the reply's timing is read at rho 500 ppm,
// the floor rises to 20% and the shortening runs, then the reply is
// applied. Fails without reading the floor under d.mu: the renewal's
// deadline was 1.8 s (9 s term at 20% against 500 ppm) later than the floor
// gives from its t0.
func TestRenewalAfterRaiseUsesRaisedFloor(t *testing.T) {
	r := newStateDirRig(t)
	d := r.d
	l := r.grant(r.sess[0], false, false)
	r.clock.Advance(time.Second)
	t0 := r.clock.Now()
	stale := d.timing() // the reply's, read before d.mu

	raised := d.floor.get()
	raised.Rho = 0.2
	d.floor.raise(raised)
	d.shortenDeadlines(d.floor.get()) // the drift's, run in between

	b := &batch{t0: t0, sessions: []*sessionBatch{{s: r.sess[0], leases: []*lease{l}}}}
	d.mu.Lock()
	d.applySessionLocked(b, b.sessions[0], &grantorpb.SessionRenewed{Session: r.sess[0].id, Renewed: true}, stale, r.clock.Now())
	got := l.deadline
	d.mu.Unlock()
	if want := d.floor.get().HolderDeadline(t0, l.ttl); got.After(want) {
		t.Fatalf("the renewal set a deadline %v later than the raised floor gives from its t0", got.Sub(want))
	}
}
