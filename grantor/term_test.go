package grantor

import (
	"testing"
	"time"
)

// Issue 9 item 6: an office serves only in the raft term it was opened in.
// The leadership watcher is starved here: raft loses leadership (term 2,
// in which another leader may renew the lease, unseen by this node) and
// wins it back (term 3) without the lessor hearing of either, as when
// LeaderCh drops values. The old office must not act in term 3 on its
// stale expiries; a new office opens and waits every lease out from its
// own tE.
func TestLessorOfficeEndsWithItsTerm(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = 10 * time.Second
	tG := h.clock.Now()
	a := h.acquire(acq("s1", 1, "a", ttl))
	exp := h.timing.GrantorExpiry(tG, ttl)

	// Time passes; the expiry loop looks at the clock and goes back to
	// sleep (its next wake-up is a second away on the fake clock, which
	// does not move again before the request below: had it woken after
	// the term changed, it would itself have opened the new office, and
	// the request would be served by it, correctly but untested).
	h.advanceTo(h.clock.Now().Add(8 * time.Second))
	// Term 2: another leader. Nothing tells the lessor.
	h.raft.leader.Store(false)
	h.raft.termN.Store(2)
	// Term 3: this node leads again. Still nothing tells the lessor.
	h.raft.termN.Store(3)
	h.raft.leader.Store(true)

	// The first request in term 3 finds the office stale: NotLeader (the
	// sidecar retries), and a new office opens because raft leads.
	if r, err := h.l.acquire(h.ctx(), acq("s2", 1, "b", ttl), 0); !isNotLeader(err) {
		t.Fatalf("acquire in term 3 served by the term-1 office: %+v %v, want NotLeader", r, err)
	}
	if err := h.l.waitReady(h.ctx()); err != nil {
		t.Fatal(err)
	}
	tE := h.clock.Now()
	o, err := h.l.await(h.ctx())
	if err != nil || o.term != 3 {
		t.Fatalf("office after the term change: %v (term %d), want one of term 3", err, o.term)
	}

	// The old expiry passes: the lease is still held, as the new office
	// waits it out from tE.
	h.advanceTo(exp)
	if got := h.held("a"); got != a.Token {
		t.Fatalf("a was freed at its term-1 expiry (held with %d), want held with %d until the new office's wait-out", got, a.Token)
	}
	waitOut := h.timing.GrantorExpiry(tE, ttl)
	h.advanceTo(waitOut - 1)
	if h.held("a") != a.Token {
		t.Fatal("a freed before tE + d(1+rho) + eps of the new office")
	}
	m := h.events.mark()
	h.advanceTo(waitOut)
	h.events.wait(t, m, "revoke of a after the wait-out", isExpiry)
}

// A verify round that returns in a later term than the office's (leadership
// lost and regained during the round, unreported) acknowledges nothing.
func TestLessorVerifyInLaterTermAcknowledgesNothing(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	h.acquire(acq("s1", 1, "a", time.Minute))
	o, err := h.l.await(h.ctx())
	if err != nil {
		t.Fatal(err)
	}
	h.raft.verify = func(int64) error {
		h.raft.termN.Store(3) // lost and regained while the round ran
		return nil
	}
	res, err := h.l.renew(h.ctx(), o, "s1", []leaseRef{{Lease: "a", Token: 1}})
	if !isNotLeader(err) {
		t.Fatalf("renewal verified in a later term: %+v %v, want NotLeader", res, err)
	}
	h.raft.verify = nil
	if err := h.l.waitReady(h.ctx()); err != nil {
		t.Fatal(err)
	}
	o3, err := h.l.await(h.ctx())
	if err != nil || o3.term != 3 {
		t.Fatalf("office after the round: %v, want one of term 3", err)
	}
	res, err = h.l.renew(h.ctx(), o3, "s1", []leaseRef{{Lease: "a", Token: 1}})
	if err != nil || len(res.renewed) != 1 {
		t.Fatalf("renewal in the new office: %+v %v", res, err)
	}
}
