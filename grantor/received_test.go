package grantor

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

func acqAlso(session string, seq, firstUnacked uint64, lease string, also ...uint64) acquireCmd {
	return acquireCmd{ID: requestID{Session: session, Seq: seq, FirstUnacked: firstUnacked, AlsoReceived: also},
		Lease: lease, Owner: "o", TTL: 10 * time.Second}
}

func relAlso(session string, seq, firstUnacked uint64, lease string, token uint64, also ...uint64) releaseCmd {
	return releaseCmd{ID: requestID{Session: session, Seq: seq, FirstUnacked: firstUnacked, AlsoReceived: also},
		Lease: lease, Owner: "o", Token: token}
}

func isStaleReceived(res any) bool {
	var stale *StaleRequestError
	err, _ := res.(error)
	return errors.As(err, &stale) && stale.Received && errors.Is(err, ErrStaleRequest)
}

// The point of also_received: a long waiting Acquire keeps first_unacked
// at its seq, and a busy session that lists the replies it got does not
// run into maxOutstanding behind it.
func TestFSMAlsoReceivedPrunesBehindAWaitingAcquire(t *testing.T) {
	f := newTestFSM()
	f.acquire(t, "other", 1, "held", "o")
	// Seq 1 of s waits for "held" for the whole test: not granted, so not
	// remembered, and never acknowledged.
	if r := f.apply(cmdAcquire, acqAlso("s", 1, 1, "held")).(*acquireResult); r.Granted {
		t.Fatal("held lease granted")
	}
	var prev []uint64
	const n = 3 * maxOutstanding
	for seq := uint64(2); seq <= n; seq++ {
		res := f.apply(cmdAcquire2, acqAlso("s", seq, 1, "l", prev...))
		if r, ok := res.(*acquireResult); !ok || !r.Granted {
			t.Fatalf("seq %d: %v", seq, res)
		}
		prev = []uint64{seq} // its reply arrived; the next request says so
	}
	sess := f.st.Sessions["s"]
	if len(sess.Outcomes) != 1 || len(sess.Forgotten) != 1 || sess.Floor != 1 {
		t.Fatalf("after %d requests: %d outcomes, forgotten %v, floor %d; want 1, one range, floor 1",
			n, len(sess.Outcomes), sess.Forgotten, sess.Floor)
	}
	if want := (seqRange{Lo: 2, Hi: n - 1}); sess.Forgotten[0] != want {
		t.Fatalf("forgotten %v, want %v", sess.Forgotten, want)
	}
	// The waiting Acquire is still seq 1 and still answered.
	if r := f.apply(cmdAcquire2, acqAlso("s", 1, 1, "held", n)).(*acquireResult); r.Granted {
		t.Fatal("held lease granted")
	}
	// Once it is answered, first_unacked moves past everything.
	f.apply(cmdAcquire2, acqAlso("s", n+1, n+1, "m"))
	if sess.Floor != n+1 || sess.Forgotten != nil || len(sess.Outcomes) != 1 {
		t.Fatalf("floor %d, forgotten %v, %d outcomes; want floor %d and only seq %d", sess.Floor, sess.Forgotten, len(sess.Outcomes), n+1, n+1)
	}
}

// Safety: a late copy of a request whose outcome was forgotten is stale,
// granted or not granted, and never grants.
func TestFSMForgottenSeqNeverGrantsAgain(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, f *testFSM) (lease string, seq uint64)
	}{
		{name: "granted then released", setup: func(t *testing.T, f *testFSM) (string, uint64) {
			r := f.acquire(t, "s", 2, "a", "o")
			f.apply(cmdRelease2, relAlso("s", 3, 1, "a", r.Token, 2))
			return "a", 2
		}},
		{name: "refused while held, freed since", setup: func(t *testing.T, f *testFSM) (string, uint64) {
			h := f.acquire(t, "other", 1, "b", "o")
			if r := f.acquire(t, "s", 2, "b", "o"); r.Granted {
				t.Fatal("held lease granted")
			}
			f.release(t, "other", 2, "b", "o", h.Token)
			f.apply(cmdAcquire2, acqAlso("s", 3, 1, "c", 2))
			return "b", 2
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestFSM()
			f.apply(cmdAcquire, acqAlso("s", 1, 1, "waits"))
			lease, seq := tt.setup(t, f)
			before := f.lastToken()
			if res := f.apply(cmdAcquire, acqAlso("s", seq, 1, lease)); !isStaleReceived(res) {
				t.Fatalf("late copy of forgotten seq %d = %v, want a stale (received) error", seq, res)
			}
			if res := f.apply(cmdAcquire2, acqAlso("s", seq, 1, lease, 1)); !isStaleReceived(res) {
				t.Fatalf("late copy (acquire2) = %v, want stale", res)
			}
			if _, held := f.lease(lease); held || f.lastToken() != before {
				t.Fatalf("a forgotten request was granted: held=%v counter %d->%d", held, before, f.lastToken())
			}
		})
	}
}

