package grantor

import (
	"fmt"
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

// BenchmarkLessorCycleAmongSessions is BenchmarkLessorAcquireRelease on a
// leader whose office keeps 10,000 other sessions, each holding a lease (a
// cell of many hosts): what a lock cycle costs there beyond its own work.
// cpu-µs/op is the process's CPU per cycle, the expiry loop's included.
// Before the expiry loop was kicked only for due instants earlier than it
// sleeps until, each cycle kicked it twice and each scan walked every
// session under the lessor's mutex.
func BenchmarkLessorCycleAmongSessions(b *testing.B) {
	h := newHarness(b)
	h.takeOffice()
	ctx := b.Context()
	for i := range 10000 {
		s := fmt.Sprintf("host-%05d", i)
		g, err := h.l.acquire(ctx, acquireCmd{ID: requestID{Session: s, Seq: 1, FirstUnacked: 1}, Lease: "bench/" + s, Owner: "o", TTL: time.Hour}, 0)
		if err != nil || !g.Granted {
			b.Fatalf("acquire for %s: %+v %v", s, g, err)
		}
	}
	var seq uint64
	b.ReportAllocs()
	cpu := cpuMeter(b)
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
	cpu()
}
