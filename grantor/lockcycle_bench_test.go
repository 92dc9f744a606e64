package grantor

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// A lock cycle the way `leaseside bench --workload grants` makes it, in
// one process: owners, each in its own session on its own name, acquire
// without wait and release, over real gRPC to a one-node grantor with its
// fsync'd raft log. B/op and allocs/op are the process's (client and
// grantor) per cycle; cpu-µs/op its CPU. -memprofile tells the grantor's
// share from the client's:
//
//	go test -run '^$' -bench BenchmarkLockCycle -benchmem -count 5 ./grantor
func BenchmarkLockCycle(b *testing.B) {
	n := start(b, fastConfig(b, b.TempDir()), true)
	var owner atomic.Int64
	b.SetParallelism(8) // 16 owners at GOMAXPROCS 2
	cpu := cpuMeter(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := owner.Add(1)
		session, lease := fmt.Sprintf("cycle-%d", i), fmt.Sprintf("bench/cycle/%d", i)
		var seq uint64
		for pb.Next() {
			seq++
			a, err := n.client.Acquire(b.Context(), &grantorpb.AcquireRequest{
				Id:    &grantorpb.RequestID{Session: session, Seq: seq, FirstUnacked: seq},
				Lease: lease, Owner: "o", TtlNs: int64(time.Minute)})
			if err != nil || !a.Granted {
				b.Errorf("acquire: %v %v", a, err)
				return
			}
			seq++
			r, err := n.client.Release(b.Context(), &grantorpb.ReleaseRequest{
				Id:    &grantorpb.RequestID{Session: session, Seq: seq, FirstUnacked: seq},
				Lease: lease, Owner: "o", Token: a.Token})
			if err != nil || !r.Released {
				b.Errorf("release: %v %v", r, err)
				return
			}
		}
	})
	cpu()
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
	cpu := cpuMeter(b)
	lessorCycles(b, h)
	cpu()
}