func TestFSMAlsoReceivedEdges(t *testing.T) {
	t.Run("acquire entries of type 1 do not forget", func(t *testing.T) {
		f := newTestFSM()
		f.acquire(t, "s", 2, "a", "o")
		f.apply(cmdAcquire, acqAlso("s", 3, 1, "b", 2))
		if !f.hasOutcome("s", 2) || f.st.Sessions["s"].Forgotten != nil {
			t.Fatal("a cmdAcquire entry applied also_received")
		}
	})
	t.Run("seqs below the floor and the own seq are ignored", func(t *testing.T) {
		f := newTestFSM()
		f.apply(cmdAcquire2, acqAlso("s", 9, 5, "a", 1, 2, 9))
		sess := f.st.Sessions["s"]
		if sess.Floor != 5 || sess.Forgotten != nil || !f.hasOutcome("s", 9) {
			t.Fatalf("floor %d forgotten %v", sess.Floor, sess.Forgotten)
		}
	})
	t.Run("a retry may list later seqs", func(t *testing.T) {
		f := newTestFSM()
		first := f.acquire(t, "s", 1, "a", "o")
		f.acquire(t, "s", 2, "b", "o")
		// The reply of seq 1 was lost; seq 2's arrived. The retry of 1
		// lists 2 and gets its own first outcome.
		res := f.apply(cmdAcquire2, acqAlso("s", 1, 1, "a", 2))
		if r, ok := res.(*acquireResult); !ok || *r != *first {
			t.Fatalf("retry = %v, want %+v", res, first)
		}
		if f.hasOutcome("s", 2) || !f.hasOutcome("s", 1) {
			t.Fatal("retry did not forget 2, or forgot itself")
		}
	})
	t.Run("a range reaching the floor moves the floor", func(t *testing.T) {
		f := newTestFSM()
		f.acquire(t, "s", 1, "a", "o")
		f.acquire(t, "s", 2, "b", "o")
		f.apply(cmdAcquire2, acqAlso("s", 3, 1, "c", 2))
		f.apply(cmdAcquire2, acqAlso("s", 4, 1, "d", 1))
		sess := f.st.Sessions["s"]
		if sess.Floor != 3 || sess.Forgotten != nil {
			t.Fatalf("floor %d, forgotten %v; want floor 3 and no ranges", sess.Floor, sess.Forgotten)
		}
		var stale *StaleRequestError
		if res := f.apply(cmdAcquire, acqAlso("s", 2, 0, "b")); !errors.As(res.(error), &stale) || stale.Floor != 3 {
			t.Fatalf("seq 2 = %v, want stale below floor 3", res)
		}
	})
	t.Run("ranges are bounded; a seq past the bound is remembered", func(t *testing.T) {
		f := newTestFSM()
		// Every other seq is listed, so each is a range of its own.
		var prev []uint64
		var listed []uint64
		for seq := uint64(2); seq <= 2*(maxForgottenRanges+2); seq += 2 {
			if res, ok := f.apply(cmdRelease2, relAlso("s", seq, 1, "a", 1, prev...)).(*releaseResult); !ok {
				t.Fatalf("seq %d: %v", seq, res)
			}
			prev = []uint64{seq}
			listed = append(listed, seq)
		}
		sess := f.st.Sessions["s"]
		if len(sess.Forgotten) != maxForgottenRanges {
			t.Fatalf("%d ranges, want the bound %d", len(sess.Forgotten), maxForgottenRanges)
		}
		past := listed[maxForgottenRanges] // listed when the bound was reached
		if !f.hasOutcome("s", past) || f.hasOutcome("s", listed[0]) || len(sess.Outcomes) != 2 {
			t.Fatalf("%d outcomes; want the first listed seqs forgotten and %d (past the bound) and the last remembered",
				len(sess.Outcomes), past)
		}
	})
}

