package attack

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// fakeGrantor grants, releases and renews everything while it leads;
// once told the leader's address (follow), it answers every call
// NotLeader naming it, as a grantor that lost an election does.
type fakeGrantor struct {
	grantorpb.UnimplementedGrantorServer
	mu     sync.Mutex
	leader string // "" while it leads
	// served hears of each call it answered as the leader, while it has
	// room.
	served chan string
}

func (g *fakeGrantor) follow(leader string) {
	g.mu.Lock()
	g.leader = leader
	g.mu.Unlock()
}

// lead returns NotLeader unless g leads, and notes the call otherwise.
func (g *fakeGrantor) lead(call string) error {
	g.mu.Lock()
	leader := g.leader
	g.mu.Unlock()
	if leader != "" {
		st, _ := status.New(codes.FailedPrecondition, "grantor: not the leader").WithDetails(&grantorpb.NotLeader{LeaderRpcAddr: leader})
		return st.Err()
	}
	select {
	case g.served <- call:
	default:
	}
	return nil
}

func (g *fakeGrantor) Acquire(ctx context.Context, req *grantorpb.AcquireRequest) (*grantorpb.AcquireResponse, error) {
	if err := g.lead("acquire"); err != nil {
		return nil, err
	}
	return &grantorpb.AcquireResponse{Granted: true, Token: req.GetId().GetSeq()}, nil
}

func (g *fakeGrantor) Release(ctx context.Context, req *grantorpb.ReleaseRequest) (*grantorpb.ReleaseResponse, error) {
	if err := g.lead("release"); err != nil {
		return nil, err
	}
	return &grantorpb.ReleaseResponse{Released: true}, nil
}

func (g *fakeGrantor) KeepAlive(s grpc.BidiStreamingServer[grantorpb.KeepAliveRequest, grantorpb.KeepAliveResponse]) error {
	for {
		req, err := s.Recv()
		if err != nil {
			return err
		}
		if err := g.lead("renewal"); err != nil {
			return err // the stream ends, as a grantor's that leaves office
		}
		resp := &grantorpb.KeepAliveResponse{Batch: req.GetBatch()}
		for _, r := range req.GetSessions() {
			resp.Sessions = append(resp.Sessions, &grantorpb.SessionRenewed{Session: r.GetSession(), Renewed: true, TtlNs: r.GetTtlNs(), LeaseSetVersion: r.GetLeaseSetVersion()})
		}
		if err := s.Send(resp); err != nil {
			return err
		}
	}
}

func serveFake(t *testing.T) (*fakeGrantor, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &fakeGrantor{served: make(chan string, 1024)}
	s := grpc.NewServer()
	grantorpb.RegisterGrantorServer(s, g)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return g, ln.Addr().String()
}

// TestOperatorFloods failed once beside CPU hogs (load 31 on 2 cores):
// the leader lost an election during the flood, and the victim, which
// only ever called the first leader, failed with "not the leader". A
// sidecar follows the leader a NotLeader answer names and asks again
// with the same request id; the victim now does too.
func TestVictimFollowsTheLeader(t *testing.T) {
	first, firstAddr := serveFake(t)
	second, secondAddr := serveFake(t)
	var (
		mu    sync.Mutex
		conns []*grpc.ClientConn
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	dial := func(addr string) (grantorpb.GrantorClient, error) {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		return grantorpb.NewGrantorClient(c), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stats := Victim(ctx, dial, firstAddr, "victim", 300*time.Millisecond, 20*time.Millisecond)
	await := func(g *fakeGrantor, want map[string]bool) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for len(want) > 0 {
			select {
			case call := <-g.served:
				delete(want, call)
			case <-deadline:
				t.Fatalf("calls %v never answered", want)
			}
		}
	}
	await(first, map[string]bool{"acquire": true, "release": true, "renewal": true})
	first.follow(secondAddr)
	await(second, map[string]bool{"acquire": true, "release": true, "renewal": true})
	cancel()
	st := <-stats
	if len(st.Failures) > 0 || st.LeaderMoves != 1 {
		t.Errorf("victim: %d leader moves followed, failures %v; want 1 and none", st.LeaderMoves, st.Failures)
	}
}
