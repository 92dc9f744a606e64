package grantor

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// Tests written from docs/design.md section 2, "Sessions and handoffs", with
// the fake clock: a keepalive renews a session as a whole, the grantor
// keeps one expiry per session computed by the same rules as a lease's,
// and a handoff is one raft entry.

// renewSession renews one session as a new sidecar does: by name, term
// and the digest of the grants it knows.
func (h *harness) renewSession(session string, ttl time.Duration, tokens ...uint64) (sessionRenewed, clockwatch.Instant) {
	h.t.Helper()
	o, err := h.l.await(h.ctx())
	if err != nil {
		h.t.Fatal(err)
	}
	res, tG, err := h.l.renewSessions(h.ctx(), o, "", []sessionRenewal{{Session: session, TTL: ttl, Digest: grantorpb.LeaseSetDigest(tokens)}}, nil)
	if err != nil {
		h.t.Fatalf("renewing %s: %v", session, err)
	}
	return res[0], tG
}

// isExpiry matches the entry that frees an expired session's leases (of
// either type: cmdExpireSession2 where every server applies it).
func isExpiry(e testEvent) bool {
	return e.what == "applied expire-session" || e.what == "applied expire-session2"
}

// expiries counts the entries that freed expired sessions' leases.
func (h *harness) expiries() int {
	return h.events.count("applied expire-session") + h.events.count("applied expire-session2")
}

// Rule 2 for sessions: a session keepalive acknowledged at tG (read after
// its verify round) keeps every lease of the session until
// tG + d(1+rho) + eps, and at that instant all of them end, in one entry.
func TestSessionExpiresWholeAtTGPlusTerm(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = 10 * time.Second
	var tokens []uint64
	for i, name := range []string{"a", "b", "c"} {
		tokens = append(tokens, h.acquire(acq("s1", uint64(i+1), name, ttl)).Token)
	}
	h.advanceTo(h.clock.Now().Add(6 * time.Second))
	r, tG := h.renewSession("s1", ttl, tokens...)
	if !r.Renewed || r.TTL != ttl || r.Listed {
		t.Fatalf("renewal: %+v, want renewed with the term %v and no list (digests agree)", r, ttl)
	}
	if tG != h.clock.Now() {
		t.Fatalf("tG %v, want the clock after the round %v", tG, h.clock.Now())
	}
	exp := h.timing.GrantorExpiry(tG, ttl)
	h.advanceTo(exp - 1)
	for _, name := range []string{"a", "b", "c"} {
		if h.held(name) == 0 {
			t.Fatalf("%s freed before the session's expiry", name)
		}
	}
	m := h.events.mark()
	h.advanceTo(exp)
	h.events.wait(t, m, "the session's expiry entry", isExpiry)
	for _, name := range []string{"a", "b", "c"} {
		if h.held(name) != 0 {
			t.Fatalf("%s still held after its session expired", name)
		}
	}
	if n := h.expiries(); n != 1 {
		t.Fatalf("%d expiry entries for one session, want 1", n)
	}
	if n := h.events.count("applied revoke"); n != 0 {
		t.Fatalf("%d per-lease revokes, want none", n)
	}
}

// Rule: a grant into a session moves the session's expiry to at least the
// grant's own tG + d(1+rho) + eps; the older grant lives as long.
func TestSessionGrantExtendsSessionExpiry(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = 10 * time.Second
	h.acquire(acq("s1", 1, "a", ttl))
	first := h.timing.GrantorExpiry(h.clock.Now(), ttl)
	h.advanceTo(h.clock.Now().Add(8 * time.Second))
	tG := h.clock.Now()
	h.acquire(acq("s1", 2, "b", ttl))
	h.advanceTo(first)
	if h.held("a") == 0 || h.held("b") == 0 {
		t.Fatal("a lease of the session freed at the first grant's expiry, though the session was extended")
	}
	exp := h.timing.GrantorExpiry(tG, ttl)
	h.advanceTo(exp - 1)
	if h.held("a") == 0 {
		t.Fatal("a freed before the session's expiry")
	}
	m := h.events.mark()
	h.advanceTo(exp)
	h.events.wait(t, m, "expiry", isExpiry)
	if h.held("a") != 0 || h.held("b") != 0 {
		t.Fatal("leases outlived their session")
	}
}

