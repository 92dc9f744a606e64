package grantor

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// scattered returns n seqs below top, descending, none adjacent: each
// makes a range of its own (the worst order for inserting one by one).
func scattered(top uint64, n int) []uint64 {
	also := make([]uint64, n)
	for i := range also {
		also[i] = top - 2*uint64(i+1)
	}
	return also
}

// Review finding R8-9: one Acquire listing 4096 scattered seqs cost every
// replica 14 ms of apply (one insert at a time, each copying the ranges
// above it) and left 4096 ranges (64 KiB) in the session. The leader now
// writes only the seqs within alsoReceivedWindow below the request's own,
// sorted; so an entry adds at most alsoReceivedWindow/2 ranges.
func TestAlsoReceivedEntryIsWindowed(t *testing.T) {
	cfg := DefaultConfig()
	const seq = 100000
	req := &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: "evil", Seq: seq, FirstUnacked: 1,
		AlsoReceived: append(scattered(seq, maxAlsoReceived-2), seq+1, seq+100)},
		Lease: "popular", TtlNs: int64(10 * time.Second)}
	c, _, err := cfg.validAcquire(req, false)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.ID.AlsoReceived); n > alsoReceivedWindow || !slices.IsSorted(c.ID.AlsoReceived) {
		t.Fatalf("the entry carries %d seqs (sorted: %v), want at most %d, sorted", n, slices.IsSorted(c.ID.AlsoReceived), alsoReceivedWindow)
	}
	for _, s := range c.ID.AlsoReceived {
		if s >= seq || seq-s > alsoReceivedWindow {
			t.Fatalf("seq %d reached the entry of seq %d", s, seq)
		}
	}
	f := newTestFSM()
	f.acquire(t, "victim", 1, "popular", "o")
	c.Owner, c.Identity = "x", "evil"
	if r, ok := f.apply(cmdAcquire5, c).(*acquireResult); !ok || r.Granted {
		t.Fatalf("acquire of a held lease: %+v", r)
	}
	if s := f.st.Sessions["evil"]; s != nil && len(s.Forgotten) > alsoReceivedWindow/2 {
		t.Fatalf("one entry left %d forgotten ranges, want at most %d", len(s.Forgotten), alsoReceivedWindow/2)
	}
}

// The one-pass forgetting gives what forgetting one seq at a time, in the
// entry's order, gives: replicas of either version agree (TEAM.md
// decision 4), including when the limit of ranges is near.
func TestForgetSortedEqualsForgetEach(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 2000; trial++ {
		base := &sessionRecord{Floor: uint64(rng.IntN(20)), Outcomes: map[uint64]outcome{}}
		for i := 0; i < rng.IntN(40); i++ {
			base.Outcomes[uint64(rng.IntN(300))] = outcome{Kind: cmdAcquire}
		}
		for i := 0; i < rng.IntN(60); i++ {
			if rs, ok := base.Forgotten.add(uint64(20+rng.IntN(280)), maxForgottenRanges); ok {
				base.Forgotten = rs
			}
		}
		id := requestID{Session: "s", Seq: uint64(1 + rng.IntN(300))}
		for i := 0; i < rng.IntN(200); i++ {
			id.AlsoReceived = append(id.AlsoReceived, uint64(rng.IntN(320)))
		}
		clone := func() *sessionRecord {
			c := *base
			c.Outcomes = maps.Clone(base.Outcomes)
			c.Forgotten = slices.Clone(base.Forgotten)
			return &c
		}
		each, sorted := clone(), clone()
		each.forgetEach(id)
		if !sorted.forgetSorted(id) {
			t.Fatalf("trial %d: the sorted pass declined %d ranges + %d seqs", trial, len(base.Forgotten), len(id.AlsoReceived))
		}
		if len(each.Forgotten) == 0 {
			each.Forgotten = nil
		}
		if len(sorted.Forgotten) == 0 {
			sorted.Forgotten = nil
		}
		if !reflect.DeepEqual(each, sorted) {
			t.Fatalf("trial %d: %+v forgetting %v: one by one %+v, sorted %+v", trial, base, id.AlsoReceived, each, sorted)
		}
	}
	// Past the limit the one-by-one order decides, as before.
	s := &sessionRecord{Outcomes: map[uint64]outcome{}}
	for i := 0; i < maxForgottenRanges; i++ {
		s.Forgotten = append(s.Forgotten, seqRange{Lo: uint64(10 + 3*i), Hi: uint64(10 + 3*i)})
	}
	if s.forgetSorted(requestID{Seq: 1, AlsoReceived: []uint64{5}}) {
		t.Fatal("the sorted pass ran where the limit may decide")
	}
}

// BenchmarkForgetScattered is the apply cost of an entry listing
// maxAlsoReceived scattered seqs in descending order (an entry of an older
// leader; review R8-9 measured 14 ms before the one-pass forgetting).
func BenchmarkForgetScattered(b *testing.B) {
	also := scattered(3*maxAlsoReceived, maxAlsoReceived)
	for i := 0; b.Loop(); i++ {
		s := &sessionRecord{Outcomes: map[uint64]outcome{}}
		s.forget(requestID{Session: fmt.Sprint(i), Seq: 3 * maxAlsoReceived, AlsoReceived: also})
	}
}
