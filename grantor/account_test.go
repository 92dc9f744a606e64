package grantor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// The replicated state's part of an identity's account follows the state:
// a session, its outcomes, its grants and their value bytes are charged
// when an entry makes them and given back when one ends them (release,
// also_received, close, adoption moves them), and a restore from a
// snapshot rebuilds the same counts: every replica holds the same ones,
// whatever snapshot it started from.
func TestFSMUsageFollowsTheState(t *testing.T) {
	f := newTestFSM()
	want := func(f *testFSM, owner string, u fsmUsage) {
		t.Helper()
		if got := f.usage(owner); got != u {
			t.Fatalf("%s: %+v, want %+v", owner, got, u)
		}
	}
	c := acq4("host-a", "s1", 1, "x", 0)
	c.Value, c.MaxHolders = "vvvv", 2
	if r := f.apply(cmdAcquire6, c).(*acquireResult); !r.Granted {
		t.Fatal(r)
	}
	r2 := f.apply(cmdAcquire6, acq4("host-a", "s1", 2, "y", 0)).(*acquireResult)
	f.apply(cmdAcquire6, acq4("host-a", "s2", 1, "z", 0))
	want(f, "host-a", fsmUsage{Sessions: 2, Outcomes: 3, Leases: 3, ValueBytes: 4})
	if !f.release(t, "s1", 3, "y", "o", r2.Token) {
		t.Fatal("release")
	}
	want(f, "host-a", fsmUsage{Sessions: 2, Outcomes: 4, Leases: 2, ValueBytes: 4})
	p := proclaimCmd{ID: requestID{Session: "s1", Seq: 4, FirstUnacked: 3}, Lease: "x", Owner: "o", Token: 1, Value: "vv", Identity: "host-a"}
	f.apply(cmdProclaim, p)
	// The floor 3 forgot seqs 1 and 2; the proclaim left one.
	want(f, "host-a", fsmUsage{Sessions: 2, Outcomes: 3, Leases: 2, ValueBytes: 2})

	g := newTestFSM()
	if err := g.Restore(io.NopCloser(bytes.NewReader(persist(t, f.fsm)))); err != nil {
		t.Fatal(err)
	}
	g.index = f.index
	want(g, "host-a", f.usage("host-a"))

	// An unowned session (an older entry) is adopted with its charges.
	f.apply(cmdAcquire3, acquireCmd{ID: requestID{Session: "old", Seq: 1}, Lease: "w", Owner: "o", TTL: 10 * time.Second})
	want(f, "", fsmUsage{Sessions: 1, Outcomes: 1, Leases: 1})
	f.apply(cmdAcquire6, acq4("host-b", "old", 2, "v", 0))
	want(f, "", fsmUsage{})
	want(f, "host-b", fsmUsage{Sessions: 1, Outcomes: 2, Leases: 2})

	// Closing a session gives back it and its outcomes.
	f.apply(cmdRelease3, releaseCmd{ID: requestID{Session: "s2", Seq: 2}, Lease: "z", Owner: "o", Token: 3, Identity: "host-a"})
	f.apply(cmdCloseSession, closeSessionCmd{Session: "s2"})
	want(f, "host-a", fsmUsage{Sessions: 1, Outcomes: 2, Leases: 1, ValueBytes: 2})
	if n := len(f.usages()); n != 2 {
		t.Fatalf("%d identities in the usage, want host-a and host-b: %v", n, f.usages())
	}
}