// Rule: a session's renewal is acknowledged only after a verify round that
// started after it arrived, and a failed round acknowledges nothing: the
// session keeps its old expiry.
func TestSessionRenewalNeedsAFreshVerify(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = 10 * time.Second
	a := h.acquire(acq("s1", 1, "a", ttl))
	exp := h.timing.GrantorExpiry(h.clock.Now(), ttl)
	o, _ := h.l.await(h.ctx())
	started := make(chan int64)
	gate := make(chan error)
	h.raft.verify = func(n int64) error {
		started <- n
		return <-gate
	}
	type out struct {
		res []sessionRenewed
		err error
	}
	renew := func() <-chan out {
		ch := make(chan out, 1)
		go func() {
			r, _, err := h.l.renewSessions(h.ctx(), o, "", []sessionRenewal{{Session: "s1", TTL: ttl, Digest: grantorpb.LeaseSetDigest([]uint64{a.Token})}}, nil)
			ch <- out{r, err}
		}()
		return ch
	}
	m := h.events.mark()
	first := renew()
	m = h.events.wait(t, m, "pending", func(e testEvent) bool { return e.what == "pending" })
	<-started
	second := renew() // arrives while round 1 runs
	h.events.wait(t, m, "pending", func(e testEvent) bool { return e.what == "pending" })
	gate <- nil
	if r := <-first; r.err != nil || !r.res[0].Renewed {
		t.Fatalf("first: %+v %v", r.res, r.err)
	}
	select {
	case r := <-second:
		t.Fatalf("a renewal that arrived during round 1 was answered by it: %+v %v", r.res, r.err)
	default:
	}
	<-started
	gate <- h.raft.notLeader()
	if r := <-second; !isNotLeader(r.err) {
		t.Fatalf("second, after a failed round: %+v %v, want NotLeader", r.res, r.err)
	}
	h.raft.verify = nil
	// Only the first renewal counts: its tG was the start clock.
	m = h.events.mark()
	h.advanceTo(exp)
	h.events.wait(t, m, "expiry at the first renewal's expiry", isExpiry)
}

// Rule: a new leader waits out every session: each lease of the FSM is
// live until tE + d(1+rho) + eps, whatever its session's renewals were.
func TestSessionNewLeaderWaitsOutEverySession(t *testing.T) {
	h := newHarness(t)
	h.raft.leader.Store(true)
	for i, c := range []acquireCmd{acq("s1", 1, "a", 10*time.Second), acq("s2", 1, "b", 20*time.Second), acq("s1", 2, "c", 10*time.Second)} {
		if r, _ := h.raft.apply(acquireEntry(c, newestCmd)); !r.(*acquireResult).Granted {
			t.Fatalf("setup grant %d failed", i)
		}
	}
	h.clock.Advance(time.Minute)
	h.takeOffice()
	tE := h.clock.Now()
	exp1, exp2 := h.timing.GrantorExpiry(tE, 10*time.Second), h.timing.GrantorExpiry(tE, 20*time.Second)
	h.advanceTo(exp1 - 1)
	if h.held("a") == 0 || h.held("c") == 0 {
		t.Fatal("s1's leases freed before tE + d(1+rho) + eps")
	}
	m := h.events.mark()
	h.advanceTo(exp1)
	h.events.wait(t, m, "s1's expiry", isExpiry)
	if h.held("a") != 0 || h.held("c") != 0 || h.held("b") == 0 {
		t.Fatalf("after s1's wait-out: a %d c %d b %d", h.held("a"), h.held("c"), h.held("b"))
	}
	h.advanceTo(exp2 - 1)
	if h.held("b") == 0 {
		t.Fatal("s2's lease freed before its own wait-out")
	}
	m = h.events.mark()
	h.advanceTo(exp2)
	h.events.wait(t, m, "s2's expiry", isExpiry)
}

