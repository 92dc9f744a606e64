package grantor

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// BenchmarkFSMApply measures one lock cycle in the state machine: an
// Acquire entry and the Release of its grant, each encoded as the leader
// proposes it (the newest command types) and applied as every server
// applies it. The owner acknowledges each answer (FirstUnacked), as the
// sidecar does, so its session keeps no outcomes. One op is both entries;
// make bench-compare compares it across revisions.
func BenchmarkFSMApply(b *testing.B) {
	f := newFSM()
	var index, seq uint64
	apply := func(data []byte) any {
		index++
		return f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data})
	}
	b.ReportAllocs()
	for b.Loop() {
		seq++
		a := acquireCmd{ID: requestID{Session: "s", Seq: seq, FirstUnacked: seq}, Lease: "bench/lock", Owner: "o", TTL: 15 * time.Second}
		g, ok := apply(acquireEntry(a, newestCmd)).(*acquireResult)
		if !ok || !g.Granted {
			b.Fatalf("acquire %d: %+v", seq, g)
		}
		seq++
		r := releaseCmd{ID: requestID{Session: "s", Seq: seq, FirstUnacked: seq}, Lease: "bench/lock", Owner: "o", Token: g.Token}
		if res, ok := apply(releaseEntry(r, newestCmd)).(*releaseResult); !ok || !res.Released {
			b.Fatalf("release %d: %+v", seq, res)
		}
	}
}
