package grantor

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// Version 6 of the contract on a real node: semaphores and values through
// Acquire, Proclaim, a Watch stream that sees every change in order, and
// CheckToken.
func TestNodePrimitivesOverGRPC(t *testing.T) {
	n := start(t, fastConfig(t, t.TempDir()), true)
	c := n.client
	ws, err := c.Watch(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseSend()
	if err := ws.Send(&grantorpb.WatchRequest{Add: []string{"sem", "leader"}}); err != nil {
		t.Fatal(err)
	}
	next := func(want grantorpb.WatchEvent_Kind, lease string) *grantorpb.WatchEvent {
		t.Helper()
		ev, err := ws.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind != want || ev.Lease != lease {
			t.Fatalf("got %v, want %v of %s", ev, want, lease)
		}
		return ev
	}
	next(grantorpb.WatchEvent_SNAPSHOT, "sem")
	next(grantorpb.WatchEvent_SNAPSHOT, "leader")

	sem := func(session string) *grantorpb.AcquireResponse {
		req := acqReq(session, 1, "sem")
		req.Limit = 2
		return mustAcquire(t, c, req)
	}
	a, b := sem("a"), sem("b")
	if !a.Granted || !b.Granted || b.Token <= a.Token || b.Limit != 2 || b.Holders != 2 {
		t.Fatalf("semaphore grants %v %v", a, b)
	}
	if r := sem("c"); r.Granted || r.Holders != 2 {
		t.Fatalf("third holder of 2: %v", r)
	}
	next(grantorpb.WatchEvent_ACQUIRED, "sem")
	if ev := next(grantorpb.WatchEvent_ACQUIRED, "sem"); len(ev.Holders) != 2 || ev.Limit != 2 || ev.Token != b.Token {
		t.Fatalf("second acquired: %v", ev)
	}
	excl := acqReq("a", 2, "sem")
	if _, err := c.Acquire(tctx(t), excl); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("exclusive acquire of a semaphore: %v", err)
	}

	elect := acqReq("e", 1, "leader")
	elect.Value = "10.0.0.1:8080"
	g := mustAcquire(t, c, elect)
	if ev := next(grantorpb.WatchEvent_ACQUIRED, "leader"); ev.Value != "10.0.0.1:8080" || ev.Token != g.Token {
		t.Fatalf("elected: %v", ev)
	}
	pr, err := c.Proclaim(tctx(t), &grantorpb.ProclaimRequest{Id: &grantorpb.RequestID{Session: "e", Seq: 2}, Lease: "leader", Owner: "o", Token: g.Token, Value: "10.0.0.1:9090"})
	if err != nil || !pr.Proclaimed {
		t.Fatalf("proclaim: %v %v", pr, err)
	}
	if ev := next(grantorpb.WatchEvent_PROCLAIMED, "leader"); ev.Value != "10.0.0.1:9090" || ev.Holders[0].Value != "10.0.0.1:9090" {
		t.Fatalf("proclaimed: %v", ev)
	}
	bad := &grantorpb.ProclaimRequest{Id: &grantorpb.RequestID{Session: "e", Seq: 3}, Lease: "leader", Owner: "o", Token: g.Token, Value: "a\nb"}
	if _, err := c.Proclaim(tctx(t), bad); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a value with a newline: %v", err)
	}

	for _, tc := range []struct {
		token uint64
		live  bool
	}{{g.Token, true}, {a.Token, false}} {
		r, err := c.CheckToken(tctx(t), &grantorpb.CheckTokenRequest{Lease: "leader", Token: tc.token})
		if err != nil || r.Live != tc.live {
			t.Fatalf("check %d: %v %v, want live %v", tc.token, r, err, tc.live)
		}
	}

	rel, err := c.Release(tctx(t), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: "a", Seq: 3}, Lease: "sem", Owner: "o", Token: a.Token})
	if err != nil || !rel.Released {
		t.Fatalf("release: %v %v", rel, err)
	}
	if ev := next(grantorpb.WatchEvent_RELEASED, "sem"); ev.Token != a.Token || len(ev.Holders) != 1 || ev.Holders[0].Token != b.Token || ev.HolderName != "insecure" {
		t.Fatalf("released: %v", ev)
	}
	if err := ws.Send(&grantorpb.WatchRequest{Add: []string{"bad/../name"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a bad name on the watch stream: %v", err)
	}
}
