package grantor

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var alice = Identity{Role: RoleOperator, Name: "alice"}

// The rule of an operator's revoke (revoke.go), on the fake clock: the
// holder renewed just before the revoke, so it may act until its deadline,
// t0 + d(1-rho) - eps, and have writes in flight for the lock-delay after
// it. The name goes to nobody before GrantorExpiry(revoke, term +
// lock-delay), and not a nanosecond before; then the first waiter gets it
// with the next token. The holder's next keepalive lists its session
// without the grant, which its sidecar reports as lost, reason revoked.
func TestOperatorRevokeDelaysNameForTermAndLockDelay(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl, delay = 3 * time.Second, 5 * time.Second
	g := h.acquire(delayedAcq("s", 1, "x", ttl, delay))
	ch := h.enqueueWaiter(h.ctx(), acq("w", 1, "x", time.Minute), time.Hour)
	h.advanceTo(h.clock.Now().Add(2 * time.Second))
	t0 := h.clock.Now() // the holder's t0: its renewal leaves now
	if r, _ := h.renewSession("s", ttl, g.Token); !r.Renewed || r.Listed {
		t.Fatalf("renewal before the revoke: %+v", r)
	}
	holderDeadline := h.timing.HolderDeadline(t0, ttl)

	revokedAt := h.clock.Now()
	tokens, d, err := h.l.operatorRevoke(h.ctx(), alice, "x", 0)
	if err != nil || !slices.Equal(tokens, []uint64{g.Token}) || d != ttl+delay {
		t.Fatalf("revoke: %v %v %v", tokens, d, err)
	}
	if _, held := h.fsm.lease("x"); held {
		t.Fatal("the grant stands after the revoke")
	}
	r, _ := h.renewSession("s", ttl, g.Token)
	if !r.Listed || slices.ContainsFunc(r.Grants, func(sg sessionGrant) bool { return sg.Lease == "x" }) {
		t.Fatalf("the holder's next keepalive: %+v, want its session listed without x", r)
	}
	if rr := h.acquire(acq("late", 1, "x", time.Minute)); rr.Granted || !rr.Delayed || rr.Token != g.Token {
		t.Fatalf("acquire after the revoke: %+v", rr)
	}

	end := h.delayEnd(revokedAt, ttl+delay)
	// What the rule asks: past the holder's deadline by the lock-delay.
	if want := holderDeadline.Add(delay); end.Before(want) {
		t.Fatalf("the name is free at %v, before the holder's deadline plus its lock-delay %v", end, want)
	}
	h.waitOutBefore(revokedAt, end)
	h.pending(ch)
	h.advanceTo(end)
	if o := h.outcome(ch); o.err != nil || !o.res.Granted || o.res.Token != g.Token+1 {
		t.Fatalf("waiter after the delay: %+v %v", o.res, o.err)
	}
}

// Bad revokes get specific errors, and a revoke names grants: the token
// given ends that grant of a semaphore and no other; without a token
// every grant of the name ends.
func TestOperatorRevokeErrorsAndSemaphores(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	ctx := h.ctx()
	code := func(err error) codes.Code { return status.Code(toStatus(err)) }

	_, _, err := h.l.operatorRevoke(ctx, alice, "nobody", 0)
	if !errors.Is(err, ErrNotHeld) || code(err) != codes.NotFound || !strings.Contains(err.Error(), `nothing holds "nobody"`) {
		t.Fatalf("unknown name: %v (%v)", err, code(err))
	}
	g := h.acquire(acq("s", 1, "x", time.Minute))
	_, _, err = h.l.operatorRevoke(ctx, alice, "x", g.Token+7)
	if !errors.Is(err, ErrWrongToken) || code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "its grants are [1]") {
		t.Fatalf("wrong token: %v (%v)", err, code(err))
	}
	if h.held("x") != g.Token {
		t.Fatal("a refused revoke ended the grant")
	}
	h.raft.allowCmd.Store(uint32(cmdWithdraw))
	if _, _, err = h.l.operatorRevoke(ctx, alice, "x", 0); !errors.Is(err, ErrRevokeNotSupported) || code(err) != codes.Unimplemented {
		t.Fatalf("older cluster: %v", err)
	}
	h.raft.allowCmd.Store(0)

	var sem []uint64
	for _, s := range []string{"s1", "s2", "s3"} {
		c := acq(s, 1, "sem", time.Minute)
		c.MaxHolders = 3
		sem = append(sem, h.acquire(c).Token)
	}
	if tokens, _, err := h.l.operatorRevoke(ctx, alice, "sem", sem[1]); err != nil || !slices.Equal(tokens, sem[1:2]) {
		t.Fatalf("revoke of one slot: %v %v", tokens, err)
	}
	if _, _, hs, _ := h.fsm.holders("sem"); len(hs) != 2 || hs[0].Token != sem[0] || hs[1].Token != sem[2] {
		t.Fatalf("holders after one slot's revoke: %+v", hs)
	}
	if tokens, _, err := h.l.operatorRevoke(ctx, alice, "sem", 0); err != nil || !slices.Equal(tokens, []uint64{sem[0], sem[2]}) {
		t.Fatalf("revoke of the name: %v %v", tokens, err)
	}
	if _, _, err = h.l.operatorRevoke(ctx, alice, "sem", 0); !errors.Is(err, ErrNotHeld) || !strings.Contains(err.Error(), "lock-delay") {
		t.Fatalf("revoke of a name in its delay: %v", err)
	}
}

