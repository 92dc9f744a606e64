package grantor

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// A request over MaxRecvMsgSize is refused with RESOURCE_EXHAUSTED before
// any handler sees it, and the node goes on serving.
func TestRequestSizeLimit(t *testing.T) {
	cfg := fastConfig(t, t.TempDir())
	cfg.MaxRecvMsgSize = 16 << 10
	n := start(t, cfg, true)
	ka, err := n.client.KeepAlive(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	req := &grantorpb.KeepAliveRequest{Session: "s1", Batch: 1}
	for i := range 2000 { // about 50 KB
		req.Leases = append(req.Leases, &grantorpb.LeaseRef{Lease: fmt.Sprintf("jobs/lease-%06d", i), Token: 1})
	}
	if err := ka.Send(req); err != nil {
		t.Fatal(err)
	}
	if _, err := ka.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a keepalive of 50 KB with a limit of 16 KiB: %v, want ResourceExhausted", err)
	}
	if a := mustAcquire(t, n.client, acqReq("s1", 1, "jobs/after")); !a.Granted {
		t.Fatalf("acquire after the refusal: %v", a)
	}
}
