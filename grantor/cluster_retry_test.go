package grantor

import (
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// Rule: requests are idempotent. On a real 3-node cluster, an Acquire
// whose reply was lost and is sent again, to the same leader and then to a
// new leader after the first is killed, grants once: the same token each
// time, and the token counter moves only once.
func TestClusterRetriedAcquireGrantsOnce(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader()
	req := &grantorpb.AcquireRequest{
		Id:    &grantorpb.RequestID{Session: "retrier", Seq: 1, FirstUnacked: 1},
		Lease: "jobs/once", Owner: "o", TtlNs: int64(time.Minute),
	}
	first, err := c.nodes[l].client.Acquire(tctx(t), req)
	if err != nil || !first.Granted {
		t.Fatalf("acquire: %v %v", first, err)
	}
	// The reply is "lost": the sidecar sends the very same request again.
	again, err := c.nodes[l].client.Acquire(tctx(t), req)
	if err != nil || !again.Granted || again.Token != first.Token {
		t.Fatalf("retry to the same leader: %v %v, want granted with token %d", again, err, first.Token)
	}
	other := func(lease string, seq uint64) uint64 {
		t.Helper()
		r, err := c.nodes[c.leader()].client.Acquire(tctx(t), &grantorpb.AcquireRequest{
			Id:    &grantorpb.RequestID{Session: "other", Seq: seq, FirstUnacked: seq},
			Lease: lease, Owner: "p", TtlNs: int64(time.Minute)})
		if err != nil || !r.Granted {
			t.Fatalf("acquire %s: %v %v", lease, r, err)
		}
		return r.Token
	}
	if tok := other("jobs/next", 1); tok != first.Token+1 {
		t.Fatalf("next grant has token %d, want %d: the retry moved the counter", tok, first.Token+1)
	}

	c.kill(l)
	nl := c.leader()
	retried, err := c.nodes[nl].client.Acquire(tctx(t), req)
	if err != nil || !retried.Granted || retried.Token != first.Token {
		t.Fatalf("retry to the new leader: %v %v, want granted with token %d", retried, err, first.Token)
	}
	if tok := other("jobs/after", 2); tok != first.Token+2 {
		t.Fatalf("grant after the failover has token %d, want %d", tok, first.Token+2)
	}
}