// A session whose expiry has passed is not renewed: the holder's deadline
// passed before it, and the leader has decided.
func TestSessionPastExpiryIsNotRenewed(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = 5 * time.Second
	a := h.acquire(acq("s1", 1, "a", ttl))
	h.clock.Suspend(time.Minute) // no timer fires; the clock decides
	r, _ := h.renewSession("s1", ttl, a.Token)
	// Either the expiry was decided first (not renewed), or its entry
	// applied first (renewed trivially, the empty list tells the holder).
	if r.Renewed && (!r.Listed || len(r.Grants) != 0) {
		t.Fatalf("renewal after the session's expiry: %+v, want not renewed or an empty list", r)
	}
}

// Issue 13 item 1: a keepalive costs the same for 1 lease or 10,000: when
// the sidecar's digest agrees, nothing per lease is done or sent.
func TestSessionKeepAliveCostsTheSameForAnySize(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = time.Minute
	var small, big []uint64
	small = append(small, h.acquire(acq("small", 1, "one", ttl)).Token)
	for i := range 10_000 {
		c := acq("big", uint64(i+1), "many/"+itoa(i), ttl)
		c.ID.FirstUnacked = c.ID.Seq
		big = append(big, h.acquire(c).Token)
	}
	o, _ := h.l.await(h.ctx())
	tG := h.clock.Now()
	allocs := func(session string, tokens []uint64) float64 {
		req := sessionRenewal{Session: session, TTL: ttl, Digest: grantorpb.LeaseSetDigest(tokens)}
		return testing.AllocsPerRun(100, func() {
			h.l.mu.Lock()
			r := h.l.renewSessionLocked(o, req, "", tG)
			h.l.mu.Unlock()
			if !r.Renewed || r.Listed {
				t.Fatalf("%s: %+v", session, r)
			}
		})
	}
	if a1, a2 := allocs("small", small), allocs("big", big); a2 > a1 {
		t.Fatalf("renewing a session of 10,000 leases allocates %v times, of 1 lease %v", a2, a1)
	}
}

// The sidecar learns what its session holds when its digest differs: the
// reply lists every grant (name, token, term, owner) of the session.
func TestSessionDigestMismatchListsTheSession(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = 10 * time.Second
	a := h.acquire(acq("s1", 1, "a", ttl))
	b := h.acquire(acq("s1", 2, "b", ttl)) // its reply "never came"
	r, _ := h.renewSession("s1", ttl, a.Token)
	if !r.Renewed || !r.Listed || len(r.Grants) != 2 || r.Digest != grantorpb.LeaseSetDigest([]uint64{a.Token, b.Token}) {
		t.Fatalf("renewal with a stale digest: %+v, want the two grants listed", r)
	}
	got := map[string]sessionGrant{}
	for _, g := range r.Grants {
		got[g.Lease] = g
	}
	if g := got["b"]; g.Token != b.Token || g.TTL != ttl || g.Owner != "o" {
		t.Fatalf("listed b: %+v", g)
	}
	// An empty session the sidecar believes holds a grant: listed empty.
	r, _ = h.renewSession("s9", ttl, 12345)
	if !r.Listed || len(r.Grants) != 0 || r.Digest != 0 {
		t.Fatalf("renewal of an empty session with a digest: %+v", r)
	}
}

// Issue 13 item 2: a release that frees a lease with waiters grants it to
// the first waiter in the same raft entry, with the next token, FIFO.
func TestReleaseHandsOffInOneEntry(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = time.Minute
	held := h.acquire(acq("s0", 1, "a", ttl))
	w1 := h.enqueueWaiter(h.ctx(), acq("s1", 1, "a", ttl), time.Hour)
	w2 := h.enqueueWaiter(h.ctx(), acq("s2", 1, "a", ttl), time.Hour)
	before := h.raft.entries()
	if r, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "s0", Seq: 2}, Lease: "a", Owner: "o", Token: held.Token}); err != nil || !r.Released {
		t.Fatalf("release: %+v %v", r, err)
	}
	o1 := h.outcome(w1)
	if o1.err != nil || !o1.res.Granted || o1.res.Token != held.Token+1 {
		t.Fatalf("first waiter: %+v %v", o1.res, o1.err)
	}
	if n := h.raft.entries() - before; n != 1 {
		t.Fatalf("%d raft entries for a release and its handoff, want 1", n)
	}
	h.pending(w2)
	// The retry of the handed-off acquire (its reply lost) gets the same grant.
	if r := h.acquire(acq("s1", 1, "a", ttl)); !r.Granted || r.Token != o1.res.Token {
		t.Fatalf("retry of the handed-off acquire: %+v, want token %d", r, o1.res.Token)
	}
	before = h.raft.entries()
	if r, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "s1", Seq: 2}, Lease: "a", Owner: "o", Token: o1.res.Token}); err != nil || !r.Released {
		t.Fatalf("second release: %+v %v", r, err)
	}
	if o2 := h.outcome(w2); o2.err != nil || !o2.res.Granted || o2.res.Token != held.Token+2 {
		t.Fatalf("second waiter: %+v %v", o2.res, o2.err)
	}
	if n := h.raft.entries() - before; n != 1 {
		t.Fatalf("%d raft entries for the second handoff, want 1", n)
	}
}