// The FSM: cmdRevoke2 leaves the name delayed for the grant's term plus
// its lock-delay; cmdRevoke (an older cluster's expiry) for its lock-delay
// only, whatever its JSON says: a log replays as it applied when written.
func TestOperatorRevokeFSM(t *testing.T) {
	for _, tc := range []struct {
		t    cmdType
		want time.Duration
	}{
		{cmdRevoke2, time.Minute + time.Second},
		{cmdRevoke, time.Second},
	} {
		f := newFSM()
		g := f.Apply(rlog{1, encodeCmd(cmdAcquire7, delayedAcq("s", 1, "x", time.Minute, time.Second))}.log()).(*acquireResult)
		r := f.Apply(rlog{2, encodeCmd(tc.t, revokeCmd{Lease: "x", Token: g.Token, By: alice.String()})}.log()).(*revokeResult)
		if !r.Revoked {
			t.Fatalf("%v: not revoked", tc.t)
		}
		if d, ok := delayOf(f, "x"); !ok || d.Token != g.Token || d.Delay != tc.want {
			t.Fatalf("%v: delay %+v %v, want %v", tc.t, d, ok, tc.want)
		}
		// A revoke naming the ended grant changes nothing.
		if r := f.Apply(rlog{3, encodeCmd(tc.t, revokeCmd{Lease: "x", Token: g.Token, By: alice.String()})}.log()).(*revokeResult); r.Revoked {
			t.Fatalf("%v: a second revoke of the grant revoked", tc.t)
		}
	}
}

// The listing: names by prefix in order, a page at a time; each grant's
// holder, token and remaining term at the leader (which falls as the
// clock moves); a name's waiters and its lock-delays.
func TestListLeases(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	const ttl = 10 * time.Second
	a := h.acquire(acq("s1", 1, "app/a", ttl))
	h.acquire(acq("s2", 1, "app/b", ttl))
	h.acquire(acq("s3", 1, "other", ttl))
	d := h.acquire(delayedAcq("s3", 2, "app/c", ttl, 4*time.Second))
	if _, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "s3", Seq: 3}, Lease: "app/c", Owner: "o", Token: d.Token, OwnerEnded: true}); err != nil {
		t.Fatal(err)
	}
	h.enqueueWaiter(h.ctx(), acq("w", 1, "app/a", ttl), time.Hour)
	all := func(string) bool { return true }

	infos, more, err := h.l.listLeases(h.ctx(), "app/", "", 2, all)
	if err != nil || !more || len(infos) != 2 || infos[0].Lease != "app/a" || infos[1].Lease != "app/b" {
		t.Fatalf("first page: %v %v %v", infos, more, err)
	}
	want := h.timing.GrantorExpiry(h.clock.Now(), ttl).Sub(h.clock.Now())
	ha := infos[0].Holders
	if len(ha) != 1 || ha[0].Token != a.Token || time.Duration(ha[0].RemainingNs) != want || time.Duration(ha[0].TtlNs) != ttl || infos[0].Waiters != 1 || infos[0].Limit != 1 {
		t.Fatalf("app/a: %v, want remaining %v and 1 waiter", infos[0], want)
	}
	infos, more, err = h.l.listLeases(h.ctx(), "app/", "app/b", 2, all)
	if err != nil || more || len(infos) != 1 || infos[0].Lease != "app/c" || len(infos[0].Holders) != 0 || len(infos[0].Delays) != 1 || infos[0].Delays[0].Token != d.Token {
		t.Fatalf("second page: %v %v %v", infos, more, err)
	}
	if got, want := time.Duration(infos[0].Delays[0].RemainingNs), h.timing.GrantorExpiry(h.clock.Now(), 4*time.Second).Sub(h.clock.Now()); got != want {
		t.Fatalf("delay remaining %v, want %v", got, want)
	}
	h.advanceTo(h.clock.Now().Add(3 * time.Second))
	infos, _, _ = h.l.listLeases(h.ctx(), "app/a", "", 10, all)
	if got := time.Duration(infos[0].Holders[0].RemainingNs); got != want-3*time.Second {
		t.Fatalf("remaining 3s later: %v, want %v", got, want-3*time.Second)
	}
	infos, _, _ = h.l.listLeases(h.ctx(), "", "", 10, func(name string) bool { return name != "other" })
	if len(infos) != 3 {
		t.Fatalf("names the caller may read: %v", infos)
	}
}

// What a Leases call holds the FSM's read lock for (Apply waits behind
// it): the names of a table of 100,000 leases, one page's prefix.
func BenchmarkNamesWith(b *testing.B) {
	f := newFSM()
	for i := range 100000 {
		f.st.Leases["jobs/"+strconv.Itoa(i)] = leaseRecord{Session: "s", Token: uint64(i + 1)}
	}
	b.ReportAllocs()
	for b.Loop() {
		if len(f.namesWith("jobs/9999", "")) != 11 {
			b.Fatal("wrong names")
		}
	}
}
