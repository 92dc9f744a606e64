package daemon

import (
	"strconv"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// Tests written from docs/design.md section 2, "Sessions and handoffs", on the
// holder's side, with the fake clock: leases of one term ride one grantor
// session, renewed as a whole every d/3; each lease's deadline counts from
// the t0 read before the keepalive; the daemon learns from the session's
// list what the grantor holds and it does not know, and the reverse.

func tokenOf(t *testing.T, g *ipc.Lease) uint64 {
	t.Helper()
	tok, err := strconv.ParseUint(g.Token, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Rule 4: a session is renewed at t0 + d/3 exactly, t0 the send of its
// last renewal or grant, and not earlier (the loop once sent half an
// interval early and scheduled from that send, renewing every d/6).
func TestRenewalDueExactlyEveryThirdOfTheTerm(t *testing.T) {
	clock := clockwatch.NewFake(start)
	d := newGrantDaemon(t, clock, "127.0.0.1:1", clockwatch.DefaultTiming())
	const d3 = ttl / 3
	l := newTestLease(d, "a", "conn:1", ttl)
	l.state = stateHeld
	l.token = 7
	t0 := clock.Now()
	l.t0, l.deadline = t0, d.timing().HolderDeadline(t0, ttl)
	l.scheduleRenewal(t0)
	d.mu.Lock()
	d.leases["a"] = l
	d.mu.Unlock()

	if due := d.dueSessions(t0.Add(d3-1), nil); len(due) != 0 {
		t.Fatalf("a session due 1ns before t0 + d/3: %v", due)
	}
	if next := d.nextWake(t0, nil); next != t0.Add(d3) {
		t.Fatalf("the loop wakes at %v, want t0 + d/3 = %v", next, t0.Add(d3))
	}
	due := d.dueSessions(t0.Add(d3), nil)
	if len(due) != 1 || len(due[0].leases) != 1 || due[0].digest != grantorpb.TokenDigest(7) {
		t.Fatalf("due at t0 + d/3: %+v, want a's session with its digest", due)
	}
	// The keepalive leaves late (a busy loop); the next one is due d/3
	// after that send, whatever the reply's delay.
	sent := t0.Add(d3 + 200*time.Millisecond)
	b := &batch{id: 1, t0: sent, sessions: due}
	clock.Advance(d3 + time.Second)
	d.applyRenewal(b, &grantorpb.KeepAliveResponse{Batch: 1, Sessions: []*grantorpb.SessionRenewed{
		{Session: l.sess.id, Renewed: true, TtlNs: int64(ttl), LeaseSetVersion: due[0].digest}}})
	if l.renewAt != sent.Add(d3) {
		t.Fatalf("next renewal at %v, want the send + d/3 = %v", l.renewAt, sent.Add(d3))
	}
	if want := d.timing().HolderDeadline(sent, ttl); l.deadline != want {
		t.Fatalf("deadline %v, want t0 of the keepalive + d(1-rho) - eps = %v", l.deadline, want)
	}
	if due := d.dueSessions(sent.Add(d3-1), nil); len(due) != 0 {
		t.Fatal("due again before d/3 after the last send")
	}
}

// One session per distinct term: leases of 6s and 9s ride two sessions,
// each renewed at its own d/3; a keepalive names sessions, not leases.
func TestOneSessionPerTerm(t *testing.T) {
	r := newRig(t)
	short := 6 * time.Second
	var long []uint64
	for _, n := range []string{"a", "b"} {
		g, err := r.c.Acquire(ctxT(t), n, ipc.AcquireOptions{TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		long = append(long, tokenOf(t, g))
	}
	s, err := r.c.Acquire(ctxT(t), "s", ipc.AcquireOptions{TTL: short})
	if err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(short / 3)
	ka := r.waitKeepAlive(t)
	if len(ka.Sessions) != 1 || ka.Sessions[0].TtlNs != int64(short) || ka.Sessions[0].LeaseSetVersion != grantorpb.TokenDigest(tokenOf(t, s)) {
		t.Fatalf("keepalive at d/3 of the short term: %v, want only the short session", ka.Sessions)
	}
	r.waitLeaseEvent(t, ipc.EventRenewed, "s")
	r.clock.Advance(ttl/3 - short/3)
	ka = r.waitKeepAlive(t)
	if len(ka.Sessions) != 1 || ka.Sessions[0].TtlNs != int64(ttl) || ka.Sessions[0].LeaseSetVersion != grantorpb.LeaseSetDigest(long) {
		t.Fatalf("keepalive at d/3 of the long term: %v, want only the long session", ka.Sessions)
	}
	if ka.Sessions[0].Session == "" || ka.Sessions[0].Session == r.d.g.sessionFor(short).id {
		t.Fatalf("both terms on one session: %v", ka.Sessions)
	}
}

// Rule 3 for a session: every lease of the session gets the deadline
// t0 + d(1-rho) - eps from the t0 read before the keepalive, however long
// the reply takes.
func TestSessionRenewalDeadlineFromKeepAliveT0(t *testing.T) {
	r := newRig(t)
	for _, n := range []string{"a", "b", "c"} {
		if _, err := r.c.Acquire(ctxT(t), n, ipc.AcquireOptions{TTL: ttl}); err != nil {
			t.Fatal(err)
		}
	}
	r.g.set(func() { r.g.delay = 700 * time.Millisecond })
	// t0 is read before the clock moves: once it has, the keepalive may
	// be sent and answered (the grantor moving the clock its 700ms) before
	// this goroutine reads the clock again.
	t0 := r.clock.Now().Add(ttl / 3)
	r.clock.Advance(ttl / 3)
	want := r.timing.HolderDeadline(t0, ttl)
	renewed := map[string]bool{}
	for len(renewed) < 3 {
		ev := r.waitEvent(t, ipc.EventRenewed)
		if clockwatch.Instant(ev.DeadlineBoottimeNs) != want {
			t.Fatalf("%s renewed to %v, want %v", ev.Lease, clockwatch.Instant(ev.DeadlineBoottimeNs), want)
		}
		renewed[ev.Lease] = true
	}
}

// The grantor lists a grant in this host's session that the daemon does
// not know: the daemon leaves it alone (issue 22 item 3). It cannot tell
// a grant nobody was told of from one whose owner may still act, and it
// need not: every grant of its sessions is one it was answered with, or
// one an acquire in flight or settling will be (ends.go). It sends no
// release and names nothing; the lease it holds is renewed.
func TestUnknownGrantInSessionIsLeftAlone(t *testing.T) {
	r := newRig(t)
	g, err := r.c.Acquire(ctxT(t), "a", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	r.g.set(func() {
		r.g.sessionReply = func(req *grantorpb.SessionRenewal, res *grantorpb.SessionRenewed) {
			res.Listed = true
			res.Leases = []*grantorpb.LeaseRef{
				{Lease: "a", Token: tokenOf(t, g), TtlNs: int64(ttl), Owner: "conn:1"},
				{Lease: "ghost", Token: 99, TtlNs: int64(ttl), Owner: "conn:77"},
			}
		}
	})
	for range 2 {
		r.clock.Advance(ttl / 3)
		if ev := r.waitLeaseEvent(t, ipc.EventRenewed, "a"); ev.Token != g.Token {
			t.Fatalf("a: %+v", ev)
		}
	}
	select {
	case rel := <-r.g.releases:
		t.Fatalf("release %v of a grant the daemon does not know", rel)
	default:
	}
	for {
		select {
		case ka := <-r.g.keepalives:
			checkNamesNothing(t, ka)
			continue
		default:
		}
		break
	}
}

// A grant the daemon holds and the grantor's list of the session lacks
// has ended at the grantor: it is lost at once, and the others renewed.
func TestGrantMissingFromSessionListIsLost(t *testing.T) {
	r := newRig(t)
	a, err := r.c.Acquire(ctxT(t), "a", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.Acquire(ctxT(t), "b", ipc.AcquireOptions{TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	r.g.set(func() {
		r.g.sessionReply = func(req *grantorpb.SessionRenewal, res *grantorpb.SessionRenewed) {
			res.Listed = true
			res.Leases = []*grantorpb.LeaseRef{{Lease: "a", Token: tokenOf(t, a), TtlNs: int64(ttl), Owner: "conn:1"}}
		}
	})
	r.clock.Advance(ttl / 3)
	if ev := r.waitLeaseEvent(t, ipc.EventLost, "b"); ev.Reason != ipc.ReasonRevoked {
		t.Fatalf("b: %+v, want lost (revoked)", ev)
	}
	r.waitLeaseEvent(t, ipc.EventRenewed, "a")
	if _, err := r.c.Check(ctxT(t), "b", ""); err == nil {
		t.Fatal("b still held")
	}
}

// A session the grantor did not renew (it expired there) ends every
// lease in it at once.
func TestSessionNotRenewedLosesItsLeases(t *testing.T) {
	r := newRig(t)
	for _, n := range []string{"a", "b"} {
		if _, err := r.c.Acquire(ctxT(t), n, ipc.AcquireOptions{TTL: ttl}); err != nil {
			t.Fatal(err)
		}
	}
	r.g.set(func() {
		r.g.sessionReply = func(req *grantorpb.SessionRenewal, res *grantorpb.SessionRenewed) { res.Renewed = false }
	})
	r.clock.Advance(ttl / 3)
	lost := map[string]bool{}
	for len(lost) < 2 {
		ev := r.waitEvent(t, ipc.EventLost)
		if ev.Reason != ipc.ReasonRevoked {
			t.Fatalf("%+v, want lost (revoked)", ev)
		}
		lost[ev.Lease] = true
	}
	if !lost["a"] || !lost["b"] {
		t.Fatalf("lost %v, want a and b", lost)
	}
}

// A grant of a name whose acquire is still in flight is not given back
// when the session's list shows it before the reply comes.
func TestGrantOfAnAcquireInFlightIsNotGivenBack(t *testing.T) {
	r := newRig(t)
	if _, err := r.c.Acquire(ctxT(t), "a", ipc.AcquireOptions{TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	stall := r.stallAcquires("slow")
	defer close(stall)
	go r.c.Acquire(ctxT(t), "slow", ipc.AcquireOptions{TTL: ttl, Wait: time.Minute})
	r.waitAcquireRPC(t) // a's
	r.waitAcquireRPC(t) // slow's, held at the grantor
	r.g.set(func() {
		r.g.sessionReply = func(req *grantorpb.SessionRenewal, res *grantorpb.SessionRenewed) {
			res.Listed = true
			res.Leases = []*grantorpb.LeaseRef{{Lease: "slow", Token: 50, TtlNs: int64(ttl), Owner: "conn:1"}}
		}
	})
	r.clock.Advance(ttl / 3)
	// The list lacks a: the reply was taken in, under the lock that also
	// queues the releases of the grants to give back.
	r.waitLeaseEvent(t, ipc.EventLost, "a")
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	for k, qs := range r.d.unreleased {
		for _, q := range qs {
			if k.name == "slow" || q.l.name == "slow" {
				t.Fatalf("the grant of an acquire in flight is being given back: %+v", q.l)
			}
		}
	}
}
