package grantor

import (
	"testing"
	"time"
)

// BenchmarkLessorAcquireRelease measures one lock cycle at the leader's
// lessor: Acquire of a free name, then Release of its grant, through the
// lessor's whole path (office, session bookkeeping, leadership checks,
// waiter queue) over the real FSM and a fake raft that applies each entry
// at once (harness_test.go), so raft's log and network are left out. The
// harness records every applied entry and lessor milestone in its event
// log; that cost is in the figure too. One op is both requests.
func BenchmarkLessorAcquireRelease(b *testing.B) {
	h := newHarness(b)
	h.takeOffice()
	lessorCycles(b, h)
}

// lessorCycles runs b's loop of lock cycles on h's lessor: one session
// acquires a name without wait and releases it.
func lessorCycles(b *testing.B, h *harness) {
	ctx := b.Context()
	var seq uint64
	b.ReportAllocs()
	for b.Loop() {
		seq++
		g, err := h.l.acquire(ctx, acquireCmd{ID: requestID{Session: "s", Seq: seq, FirstUnacked: seq}, Lease: "bench/lock", Owner: "o", TTL: 15 * time.Second}, 0)
		if err != nil || !g.Granted {
			b.Fatalf("acquire %d: %+v %v", seq, g, err)
		}
		seq++
		r, err := h.l.release(ctx, releaseCmd{ID: requestID{Session: "s", Seq: seq, FirstUnacked: seq}, Lease: "bench/lock", Owner: "o", Token: g.Token})
		if err != nil || !r.Released {
			b.Fatalf("release %d: %+v %v", seq, r, err)
		}
	}
}
