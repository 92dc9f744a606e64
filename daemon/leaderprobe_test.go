package daemon

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// membersGrantor answers Members only, for a cluster whose leader is
// "leader": as a grantor of version 15 when leaderOnly, else as an older
// one that ignores MembersRequest.leader_only and lists every member
// (the grantors, then sidecars of them).
type membersGrantor struct {
	grantorpb.UnimplementedGrantorServer
	id         string
	leaderAddr string
	leaderOnly bool
	sidecars   int
	// askedFull counts the Members calls without leader_only.
	askedFull atomic.Int64
}

func (g *membersGrantor) Members(ctx context.Context, req *grantorpb.MembersRequest) (*grantorpb.MembersResponse, error) {
	if !req.GetLeaderOnly() {
		g.askedFull.Add(1)
	}
	resp := &grantorpb.MembersResponse{LeaderId: "leader", AnsweredBy: g.id, Members: []*grantorpb.Member{
		{Name: "leader", Role: "grantor", NodeId: "leader", RpcAddr: g.leaderAddr, RaftState: "leader", Voter: true},
	}}
	if g.id != "leader" {
		resp.Members = append(resp.Members, &grantorpb.Member{Name: g.id, Role: "grantor", NodeId: g.id, RaftState: "follower", Voter: true})
	}
	if g.leaderOnly && req.GetLeaderOnly() {
		return resp, nil
	}
	for i := range g.sidecars {
		resp.Members = append(resp.Members, &grantorpb.Member{Name: fmt.Sprintf("web-%05d.example.net", i), Role: "sidecar", GossipState: "alive"})
	}
	return resp, nil
}

// serveMembers serves g on a loopback port until the test ends.
func serveMembers(t *testing.T, g *membersGrantor) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	grantorpb.RegisterGrantorServer(s, g)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}

// Issue 21 (remainder): the sidecar's leader probe asks Members with
// leader_only, whose answer stays small however many sidecars gossip
// lists (a full one past about 54,000 is refused), and still finds the
// leader through a follower: at a grantor of version 15, and at an older
// one that ignores the field and lists everyone.
func TestLeaderProbeAsksLeaderOnly(t *testing.T) {
	for _, tc := range []struct {
		name       string
		leaderOnly bool
	}{
		{name: "version 15 grantors", leaderOnly: true},
		{name: "older grantors list everyone", leaderOnly: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leader := &membersGrantor{id: "leader", leaderOnly: tc.leaderOnly, sidecars: 1000}
			leaderAddr := serveMembers(t, leader)
			leader.leaderAddr = leaderAddr
			follower := &membersGrantor{id: "follower", leaderAddr: leaderAddr, leaderOnly: tc.leaderOnly, sidecars: 1000}
			followerAddr := serveMembers(t, follower)

			g, err := newGrantorConn([]string{followerAddr})
			if err != nil {
				t.Fatal(err)
			}
			defer g.close()
			g.creds = insecure.NewCredentials()
			g.confirmAfter = 10 * time.Second
			if err := g.probeLeader(ctxT(t)); err == nil {
				t.Fatal("the follower's answer was taken for a leader's")
			}
			if _, addr, err := g.client(); err != nil || addr != leaderAddr {
				t.Fatalf("after the follower's answer the sidecar asks %q (%v), want the leader at %s", addr, err, leaderAddr)
			}
			if err := g.probeLeader(ctxT(t)); err != nil {
				t.Fatalf("probe of the leader: %v", err)
			}
			if n := leader.askedFull.Load() + follower.askedFull.Load(); n != 0 {
				t.Errorf("%d leader probes asked for the full member list, want none", n)
			}
		})
	}
}