// Issue 13 item 2: when a session expires, its leases go to their first
// waiters in the same entry that frees them.
func TestExpiryHandsOffInOneEntry(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = 10 * time.Second
	a := h.acquire(acq("s0", 1, "a", ttl))
	h.acquire(acq("s0", 2, "b", ttl))
	exp := h.timing.GrantorExpiry(h.clock.Now(), ttl)
	wa := h.enqueueWaiter(h.ctx(), acq("s1", 1, "a", ttl), time.Hour)
	wb := h.enqueueWaiter(h.ctx(), acq("s2", 1, "b", ttl), time.Hour)
	before := h.raft.entries()
	h.advanceTo(exp)
	oa, ob := h.outcome(wa), h.outcome(wb)
	if oa.err != nil || !oa.res.Granted || ob.err != nil || !ob.res.Granted {
		t.Fatalf("waiters after the expiry: %+v %v, %+v %v", oa.res, oa.err, ob.res, ob.err)
	}
	if oa.res.Token <= a.Token || ob.res.Token <= a.Token || oa.res.Token == ob.res.Token {
		t.Fatalf("handoff tokens %d and %d after %d", oa.res.Token, ob.res.Token, a.Token)
	}
	if n := h.raft.entries() - before; n != 1 {
		t.Fatalf("%d raft entries for an expiry with two handoffs, want 1", n)
	}
}

// The race of a handoff with a waiter that leaves: a waiter claimed by a
// release in flight whose wait runs out meanwhile still gets the grant;
// one that left before the release was proposed is not granted anything.
func TestHandoffAndLeavingWaiter(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = time.Minute
	held := h.acquire(acq("s0", 1, "a", ttl))
	w := h.enqueueWaiter(h.ctx(), acq("s1", 1, "a", ttl), 5*time.Second)
	inFSM := make(chan struct{})
	proceed := make(chan struct{})
	// The release is in the log ahead of anything proposed after it (inLog
	// holds every later entry), as raft orders them: the waiter's own
	// entry when its wait runs out comes after it and finds it granted.
	h.raft.inLog = func() { close(inFSM); <-proceed }
	released := make(chan error, 1)
	go func() {
		_, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "s0", Seq: 2}, Lease: "a", Owner: "o", Token: held.Token})
		released <- err
	}()
	<-inFSM // the release with the attached waiter is in flight
	h.raft.inLog = nil
	h.clock.Advance(5 * time.Second) // the waiter's wait runs out now
	close(proceed)
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if o := h.outcome(w); o.err != nil || !o.res.Granted || h.held("a") != o.res.Token {
		t.Fatalf("claimed waiter whose wait ran out: %+v %v, want the grant it was given (a held with %d)", o.res, o.err, h.held("a"))
	}

	// A waiter that left is not attached: nothing is granted to it.
	b := h.acquire(acq("s0", 3, "b", ttl))
	ctx, cancel := context.WithCancel(h.ctx())
	w2 := h.enqueueWaiter(ctx, acq("s2", 1, "b", ttl), time.Hour)
	cancel()
	if o := h.outcome(w2); o.err != context.Canceled {
		t.Fatalf("canceled waiter: %+v %v", o.res, o.err)
	}
	if r, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "s0", Seq: 4}, Lease: "b", Owner: "o", Token: b.Token}); err != nil || !r.Released {
		t.Fatalf("release of b: %+v %v", r, err)
	}
	if got := h.held("b"); got != 0 {
		t.Fatalf("b was granted (token %d) to a waiter that had left", got)
	}
}

