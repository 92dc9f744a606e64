package daemon

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// runDaemon runs a daemon against the grantor at addr on the real clock,
// and returns its socket path.
func runDaemon(t *testing.T, addr string) string {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Grantors = []string{addr}
	_, sock := startDaemon(t, cfg)
	return sock
}

// primsRig is a real in-process grantor and two daemons on it, as two
// hosts.
type primsRig struct {
	a, b string // the daemons' sockets
}

func newPrimsRig(t *testing.T) *primsRig {
	addr := startGrantor(t, clockwatch.System, clockwatch.DefaultTiming())
	return &primsRig{a: runDaemon(t, addr), b: runDaemon(t, addr)}
}

func client(t *testing.T, sock string) *ipc.Client {
	c := &ipc.Client{Socket: sock}
	t.Cleanup(func() { c.Close() })
	return c
}

// nextLeader reads the next Observe report.
func nextLeader(t *testing.T, ch <-chan ipc.Leader) ipc.Leader {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatal("observer closed")
		}
		return v
	case <-ctxT(t).Done():
		t.Fatal("no leader report")
	}
	return ipc.Leader{}
}

// An election through two daemons: a candidate leads with its value, the
// other waits in line; an observer on a third connection sees the leader,
// a proclaimed value, and the next leader when the first resigns, with a
// higher token.
func TestElectionThroughTheDaemon(t *testing.T) {
	r := newPrimsRig(t)
	const ttl = 5 * time.Second
	ca, cb := client(t, r.a), client(t, r.b)
	obs, err := client(t, r.b).Observe(ctxT(t), "elect/x")
	if err != nil {
		t.Fatal(err)
	}
	if v := nextLeader(t, obs); v.Holder != nil {
		t.Fatalf("first report %+v, want nobody leading", v.Holder)
	}
	la, err := ca.Campaign(ctxT(t), "elect/x", "a:1", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if v := nextLeader(t, obs); v.Holder == nil || v.Holder.Token != la.Token || v.Holder.Value != "a:1" {
		t.Fatalf("leader %+v, want a's grant %s", v.Holder, la.Token)
	}
	won := make(chan *ipc.Lease, 1)
	go func() {
		lb, err := cb.Campaign(ctxT(t), "elect/x", "b:1", ipc.AcquireOptions{TTL: ttl})
		if err != nil {
			t.Error(err)
		}
		won <- lb
	}()
	if err := ca.Proclaim(ctxT(t), la, "a:2"); err != nil {
		t.Fatal(err)
	}
	if v := nextLeader(t, obs); v.Holder == nil || v.Holder.Token != la.Token || v.Holder.Value != "a:2" || la.CurrentValue() != "a:2" {
		t.Fatalf("after proclaim %+v (lease value %q)", v.Holder, la.CurrentValue())
	}
	if err := ca.Resign(ctxT(t), la); err != nil {
		t.Fatal(err)
	}
	lb := <-won
	if lb == nil {
		t.Fatal("b did not win")
	}
	a, _ := la.TokenValue()
	b, _ := lb.TokenValue()
	if b <= a {
		t.Fatalf("b's token %d is not above a's %d", b, a)
	}
	// b waits in line, unless its campaign had not reached the grantor
	// yet: then nobody leads for a moment.
	v := nextLeader(t, obs)
	if v.Holder == nil {
		v = nextLeader(t, obs)
	}
	if v.Holder == nil || v.Holder.Token != lb.Token || v.Holder.Value != "b:1" {
		t.Fatalf("after resign %+v, want b's grant %s", v.Holder, lb.Token)
	}
}

// A semaphore of 2 across two daemons: two holders at once with their own
// tokens, a third is refused (or queues), another limit is a bad request
// naming both, and status shows the limit.
func TestSemaphoreThroughTheDaemon(t *testing.T) {
	r := newPrimsRig(t)
	opt := ipc.AcquireOptions{TTL: 5 * time.Second, Limit: 2}
	l1, err := client(t, r.a).Acquire(ctxT(t), "sem/x", opt)
	if err != nil {
		t.Fatal(err)
	}
	ca2 := client(t, r.a)
	l2, err := ca2.Acquire(ctxT(t), "sem/x", opt)
	if err != nil {
		t.Fatal(err)
	}
	if l1.Token == l2.Token || l2.Limit != 2 || l2.Holders != 2 {
		t.Fatalf("two holders on one host: %+v %+v", l1.Grant, l2.Grant)
	}
	cb := client(t, r.b)
	if _, err := cb.Acquire(ctxT(t), "sem/x", opt); !errors.Is(err, ipc.ErrLeaseHeld) {
		t.Fatalf("third holder of 2: %v", err)
	}
	bad := opt
	bad.Limit = 3
	var ie *ipc.Error
	if _, err := cb.Acquire(ctxT(t), "sem/x", bad); !errors.As(err, &ie) || ie.Code != ipc.CodeBadRequest {
		t.Fatalf("another limit: %v", err)
	}
	for _, want := range []string{"limit 2", "limit 3"} {
		if !strings.Contains(ie.Message, want) {
			t.Fatalf("message %q does not name %q", ie.Message, want)
		}
	}
	st, err := client(t, r.a).Status(ctxT(t))
	if err != nil || len(st) != 2 || st[0].Limit != 2 || st[1].Limit != 2 {
		t.Fatalf("status %+v %v", st, err)
	}
	// A waiter gets the slot the second holder frees.
	got := make(chan *ipc.Lease, 1)
	go func() {
		w := opt
		w.Wait = time.Minute
		l, err := cb.Acquire(ctxT(t), "sem/x", w)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	if err := ca2.Release(ctxT(t), "sem/x"); err != nil {
		t.Fatal(err)
	}
	if l := <-got; l == nil || l.Token <= l2.Token {
		t.Fatalf("waiter's grant %+v after token %s", l, l2.Token)
	}
	if !l1.Valid() {
		t.Fatal("the release of one slot ended the other")
	}
}

// A holder watch on one daemon sees another daemon's grant and release,
// in order, with the holders after each.
func TestHolderWatchSeesOtherHost(t *testing.T) {
	r := newPrimsRig(t)
	w := client(t, r.b)
	evs := make(chan *ipc.Event, 16)
	w.Notify(evs)
	if err := w.WatchHolders(ctxT(t), "jobs/x"); err != nil {
		t.Fatal(err)
	}
	next := func() *ipc.Event {
		t.Helper()
		for {
			select {
			case ev := <-evs:
				if ev.Event == ipc.EventHolder {
					return ev
				}
			case <-ctxT(t).Done():
				t.Fatal("no holder event")
			}
		}
	}
	if ev := next(); ev.Change != ipc.ChangeSync || len(ev.Holders) != 0 {
		t.Fatalf("first event %+v", ev)
	}
	ca := client(t, r.a)
	l, err := ca.Acquire(ctxT(t), "jobs/x", ipc.AcquireOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.Change != ipc.ChangeAcquired || ev.Token != l.Token || len(ev.Holders) != 1 || ev.Holder != "insecure" {
		t.Fatalf("acquired %+v", ev)
	}
	if err := ca.Release(ctxT(t), "jobs/x"); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.Change != ipc.ChangeReleased || ev.Token != l.Token || len(ev.Holders) != 0 {
		t.Fatalf("released %+v", ev)
	}
}

// check_token at the grantor: true for the live grant, false for a
// superseded one.
func TestCheckTokenThroughTheDaemon(t *testing.T) {
	r := newPrimsRig(t)
	ca := client(t, r.a)
	old, err := ca.Acquire(ctxT(t), "fence/x", ipc.AcquireOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Release(ctxT(t), "fence/x"); err != nil {
		t.Fatal(err)
	}
	cur, err := client(t, r.b).Acquire(ctxT(t), "fence/x", ipc.AcquireOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token string
		live  bool
	}{{old.Token, false}, {cur.Token, true}} {
		live, tokens, err := ca.CheckToken(ctxT(t), "fence/x", tc.token)
		if err != nil || live != tc.live || len(tokens) != 1 || tokens[0] != cur.Token {
			t.Fatalf("check %s: %v %v %v, want live %v", tc.token, live, tokens, err, tc.live)
		}
	}
}

// A no_renew lease that lapses at its holder's deadline is told to holder
// watchers on other hosts as expired, not released: its sidecar ends it
// at the grantor as lapsed (issue 24: `watch --holders` said released).
func TestLapsedNoRenewLeaseIsToldExpired(t *testing.T) {
	r := newPrimsRig(t)
	w := client(t, r.b)
	evs := make(chan *ipc.Event, 16)
	w.Notify(evs)
	if err := w.WatchHolders(ctxT(t), "jobs/lapse"); err != nil {
		t.Fatal(err)
	}
	var changes []string
	for len(changes) < 3 {
		select {
		case ev := <-evs:
			if ev.Event != ipc.EventHolder {
				continue
			}
			changes = append(changes, ev.Change)
			if ev.Change == ipc.ChangeSync {
				l, err := client(t, r.a).Acquire(ctxT(t), "jobs/lapse", ipc.AcquireOptions{TTL: time.Second, Owner: ipc.OwnerDetached, NoRenew: true})
				if err != nil {
					t.Fatal(err)
				}
				if !l.Valid() {
					t.Fatal("the grant is not valid")
				}
			}
		case <-ctxT(t).Done():
			t.Fatalf("holder changes %v, want sync, acquired, expired", changes)
		}
	}
	if want := []string{ipc.ChangeSync, ipc.ChangeAcquired, ipc.ChangeExpired}; !slices.Equal(changes, want) {
		t.Fatalf("holder changes %v, want %v", changes, want)
	}
}