func TestSeqRanges(t *testing.T) {
	tests := []struct {
		name  string
		start seqRanges
		add   uint64
		limit int
		want  seqRanges
		ok    bool
	}{
		{name: "into empty", add: 5, limit: 2, want: seqRanges{{5, 5}}, ok: true},
		{name: "already in", start: seqRanges{{3, 6}}, add: 4, limit: 1, want: seqRanges{{3, 6}}, ok: true},
		{name: "extends up", start: seqRanges{{3, 6}}, add: 7, limit: 1, want: seqRanges{{3, 7}}, ok: true},
		{name: "extends down", start: seqRanges{{3, 6}}, add: 2, limit: 1, want: seqRanges{{2, 6}}, ok: true},
		{name: "joins two", start: seqRanges{{1, 2}, {4, 5}}, add: 3, limit: 2, want: seqRanges{{1, 5}}, ok: true},
		{name: "new in the middle", start: seqRanges{{1, 1}, {9, 9}}, add: 5, limit: 3, want: seqRanges{{1, 1}, {5, 5}, {9, 9}}, ok: true},
		{name: "over the limit", start: seqRanges{{1, 1}, {9, 9}}, add: 5, limit: 2, want: seqRanges{{1, 1}, {9, 9}}, ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := slices.Clone(tt.start).add(tt.add, tt.limit)
			if ok != tt.ok || !slices.Equal(got, tt.want) {
				t.Fatalf("add(%d) = %v, %v; want %v, %v", tt.add, got, ok, tt.want, tt.ok)
			}
			for seq := uint64(0); seq < 12; seq++ {
				want := false
				for _, r := range tt.want {
					want = want || r.Lo <= seq && seq <= r.Hi
				}
				if got.contains(seq) != want {
					t.Errorf("contains(%d) = %v", seq, !want)
				}
			}
		})
	}
	if got := (seqRanges{{1, 3}, {5, 8}, {10, 10}}).trimBelow(6); !slices.Equal(got, seqRanges{{6, 8}, {10, 10}}) {
		t.Errorf("trimBelow(6) = %v", got)
	}
	if got := (seqRanges{{1, 3}}).trimBelow(4); got != nil {
		t.Errorf("trimBelow past all = %v, want nil", got)
	}
}

func TestFSMSnapshotKeepsForgotten(t *testing.T) {
	f := newTestFSM()
	f.acquire(t, "s", 2, "a", "o")
	plain := persist(t, f.fsm)
	if !bytes.HasPrefix(plain, []byte(`{"format":1,`)) {
		t.Fatalf("a state without forgotten ranges is written as %.20s, want format 1", plain)
	}
	f.apply(cmdAcquire2, acqAlso("s", 3, 1, "b", 2))
	data := persist(t, f.fsm)
	if !bytes.HasPrefix(data, []byte(`{"format":2,`)) {
		t.Fatalf("snapshot with forgotten ranges starts %.20s, want format 2", data)
	}
	g := &testFSM{fsm: newFSM()}
	if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if res := g.apply(cmdAcquire, acqAlso("s", 2, 0, "a")); !isStaleReceived(res) {
		t.Fatalf("forgotten seq after restore = %v, want stale", res)
	}
	if err := g.Restore(io.NopCloser(strings.NewReader(`{"format":3,"state":{}}`))); err == nil {
		t.Fatal("format 3 accepted")
	}
}