// Mixed versions: until every server applies cmdRelease4 and
// cmdExpireSession, a release frees only and the waiter proposes its own
// Acquire, and an expiry is one revoke per lease, as older grantors do.
func TestHandoffsNeedEveryServer(t *testing.T) {
	h := newHarness(t)
	h.raft.allowCmd.Store(uint32(cmdRelease3))
	h.takeOffice()
	const ttl = 10 * time.Second
	held := h.acquire(acq("s0", 1, "a", ttl))
	h.acquire(acq("s0", 2, "b", ttl))
	exp := h.timing.GrantorExpiry(h.clock.Now(), ttl)
	w := h.enqueueWaiter(h.ctx(), acq("s1", 1, "a", ttl), time.Hour)
	before := h.raft.entries()
	if r, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "s0", Seq: 3}, Lease: "a", Owner: "o", Token: held.Token}); err != nil || !r.Released {
		t.Fatalf("release: %+v %v", r, err)
	}
	if o := h.outcome(w); o.err != nil || !o.res.Granted {
		t.Fatalf("waiter: %+v %v", o.res, o.err)
	}
	if n := h.raft.entries() - before; n != 2 {
		t.Fatalf("%d entries for a release and the waiter's acquire with an older server, want 2", n)
	}
	m := h.events.mark()
	h.advanceTo(exp)
	h.events.wait(t, m, "per-lease revoke", func(e testEvent) bool { return e.what == "applied revoke" })
	if h.expiries() != 0 {
		t.Fatal("an expire-session entry with an older server in the cluster")
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{digits[i%10]}, b...)
	}
	return string(b)
}

// The expiry entry frees only the grants it lists, only while the session
// holds them with those tokens, and only in the term of the office that
// decided; the waiters' Acquires it carries are applied once their lease
// is free.
func TestFSMExpireSessionFreesOnlyListedGrantsInItsTerm(t *testing.T) {
	f := newTestFSM()
	a := f.apply(cmdAcquire4, acq4("h", "s1", 1, "a", 0)).(*acquireResult)
	b := f.apply(cmdAcquire4, acq4("h", "s1", 2, "b", 0)).(*acquireResult)
	expire := func(term uint64, c expireSessionCmd) *expireResult {
		t.Helper()
		f.index++
		return f.Apply(&raft.Log{Index: f.index, Term: term, Type: raft.LogCommand, Data: encodeCmd(cmdExpireSession, c)}).(*expireResult)
	}
	listed := []grantRef{{Lease: "a", Token: a.Token}, {Lease: "b", Token: b.Token}}
	if r := expire(2, expireSessionCmd{Session: "s1", Term: 1, Leases: listed}); !r.StaleTerm || r.Freed != 0 {
		t.Fatalf("an expiry decided in term 1, appended in term 2: %+v", r)
	}
	// The holder re-acquired a after the decision: the new grant stays.
	a2 := f.apply(cmdAcquire4, acq4("h", "s1", 3, "a", 0)).(*acquireResult)
	next := acq4("h2", "s2", 1, "b", 0)
	r := expire(1, expireSessionCmd{Session: "s1", Term: 1, Leases: listed, Next: []acquireCmd{next}})
	if r.StaleTerm || r.Freed != 1 || len(r.Next) != 1 || !r.Next[0].Tried {
		t.Fatalf("expiry: %+v, want b freed and handed off", r)
	}
	if g, ok := r.Next[0].Res.(*acquireResult); !ok || !g.Granted || g.Token != a2.Token+1 {
		t.Fatalf("handoff of b: %+v", r.Next[0].Res)
	}
	if rec, _ := f.lease("a"); rec.Token != a2.Token {
		t.Fatalf("a after the expiry: %+v, want the later grant %d kept", rec, a2.Token)
	}
	if rec, _ := f.lease("b"); rec.Session != "s2" {
		t.Fatalf("b after the expiry: %+v, want s2's", rec)
	}
}