// A name left in its lock-delay counts as a lease of the identity whose
// grant left it until the delay ends (else an identity could keep names
// delayed without bound: acquire, release with owner_ended, again): the
// leader refuses a new lease at the limit; the count survives a restore.
func TestFSMLockDelayCountsAsALease(t *testing.T) {
	f := newTestFSM()
	c := acq4("host-a", "s1", 1, "x", 1)
	c.LockDelay = time.Minute
	r := f.apply(cmdAcquire7, c).(*acquireResult)
	if !r.Granted {
		t.Fatal(r)
	}
	f.apply(cmdRelease6, releaseCmd{ID: requestID{Session: "s1", Seq: 2}, Lease: "x", Owner: "o", Token: r.Token, Identity: "host-a", OwnerEnded: true})
	if u := f.usage("host-a"); u.Leases != 1 {
		t.Fatalf("after a release into a lock-delay: %+v, want the delay counted as a lease", u)
	}
	a := newAccounts(AccountLimits{Sidecar: Limits{Leases: 1}}, f.fsm, nil)
	host := Identity{Role: RoleSidecar, Name: "host-a"}
	if err := a.checkRequest(host, requestID{Session: "s1", Seq: 3}, 0, true); !errors.Is(err, ErrOverLimit) || !strings.Contains(err.Error(), "limit of leases (1 of 1)") {
		t.Fatalf("a second lease at limit 1 during the delay: %v, want over the limit", err)
	}
	g := newTestFSM()
	if err := g.Restore(io.NopCloser(bytes.NewReader(persist(t, f.fsm)))); err != nil {
		t.Fatal(err)
	}
	if u := g.usage("host-a"); u.Leases != 1 {
		t.Fatalf("after a restore: %+v", u)
	}
	f.apply(cmdEndDelay, endDelayCmd{Lease: "x", Token: r.Token})
	if u := f.usage("host-a"); u.Leases != 0 {
		t.Fatalf("after the delay ended: %+v", u)
	}
	if err := a.checkRequest(host, requestID{Session: "s1", Seq: 3}, 0, true); err != nil {
		t.Fatalf("a lease after the delay ended: %v", err)
	}
}

// Issue 21's flood (b) at the account: Releases of names an identity does
// not hold, each under a session of its own, leave a session and an
// outcome each in every replica. At its account's sessions limit the next
// one is refused with RESOURCE_EXHAUSTED naming it and writes no entry;
// another identity goes on; and once the sessions end, the identity may
// open new ones. Outcomes likewise, within one session.
func TestAccountBoundsSessionsAndOutcomes(t *testing.T) {
	cfg := fastConfig(t, t.TempDir())
	lim := DefaultLimits()
	lim.Sessions, lim.Outcomes = 4, 6
	cfg.Limits.Identities = map[string]Limits{"sidecar/evil": lim}
	n := start(t, cfg, true)
	addr := testIdentityServer(t, n.Node)
	evil, ctxE := as(t, addr, Identity{Role: RoleSidecar, Name: "evil"})
	good, ctxG := as(t, addr, Identity{Role: RoleSidecar, Name: "good"})

	open := func(session string) error {
		// A grant opens the session; its release leaves it holding
		// nothing, with two outcomes.
		a, err := evil.Acquire(ctxE(tctx(t)), acqReq(session, 1, "free-"+session))
		if err != nil {
			return err
		}
		_, err = evil.Release(ctxE(tctx(t)), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: session, Seq: 2}, Lease: "free-" + session, Owner: "o", Token: a.Token})
		return err
	}
	for i := range 3 {
		if err := open(fmt.Sprint("e", i)); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
	}
	// 3 sessions, 6 outcomes: the next outcome is over.
	_, err := evil.Release(ctxE(tctx(t)), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: "e0", Seq: 3}, Lease: "unheld", Owner: "o", Token: 1})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "sidecar/evil is at its limit of outcomes (6 of 6)") {
		t.Fatalf("7th outcome: %v, want RESOURCE_EXHAUSTED naming outcomes", err)
	}
	applied := n.raft.AppliedIndex()
	_, err = evil.Acquire(ctxE(tctx(t)), acqReq("e9", 1, "free-e9"))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "outcomes") {
		t.Fatalf("a new session at the outcomes limit: %v", err)
	}
	if n.raft.AppliedIndex() != applied || n.fsm.hasSession("e9") {
		t.Fatal("the refused call wrote an entry")
	}
	// A retry of a remembered outcome is answered, not charged.
	if r, err := evil.Release(ctxE(tctx(t)), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: "e0", Seq: 2}, Lease: "free-e0", Owner: "o", Token: 1}); err != nil {
		t.Fatalf("a retry at the limit: %v %v", r, err)
	}
	if r, err := good.Acquire(ctxG(tctx(t)), acqReq("g1", 1, "good")); err != nil || !r.Granted {
		t.Fatalf("another identity: %v %v", r, err)
	}
	// A request that acknowledges what it got (first_unacked) frees
	// outcomes at the limit; then sessions count.
	for _, s := range []string{"e0", "e1", "e2"} {
		if _, err := evil.Release(ctxE(tctx(t)), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: s, Seq: 3, FirstUnacked: 3}, Lease: "unheld", Owner: "o", Token: 1}); err != nil {
			t.Fatalf("an acknowledging release of %s at the outcomes limit: %v", s, err)
		}
	}
	if err := open("e3"); err != nil {
		t.Fatalf("4th session: %v", err)
	}
	if err := open("e4"); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "limit of sessions (4 of 4)") {
		t.Fatalf("5th session: %v, want RESOURCE_EXHAUSTED naming sessions", err)
	}
}