func TestAlsoReceivedValidation(t *testing.T) {
	cfg := DefaultConfig()
	req := func(also ...uint64) *grantorpb.AcquireRequest {
		return &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: "s", Seq: 5, FirstUnacked: 2, AlsoReceived: also},
			Lease: "a", TtlNs: int64(10 * time.Second)}
	}
	tests := []struct {
		name    string
		also    []uint64
		want    []uint64 // what the entry carries
		wantErr bool
	}{
		{name: "none"},
		// Only seqs below the request's own reach the entry, sorted,
		// once each (review R8-9).
		{name: "earlier and later seqs", also: []uint64{4, 1, 3, 9, 3}, want: []uint64{1, 3, 4}},
		{name: "own seq", also: []uint64{3, 5}, wantErr: true},
		{name: "zero", also: []uint64{0}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, err := cfg.validAcquire(req(tt.also...), false)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tt.wantErr)
			}
			if err == nil && !slices.Equal(c.ID.AlsoReceived, tt.want) {
				t.Fatalf("also_received %v, want %v", c.ID.AlsoReceived, tt.want)
			}
			if err != nil && !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("err %v is not ErrInvalidArgument", err)
			}
		})
	}
	// A long list: only the seqs within alsoReceivedWindow below the
	// request's own seq are kept.
	const seq = 10000
	many := make([]uint64, maxAlsoReceived+10)
	for i := range many {
		many[i] = seq - 1 - uint64(i)
	}
	long := req(many...)
	long.Id.Seq = seq
	want := slices.Clone(many[:alsoReceivedWindow])
	slices.Reverse(want)
	if c, _, err := cfg.validAcquire(long, false); err != nil || !slices.Equal(c.ID.AlsoReceived, want) {
		t.Errorf("a long also_received: err %v, kept %d seqs; want the %d below the request's seq", err, len(c.ID.AlsoReceived), alsoReceivedWindow)
	}
	if e := acquireEntry(acqAlso("s", 2, 1, "a"), cmdRelease2); e[0] != byte(cmdAcquire) {
		t.Errorf("acquire without also_received is written as type %d", e[0])
	}
	if e := releaseEntry(relAlso("s", 2, 1, "a", 1, 1), cmdRelease2); e[0] != byte(cmdRelease2) {
		t.Errorf("release with also_received is written as type %d", e[0])
	}
}

// also_received end to end over gRPC: a retry of a seq the session listed
// is OUT_OF_RANGE and grants nothing; listing the own seq is refused.
func TestNodeAlsoReceivedOverGRPC(t *testing.T) {
	n := start(t, fastConfig(t, t.TempDir()), true)
	c := n.client
	id := func(seq, firstUnacked uint64, also ...uint64) *grantorpb.RequestID {
		return &grantorpb.RequestID{Session: "s", Seq: seq, FirstUnacked: firstUnacked, AlsoReceived: also}
	}
	a := mustAcquire(t, c, &grantorpb.AcquireRequest{Id: id(2, 1), Lease: "a", Owner: "o", TtlNs: int64(10 * time.Second)})
	rel, err := c.Release(tctx(t), &grantorpb.ReleaseRequest{Id: id(3, 1, 2), Lease: "a", Owner: "o", Token: a.Token})
	if err != nil || !rel.Released {
		t.Fatalf("release listing seq 2: %v %v", rel, err)
	}
	if n.fsm.hasOutcome("s", 2) {
		t.Fatal("outcome of seq 2 still remembered")
	}
	_, err = c.Acquire(tctx(t), &grantorpb.AcquireRequest{Id: id(2, 1), Lease: "a", Owner: "o", TtlNs: int64(10 * time.Second)})
	if status.Code(err) != codes.OutOfRange {
		t.Fatalf("late copy of a listed seq: %v, want OUT_OF_RANGE", err)
	}
	if _, held := n.fsm.lease("a"); held || n.fsm.lastToken() != a.Token {
		t.Fatal("a late copy of a listed seq was granted")
	}
	_, err = c.Acquire(tctx(t), &grantorpb.AcquireRequest{Id: id(4, 1, 4), Lease: "a", Owner: "o", TtlNs: int64(10 * time.Second)})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("listing the own seq: %v, want INVALID_ARGUMENT", err)
	}
}
