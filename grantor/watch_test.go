package grantor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// watchHarness is a lessor harness whose FSM also feeds a watch hub.
func watchHarness(t *testing.T, lim Limits) (*harness, *watchHub) {
	h := newHarness(t)
	hub := newWatchHub(h.fsm, newAccounts(AccountLimits{Sidecar: lim}, h.fsm, h.clock))
	h.fsm.observe = func(ev fsmEvent) {
		h.l.onEvent(ev)
		hub.publish(ev)
	}
	return h, hub
}

// sc is the sidecar identity name.
func sc(name string) Identity { return Identity{Role: RoleSidecar, Name: name} }

// drain returns what is queued on w now.
func drain(t *testing.T, w *watchStream) []*grantorpb.WatchEvent {
	t.Helper()
	evs, err := w.take()
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// describe renders events as "KIND token holders=[tokens]" for messages.
func describe(evs []*grantorpb.WatchEvent) string {
	var b strings.Builder
	for _, e := range evs {
		var toks []uint64
		for _, h := range e.Holders {
			toks = append(toks, h.Token)
		}
		fmt.Fprintf(&b, "%s %d %q holders=%v limit=%d index=%d; ", e.Kind, e.Token, e.Value, toks, e.Limit, e.Index)
	}
	return b.String()
}

// Rule: a watcher gets the holders first, then every change applied, in
// log order, each with the holders after it; nothing it is not watching.
func TestWatchSnapshotThenChangesInOrder(t *testing.T) {
	h, hub := watchHarness(t, Limits{})
	h.takeOffice()
	c := acq("s1", 1, "leader", 10*time.Second)
	c.Value = "a:1"
	g1 := h.acquire(c)
	w, err := hub.open(sc("insecure"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	if err := w.add([]string{"leader"}); err != nil {
		t.Fatal(err)
	}
	waiter := h.enqueueWaiter(h.ctx(), acq("s2", 1, "leader", 10*time.Second), time.Minute)
	h.acquire(acq("s9", 1, "other", 10*time.Second)) // not watched
	if _, err := h.l.proclaim(h.ctx(), proclaimCmd{ID: requestID{Session: "s1", Seq: 2}, Lease: "leader", Owner: "o", Token: g1.Token, Value: "a:2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "s1", Seq: 3}, Lease: "leader", Owner: "o", Token: g1.Token}); err != nil {
		t.Fatal(err)
	}
	g2 := h.outcome(waiter).res
	tG := h.clock.Now()
	m := h.events.mark()
	h.advanceTo(h.timing.GrantorExpiry(tG, 10*time.Second))
	// s9's session ("other") expires by then too, maybe first: wait for
	// the expiry that frees the watched lease.
	h.events.wait(t, m, "expiry of leader", func(e testEvent) bool { return isExpiry(e) && h.held("leader") == 0 })
	// The FSM shows the lease free before the entry that freed it has told
	// the watchers (observe runs after the state changed), and the event
	// matched may be s9's expiry: the fake raft's lock is held until that
	// entry's apply, observers included, returned.
	h.raft.entries()

	evs := drain(t, w)
	want := []struct {
		kind    grantorpb.WatchEvent_Kind
		token   uint64
		holders []uint64
	}{
		{grantorpb.WatchEvent_SNAPSHOT, 0, []uint64{g1.Token}},
		{grantorpb.WatchEvent_PROCLAIMED, g1.Token, []uint64{g1.Token}},
		// The release and the handoff are one entry: both show its outcome.
		{grantorpb.WatchEvent_RELEASED, g1.Token, []uint64{g2.Token}},
		{grantorpb.WatchEvent_ACQUIRED, g2.Token, []uint64{g2.Token}},
		{grantorpb.WatchEvent_EXPIRED, g2.Token, nil},
	}
	if len(evs) != len(want) {
		t.Fatalf("events: %s", describe(evs))
	}
	var index uint64
	for i, e := range evs {
		var toks []uint64
		for _, x := range e.Holders {
			toks = append(toks, x.Token)
			if x.HolderName != "" {
				t.Fatalf("holder name %q, want none (sessions opened without an identity)", x.HolderName)
			}
		}
		if e.Kind != want[i].kind || e.Token != want[i].token || fmt.Sprint(toks) != fmt.Sprint(want[i].holders) || e.Lease != "leader" {
			t.Fatalf("event %d: %s; all: %s", i, describe(evs[i:i+1]), describe(evs))
		}
		if e.Index < index {
			t.Fatalf("index went back: %s", describe(evs))
		}
		index = e.Index
	}
	if evs[0].Holders[0].Value != "a:1" || evs[1].Value != "a:2" || evs[1].Holders[0].Value != "a:2" {
		t.Fatalf("values: %s", describe(evs))
	}
}

// Rule: a change whose entry is already in the snapshot is not told
// again; a later one is.
func TestWatchNoChangeTwiceAroundTheSnapshot(t *testing.T) {
	h, hub := watchHarness(t, Limits{})
	h.takeOffice()
	g := h.acquire(acq("s1", 1, "x", 10*time.Second))
	w, _ := hub.open(sc("insecure"))
	defer w.close()
	w.add([]string{"x"})
	snap := drain(t, w)[0]
	// The grant's own event, published late (its entry is in the snapshot).
	rec, _ := h.fsm.grant("x", g.Token)
	hub.publish(fsmEvent{Kind: evGranted, Lease: "x", Rec: rec, Index: snap.Index})
	if evs := drain(t, w); len(evs) != 0 {
		t.Fatalf("a change in the snapshot told again: %s", describe(evs))
	}
	hub.publish(fsmEvent{Kind: evProclaimed, Lease: "x", Rec: rec, Index: snap.Index + 1})
	if evs := drain(t, w); len(evs) != 1 {
		t.Fatalf("a later change not told: %s", describe(evs))
	}
}

// Rule: a watcher that does not read is dropped with RESOURCE_EXHAUSTED
// when its queue is full; publishing never blocks, and others go on.
func TestWatchSlowReaderIsDropped(t *testing.T) {
	h, hub := watchHarness(t, Limits{})
	h.takeOffice()
	g := h.acquire(acq("s1", 1, "x", 10*time.Second))
	slow, _ := hub.open(sc("a"))
	defer slow.close()
	slow.add([]string{"x"})
	fast, _ := hub.open(sc("b"))
	defer fast.close()
	fast.add([]string{"x"})
	drain(t, fast)
	for i := range maxWatchQueue + 10 {
		if _, err := h.l.proclaim(h.ctx(), proclaimCmd{ID: requestID{Session: "s1", Seq: uint64(i + 2), FirstUnacked: uint64(i + 2)}, Lease: "x", Owner: "o", Token: g.Token, Value: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			drain(t, fast)
		}
	}
	if _, err := slow.take(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("slow reader: %v, want RESOURCE_EXHAUSTED", err)
	}
	if evs := drain(t, fast); len(evs) == 0 || evs[len(evs)-1].Value != fmt.Sprint(maxWatchQueue+9) {
		t.Fatalf("the reader that kept up missed changes: %s", describe(evs[len(evs)-1:]))
	}
}

// Rule: an identity has at most its account's watch_streams streams; a
// closed one frees its place.
func TestWatchStreamsPerIdentity(t *testing.T) {
	_, hub := watchHarness(t, Limits{WatchStreams: 2})
	a1, _ := hub.open(sc("a"))
	if _, err := hub.open(sc("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := hub.open(sc("a")); status.Code(toStatus(err)) != codes.ResourceExhausted || !strings.Contains(err.Error(), "watch_streams") {
		t.Fatalf("third stream of a: %v", err)
	}
	if _, err := hub.open(sc("b")); err != nil {
		t.Fatalf("another identity: %v", err)
	}
	a1.close()
	if _, err := hub.open(sc("a")); err != nil {
		t.Fatalf("after a close: %v", err)
	}
}

// A restored state ends every stream, which then starts again.
func TestWatchRestoreEndsStreams(t *testing.T) {
	_, hub := watchHarness(t, Limits{})
	w, _ := hub.open(sc("a"))
	defer w.close()
	w.add([]string{"x"})
	hub.publish(fsmEvent{Kind: evRestored})
	if _, err := w.take(); status.Code(err) != codes.Unavailable {
		t.Fatalf("after a restore: %v", err)
	}
}

func TestValidWatch(t *testing.T) {
	if err := validWatch(&grantorpb.WatchRequest{Add: []string{"a/../b"}}); status.Code(toStatus(err)) != codes.InvalidArgument {
		t.Fatalf("bad name: %v", err)
	}
	many := make([]string, maxWatchRequestNames+1)
	for i := range many {
		many[i] = fmt.Sprint("n", i)
	}
	if err := validWatch(&grantorpb.WatchRequest{Add: many}); status.Code(toStatus(err)) != codes.InvalidArgument {
		t.Fatalf("too many names: %v", err)
	}
}

// Rule: a release is told as the end its sidecar names: released by its
// owner, or owner-ended, as RELEASED; a grant whose holder's deadline
// passed (lapsed: a no_renew lease, one lost for failed renewals) as
// EXPIRED, like an expiry at the grantor.
func TestWatchTellsALapsedReleaseAsExpired(t *testing.T) {
	for _, tc := range []struct {
		name               string
		ownerEnded, lapsed bool
		want               grantorpb.WatchEvent_Kind
	}{
		{name: "released by its owner", want: grantorpb.WatchEvent_RELEASED},
		{name: "its owner ended", ownerEnded: true, want: grantorpb.WatchEvent_RELEASED},
		{name: "lapsed", ownerEnded: true, lapsed: true, want: grantorpb.WatchEvent_EXPIRED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, hub := watchHarness(t, Limits{})
			h.takeOffice()
			g := h.acquire(acq("s1", 1, "job", 10*time.Second))
			w, err := hub.open(sc("insecure"))
			if err != nil {
				t.Fatal(err)
			}
			defer w.close()
			if err := w.add([]string{"job"}); err != nil {
				t.Fatal(err)
			}
			res, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: "s1", Seq: 2}, Lease: "job", Owner: "o", Token: g.Token,
				OwnerEnded: tc.ownerEnded, Lapsed: tc.lapsed})
			if err != nil || !res.Released {
				t.Fatalf("release: %+v %v", res, err)
			}
			evs := drain(t, w)
			if len(evs) != 2 || evs[1].Kind != tc.want || evs[1].Token != g.Token || len(evs[1].Holders) != 0 {
				t.Fatalf("events %s, want SNAPSHOT then %s", describe(evs), tc.want)
			}
		})
	}
}