// The leader-side and edge charges are given back with their things: a
// waiter that leaves its queue, and the audit limiter's bucket refills
// at its rate.
func TestAccountChargesAndRefunds(t *testing.T) {
	clock := clockwatch.NewFake(clockwatch.Instant(time.Hour))
	lim := Limits{Waiters: 2, AuditLines: 2}
	a := newAccounts(AccountLimits{Sidecar: lim}, newFSM(), clock)
	id := Identity{Role: RoleSidecar, Name: "h"}
	w1, err := a.charge(id, limWaiters, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.charge(id, limWaiters, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.charge(id, limWaiters, 1); err == nil || !strings.Contains(err.Error(), "sidecar/h is at its limit of waiters (2 of 2)") {
		t.Fatalf("third waiter: %v", err)
	}
	if _, err := a.charge(Identity{Role: RoleOperator, Name: "h"}, limWaiters, 5); err != nil {
		t.Fatalf("an operator named like the sidecar has its own account: %v", err)
	}
	a.refund(w1, limWaiters, 1)
	if _, err := a.charge(id, limWaiters, 1); err != nil {
		t.Fatalf("after one left: %v", err)
	}
	lines := func(n int) (written, suppressed int) {
		for range n {
			s, ok := a.auditLine(id)
			if ok {
				written++
			}
			suppressed += s
		}
		return
	}
	if w, _ := lines(5); w != 2 {
		t.Fatalf("%d of 5 lines at once written, want 2", w)
	}
	clock.Advance(500 * time.Millisecond)
	if w, s := lines(1); w != 1 || s != 3 {
		t.Fatalf("half a second later: %d written saying %d suppressed, want 1 saying 3", w, s)
	}
	if (AccountLimits{}).For(InsecureIdentity) != (Limits{}) || DefaultAccountLimits().For(InsecureIdentity) != (Limits{}) {
		t.Fatal("the insecure identity has limits by default")
	}
}

// Release and Proclaim calls take a token of their identity's bucket of
// unchanged_calls_per_sec (as many at once) before they are read; one
// that changed something gives it back. Once the bucket is empty the
// next is refused (at the edge) naming the limit, until the bucket
// refills at its rate. Another identity, and a limit of 0, are never
// refused.
func TestUnchangedCallsAreRateLimited(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rate      int
		unchanged int           // calls that changed nothing, at once
		changed   int           // then calls that changed something
		advance   time.Duration // then the clock moves
		refused   bool          // whether the next call is refused
	}{
		{name: "within the bucket", rate: 4, unchanged: 3, refused: false},
		{name: "the bucket emptied", rate: 4, unchanged: 4, refused: true},
		{name: "calls that change something spend nothing", rate: 4, unchanged: 3, changed: 100, refused: false},
		{name: "a quarter second refills one", rate: 4, unchanged: 4, advance: 250 * time.Millisecond, refused: false},
		{name: "less than a token refilled", rate: 4, unchanged: 4, advance: 200 * time.Millisecond, refused: true},
		{name: "no limit", rate: 0, unchanged: 1000, refused: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := clockwatch.NewFake(clockwatch.Instant(time.Hour))
			a := newAccounts(AccountLimits{Sidecar: Limits{UnchangedCalls: tc.rate}}, newFSM(), clock)
			id, other := Identity{Role: RoleSidecar, Name: "evil"}, Identity{Role: RoleSidecar, Name: "victim"}
			for i := range tc.unchanged {
				if err := a.takeUnchanged(id); err != nil {
					t.Fatalf("unchanged call %d of %d: %v", i+1, tc.unchanged, err)
				}
			}
			for range tc.changed {
				if err := a.takeUnchanged(id); err != nil {
					t.Fatalf("a call that changes something: %v", err)
				}
				a.changedAfterAll(id)
			}
			clock.Advance(tc.advance)
			err := a.takeUnchanged(id)
			if got := err != nil; got != tc.refused {
				t.Fatalf("refused %v (%v), want %v", got, err, tc.refused)
			}
			if err != nil && !strings.Contains(err.Error(), "sidecar/evil is at its limit of unchanged_calls_per_sec (4 of 4)") {
				t.Fatalf("refusal: %v", err)
			}
			if got, want := a.refused[limUnchangedCalls].Load(), map[bool]uint64{false: 0, true: 1}[tc.refused]; got != want {
				t.Fatalf("refusals counted: %d, want %d", got, want)
			}
			if err := a.takeUnchanged(other); err != nil {
				t.Fatalf("another identity: %v", err)
			}
		})
	}
}

