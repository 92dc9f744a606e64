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
// every node) per message; verifies/op the verify rounds of every node per
// message; retries/op the messages sent again on a new stream to the
// leader after leadership moved (a loaded machine misses heartbeats at
// three nodes), as a sidecar does; -cpuprofile tells the parts apart:
//
//	go test -run '^$' -bench BenchmarkKeepAliveSessions -count 5 ./grantor
func BenchmarkKeepAliveSessions(b *testing.B) {
	for _, size := range []int{1, 3} {
		// One cluster and one set of streams for every round of b.N: only
		// messages are measured.
		nodes := startBenchCluster(b, size)
		streams := keepAliveStreams(b, nodes)
		b.Run(fmt.Sprintf("nodes=%d", size), func(b *testing.B) {
			benchKeepAlives(b, nodes, streams)
		})
		for _, s := range streams {
			s.ka.CloseSend()
		}
		for _, n := range nodes {
			n.stop() // not beside the next size's cluster
		}
	}
}

// startBenchCluster starts size nodes with raft's default timings, the
// first of them the leader once it serves.
func startBenchCluster(b *testing.B, size int) []*running {
	var nodes []*running
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
		nodes = append(nodes, n)
		if i == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(b.Context(), waitTimeout)
		err := nodes[0].AddVoter(ctx, cfg.NodeID, n.RaftAddr())
		cancel()
		if err != nil {
			b.Fatalf("AddVoter %s: %v", cfg.NodeID, err)
		}
	}
	return nodes
}

// awaitLeader returns the node in office, waiting (at most waitTimeout)
// until one is.
func awaitLeader(nodes []*running) (*running, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ready := make(chan *running, len(nodes))
	for _, n := range nodes {
		go func() {
			if n.WaitReady(ctx) == nil {
				ready <- n
			}
		}()
	}
	select {
	case n := <-ready:
		return n, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("no leader in office within %v", waitTimeout)
	}
}

// kaStream is one session's KeepAlive stream (to the leader it last
// found) and the request that renews the session; batch numbers go on
// across runs.
type kaStream struct {
	ka      grantorpb.Grantor_KeepAliveClient
	req     *grantorpb.KeepAliveRequest
	batch   uint64
	retries int
}

// keepAliveStreams opens 16 sessions of 10 leases each, and a KeepAlive
// stream for each to the leader.
func keepAliveStreams(b *testing.B, nodes []*running) []*kaStream {
	const streams, perSession = 16, 10
	var all []*kaStream
	for s := range streams {
		session := fmt.Sprintf("ka-%d", s)
		var tokens []uint64
		for i := range perSession {
			req := &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: session, Seq: uint64(i + 1)},
				Lease: fmt.Sprintf("bench/%s/%03d", session, i), Owner: "o", TtlNs: int64(time.Hour)}
			a, err := acquireAtLeader(nodes, req)
			if err != nil || !a.Granted {
				b.Fatalf("acquire: %v %v", a, err)
			}
			tokens = append(tokens, a.Token)
		}
		k := &kaStream{req: &grantorpb.KeepAliveRequest{Session: session, Sessions: []*grantorpb.SessionRenewal{
			{Session: session, TtlNs: int64(time.Hour), LeaseSetVersion: grantorpb.LeaseSetDigest(tokens)}}}}
		if err := k.open(nodes); err != nil {
			b.Fatal(err)
		}
		all = append(all, k)
	}
	return all
}

// acquireAtLeader sends req to the leader, and again (the same request
// id: the grantors answer a retry as the first) to the next leader while
// the one it found is no longer in office.
func acquireAtLeader(nodes []*running, req *grantorpb.AcquireRequest) (*grantorpb.AcquireResponse, error) {
	for try := 0; ; try++ {
		leader, err := awaitLeader(nodes)
		if err != nil {
			return nil, err
		}
		a, err := leader.client.Acquire(context.Background(), req)
		if err == nil || try == 10 {
			return a, err
		}
	}
}

// open opens the session's stream to the node in office.
func (k *kaStream) open(nodes []*running) error {
	leader, err := awaitLeader(nodes)
	if err != nil {
		return err
	}
	ka, err := leader.client.KeepAlive(context.Background())
	if err != nil {
		return err
	}
	k.ka = ka
	return nil
}

// renew sends one keepalive and checks its answer. A stream that fails
// (the grantor ends it once it leaves office) is replaced by one to the
// leader in office and the message sent again, at most 10 times.
func (k *kaStream) renew(nodes []*running) error {
	k.batch++
	k.req.Batch = k.batch
	for try := 0; ; try++ {
		resp, err := k.exchange()
		if err == nil {
			if resp.Batch != k.batch || len(resp.Sessions) != 1 || !resp.Sessions[0].Renewed || resp.Sessions[0].Listed {
				return fmt.Errorf("keepalive: %v", resp)
			}
			return nil
		}
		if try == 10 {
			return fmt.Errorf("keepalive, after %d new streams: %w", try, err)
		}
		k.ka.CloseSend()
		if err := k.open(nodes); err != nil {
			return err
		}
		k.retries++
	}
}

// exchange sends the request on the current stream and reads its answer.
func (k *kaStream) exchange() (*grantorpb.KeepAliveResponse, error) {
	if err := k.ka.Send(k.req); err != nil {
		// The stream's end, io.EOF here, is told by Recv.
		if _, rerr := k.ka.Recv(); rerr != nil {
			return nil, rerr
		}
		return nil, err
	}
	return k.ka.Recv()
}

// benchKeepAlives sends keepalives on every stream at once, one in flight
// per stream, each checked.
func benchKeepAlives(b *testing.B, nodes []*running, all []*kaStream) {
	var next atomic.Int64
	b.SetParallelism((len(all) + 1) / 2) // GOMAXPROCS is 2 here: one goroutine per stream
	verifiesOK := func() (sum uint64) {
		for _, n := range nodes {
			sum += n.lessor.metrics.verifyOK.Load()
		}
		return sum
	}
	retries := func() (sum int) {
		for _, s := range all {
			sum += s.retries
		}
		return sum
	}
	verifies, retried := verifiesOK(), retries()
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
			if err := s.renew(nodes); err != nil {
				b.Error(err)
				return
			}
		}
	})
	cpu()
	b.ReportMetric(float64(verifiesOK()-verifies)/float64(b.N), "verifies/op")
	b.ReportMetric(float64(retries()-retried)/float64(b.N), "retries/op")
}
