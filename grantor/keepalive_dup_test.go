package grantor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// Review of 2026-12-03 (lane review, finding K1): a keepalive could name
// one session up to maxKeepAliveSessions (1,024) times, each with a digest
// that does not match, and the leader listed every grant of the session
// once for each, under the lessor's mutex and the FSM's read lock: a
// 50 KB request of one sidecar certificate holding its 8,192 leases of
// 256-byte names made an answer of 8.4 million grants (over 2 GB), and 8
// of them in flight on each stream. A keepalive naming a session twice is
// now refused (INVALID_ARGUMENT) before it reaches the lessor.
func TestKeepAliveNamingASessionTwiceIsRefused(t *testing.T) {
	n := start(t, fastConfig(t, t.TempDir()), true)
	c := n.client
	const leases = 200
	for i := range leases {
		seq := uint64(i + 1)
		req := acqReq("s1", seq, fmt.Sprintf("dup/%03d/%s", i, strings.Repeat("x", 200)))
		req.Id.FirstUnacked = seq
		req.TtlNs = int64(time.Hour) // renewed only at the end: held for the whole test, however slow
		if r := mustAcquire(t, c, req); !r.Granted {
			t.Fatalf("acquire %d: %v", i, r)
		}
	}
	ka, err := c.KeepAlive(tctx(t), grpc.MaxCallRecvMsgSize(1<<30))
	if err != nil {
		t.Fatal(err)
	}
	defer ka.CloseSend()
	req := &grantorpb.KeepAliveRequest{Session: "s1", Batch: 1}
	for range maxKeepAliveSessions {
		req.Sessions = append(req.Sessions, &grantorpb.SessionRenewal{Session: "s1", TtlNs: int64(10 * time.Second), LeaseSetVersion: 1})
	}
	if err := ka.Send(req); err != nil {
		t.Fatal(err)
	}
	resp, err := ka.Recv()
	if err == nil {
		listed := 0
		for _, s := range resp.Sessions {
			listed += len(s.Leases)
		}
		t.Fatalf("a keepalive of %d bytes naming one session %d times was answered with %d bytes listing %d grants",
			proto.Size(req), len(req.Sessions), proto.Size(resp), listed)
	}
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("keepalive naming a session twice: %v, want INVALID_ARGUMENT naming the repeat", err)
	}

	// A keepalive naming it once still renews and lists.
	ka2, err := c.KeepAlive(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ka2.CloseSend()
	if err := ka2.Send(&grantorpb.KeepAliveRequest{Session: "s1", Batch: 1, Sessions: []*grantorpb.SessionRenewal{
		{Session: "s1", TtlNs: int64(10 * time.Second), LeaseSetVersion: 1}, {Session: "s2", TtlNs: int64(10 * time.Second)}}}); err != nil {
		t.Fatal(err)
	}
	r, err := ka2.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Sessions) != 2 || !r.Sessions[0].Renewed || !r.Sessions[0].Listed || len(r.Sessions[0].Leases) != leases {
		t.Fatalf("keepalive of s1 and s2: %v", r.Sessions)
	}
}
