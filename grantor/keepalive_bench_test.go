package grantor

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// CPU per keepalive message on a real grantor (one node, and three over
// loopback) with real gRPC, the way a current sidecar renews: one stream
// per session, each message renewing its session as a whole (name, term,
// digest). Sixteen streams send at once, so messages share verify rounds
// as they do on a busy leader. cpu-µs/op is the process's CPU (client and
// every node) per message; verifies/op the leader's verify rounds per
// message; -cpuprofile tells the parts apart:
//
//	go test -run '^$' -bench BenchmarkKeepAliveSessions -count 5 ./grantor
func BenchmarkKeepAliveSessions(b *testing.B) {
	for _, size := range []int{1, 3} {
		// One cluster and one set of streams for every round of b.N: only
		// messages are measured.
		leader := startBenchCluster(b, size)
		streams := keepAliveStreams(b, leader.client)
		b.Run(fmt.Sprintf("nodes=%d", size), func(b *testing.B) {
			benchKeepAlives(b, leader, streams)
		})
	}
}

// startBenchCluster starts size nodes with raft's default timings and
// returns the leader once it serves.
func startBenchCluster(b *testing.B, size int) *running {
	var first *running
	for i := range size {
		cfg := fastConfig(b, b.TempDir())
		cfg.NodeID = fmt.Sprintf("n%d", i+1)
		cfg.Bootstrap = i == 0
		if size > 1 {
			cfg.HeartbeatTimeout = DefaultHeartbeatTimeout
			cfg.ElectionTimeout = DefaultElectionTimeout
			cfg.LeaderLeaseTimeout = DefaultLeaderLeaseTimeout
		}
		n := start(b, cfg, i == 0)
		if i == 0 {
			first = n
			continue
		}
		ctx, cancel := context.WithTimeout(b.Context(), waitTimeout)
		err := first.AddVoter(ctx, cfg.NodeID, n.RaftAddr())
		cancel()
		if err != nil {
			b.Fatalf("AddVoter %s: %v", cfg.NodeID, err)
		}
	}
	return first
}

// kaStream is one session's KeepAlive stream and the request that
// renews the session; batch numbers go on across runs.
type kaStream struct {
	ka    grantorpb.Grantor_KeepAliveClient
	req   *grantorpb.KeepAliveRequest
	batch uint64
}

// keepAliveStreams opens 16 sessions of 10 leases each, and a KeepAlive
// stream for each, closed when the benchmark ends.
func keepAliveStreams(b *testing.B, c grantorpb.GrantorClient) []*kaStream {
	const streams, perSession = 16, 10
	var all []*kaStream
	for s := range streams {
		session := fmt.Sprintf("ka-%d", s)
		var tokens []uint64
		for i := range perSession {
			a, err := c.Acquire(b.Context(), &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: session, Seq: uint64(i + 1)},
				Lease: fmt.Sprintf("bench/%s/%03d", session, i), Owner: "o", TtlNs: int64(time.Hour)})
			if err != nil || !a.Granted {
				b.Fatalf("acquire: %v %v", a, err)
			}
			tokens = append(tokens, a.Token)
		}
		ka, err := c.KeepAlive(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { ka.CloseSend() })
		all = append(all, &kaStream{ka: ka, req: &grantorpb.KeepAliveRequest{Session: session, Sessions: []*grantorpb.SessionRenewal{
			{Session: session, TtlNs: int64(time.Hour), LeaseSetVersion: grantorpb.LeaseSetDigest(tokens)}}}})
	}
	return all
}

// benchKeepAlives sends keepalives on every stream at once, one in flight
// per stream, each checked.
func benchKeepAlives(b *testing.B, n *running, all []*kaStream) {
	var next atomic.Int64
	b.SetParallelism((len(all) + 1) / 2) // GOMAXPROCS is 2 here: one goroutine per stream
	verifies := n.lessor.metrics.verifyOK.Load()
	cpu := cpuMeter(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1) - 1)
		if i >= len(all) {
			b.Errorf("%d goroutines for %d streams", i+1, len(all))
			return
		}
		s := all[i]
		for pb.Next() {
			s.batch++
			s.req.Batch = s.batch
			if err := s.ka.Send(s.req); err != nil {
				b.Error(err)
				return
			}
			resp, err := s.ka.Recv()
			if err != nil || resp.Batch != s.batch || len(resp.Sessions) != 1 || !resp.Sessions[0].Renewed || resp.Sessions[0].Listed {
				b.Errorf("keepalive: %v %v", resp, err)
				return
			}
		}
	})
	cpu()
	b.ReportMetric(float64(n.lessor.metrics.verifyOK.Load()-verifies)/float64(b.N), "verifies/op")
}