// Waiters are charged to their caller's account at the leader: past its
// limit an Acquire that would queue is refused naming waiters and queues
// nothing; a waiter that leaves (its call ends) gives its charge back;
// another identity queues meanwhile.
func TestWaitersAreChargedToTheAccount(t *testing.T) {
	h := newHarness(t)
	h.l.accounts = newAccounts(AccountLimits{Sidecar: Limits{Waiters: 2}}, h.fsm, h.clock)
	h.takeOffice()
	const ttl = 10 * time.Second
	h.acquire(acq("holder", 1, "x", ttl))
	host := Identity{Role: RoleSidecar, Name: "h"}
	waiter := func(session string, who Identity) acquireCmd {
		c := acq(session, 1, "x", ttl)
		c.Identity, c.caller = who.owner(), who
		return c
	}
	ctx1, leave := context.WithCancel(h.ctx())
	w1 := h.enqueueWaiter(ctx1, waiter("w1", host), time.Hour)
	h.enqueueWaiter(h.ctx(), waiter("w2", host), time.Hour)
	_, err := h.l.acquire(h.ctx(), waiter("w3", host), time.Hour)
	if !errors.Is(err, ErrOverLimit) || !strings.Contains(err.Error(), "limit of waiters (2 of 2)") {
		t.Fatalf("a third waiter of the host: %v, want over its waiters limit", err)
	}
	h.enqueueWaiter(h.ctx(), waiter("o1", Identity{Role: RoleSidecar, Name: "other"}), time.Hour)
	leave()
	if o := h.outcome(w1); o.err == nil {
		t.Fatalf("the waiter that left: %+v", o.res)
	}
	h.enqueueWaiter(h.ctx(), waiter("w3", host), time.Hour)
	if u := h.l.accounts.snapshot()["h"]; u.Waiters != 2 {
		t.Fatalf("the host's account: %+v, want 2 waiters", u)
	}
}

// The limits are validated with the config: a negative limit, or an
// identity that is not ROLE/NAME, is refused naming it.
func TestAccountLimitsValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*AccountLimits)
		want string
	}{
		{name: "defaults", edit: func(*AccountLimits) {}},
		{name: "negative role limit", edit: func(a *AccountLimits) { a.Operator.Waiters = -1 }, want: "limits of operator: waiters is negative"},
		{name: "negative identity limit", edit: func(a *AccountLimits) {
			a.Identities = map[string]Limits{"sidecar/h": {QueuedBytes: -5}}
		}, want: `limits of sidecar/h: queued_bytes is negative`},
		{name: "identity without a role", edit: func(a *AccountLimits) { a.Identities = map[string]Limits{"h": {}} }, want: `identity "h": want ROLE/NAME`},
		{name: "identity of no known role", edit: func(a *AccountLimits) { a.Identities = map[string]Limits{"admin/h": {}} }, want: `identity "admin/h"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fastConfig(t, t.TempDir())
			tt.edit(&cfg.Limits)
			err := cfg.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v, want an invalid config naming %q", err, tt.want)
			}
		})
	}
}
