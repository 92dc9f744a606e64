package grantor

import (
	"context"
	"fmt"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// Issue 21 (remainder): a Members answer lists every gossip member, about
// 77 bytes a sidecar, so past about 54,000 sidecars it is larger than the
// default queued_bytes (4 MiB) and refused to every caller, the sidecars'
// leader probe and the grantors asking each other included. A leader-only
// answer lists the leader and the answering grantor alone, a
// servers-only one the servers of the raft configuration, whatever the
// number of members.
func TestScopedMembersStaySmall(t *testing.T) {
	n := start(t, fastConfig(t, t.TempDir()), true)
	const sidecars = 60_000
	ms := make([]gossip.MemberInfo, 0, sidecars+2)
	// An old run of this grantor that gossip still lists dead, then its
	// alive run: only the alive one stands for it.
	for i, state := range []string{gossip.StateDead, gossip.StateAlive} {
		ms = append(ms, gossip.MemberInfo{Name: fmt.Sprintf("n1-run%d", i), Addr: "127.0.0.1:7946", State: state,
			Meta: gossip.Meta{Role: gossip.RoleGrantor, NodeID: "n1", RPCAddr: n.RPCAddr(), RaftAddr: n.RaftAddr(), Version: "test"}})
	}
	// A grantor gossip lists that is no server of the configuration.
	ms = append(ms, gossip.MemberInfo{Name: "n9", Addr: "127.0.0.9:7946", State: gossip.StateAlive,
		Meta: gossip.Meta{Role: gossip.RoleGrantor, NodeID: "n9", RPCAddr: "127.0.0.9:7947", RaftAddr: "127.0.0.9:7948", Version: "test"}})
	for i := range sidecars {
		ms = append(ms, gossip.MemberInfo{Name: fmt.Sprintf("web-%05d.example.net", i), Addr: fmt.Sprintf("10.0.%d.%d:7946", i/256%256, i%256),
			State: gossip.StateAlive, Meta: gossip.Meta{Role: gossip.RoleSidecar, Version: "test"}})
	}
	full := n.membersFrom(ms, scopeAll)
	only := n.membersFrom(ms, scopeLeader)
	servers := n.membersFrom(ms, scopeServers)
	fullSize, onlySize, serversSize := proto.Size(full), proto.Size(only), proto.Size(servers)
	t.Logf("%d sidecars: full answer %d bytes, leader-only %d bytes, servers-only %d bytes", sidecars, fullSize, onlySize, serversSize)
	if fullSize <= DefaultLimits().QueuedBytes {
		t.Errorf("full answer %d bytes, want more than queued_bytes (%d) for the test to mean anything", fullSize, DefaultLimits().QueuedBytes)
	}
	if onlySize > 1024 {
		t.Errorf("leader-only answer %d bytes, want under 1 KiB", onlySize)
	}
	if only.LeaderId != "n1" || only.AnsweredBy != "n1" || len(only.Members) != 1 {
		t.Fatalf("leader-only answer = %v, want n1 leading, answering, and its one entry", only)
	}
	var alive *grantorpb.Member
	for _, m := range full.Members {
		if m.Name == "n1-run1" {
			alive = m
		}
	}
	if !proto.Equal(only.Members[0], alive) || alive.RaftState != "leader" || !alive.Voter {
		t.Errorf("leader-only entry %v, want the full answer's entry of its alive run %v", only.Members[0], alive)
	}
	// The configuration's one server, not n9 nor any sidecar.
	if serversSize > 1024 || len(servers.Members) != 1 || !proto.Equal(servers.Members[0], alive) {
		t.Errorf("servers-only answer (%d bytes) = %v, want only %v", serversSize, servers.Members, alive)
	}
}

// From a follower, a leader-only answer holds the leader's entry and the
// follower's own, as the full answer gives them, and no sidecar; from the
// leader, its own entry alone. A servers-only answer holds the three
// grantors' entries and no sidecar. Real gossip, raft and gRPC.
func TestScopedMembersOverGossip(t *testing.T) {
	c := startGossipCluster(t, 3)
	l := c.leader()
	side, err := gossip.Start(tctx(t), gossip.Config{
		Name: "side1", BindAddr: "127.0.0.1:0", Join: []string{c.seed}, Timing: gossip.LoopbackTiming(),
		Meta: gossip.Meta{Role: gossip.RoleSidecar, Version: "test"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = side.Shutdown() })
	for _, n := range c.nodes {
		waitGossip(t, n, "4 members", func() bool { return len(n.gossip.Members()) == 4 })
		if n != l {
			c.waitApplied(n, l)
		}
	}
	for _, from := range c.nodes {
		full, err := from.client.Members(tctx(t), &grantorpb.MembersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		only, err := from.client.Members(tctx(t), &grantorpb.MembersRequest{LeaderOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		servers, err := from.client.Members(tctx(t), &grantorpb.MembersRequest{ServersOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		var grantors []*grantorpb.Member
		for _, m := range full.Members {
			if m.Role == gossip.RoleGrantor {
				grantors = append(grantors, proto.Clone(m).(*grantorpb.Member))
				grantors[len(grantors)-1].LastContactMs = -1
			}
		}
		for _, m := range servers.Members {
			m.LastContactMs = -1
		}
		if servers.AnsweredBy != from.cfg.NodeID || servers.LeaderId != l.cfg.NodeID || len(servers.Members) != 3 || len(grantors) != 3 {
			t.Fatalf("servers-only Members from %s: %v, want the 3 grantors of %v", from.cfg.NodeID, servers, grantors)
		}
		for i := range grantors {
			if !proto.Equal(servers.Members[i], grantors[i]) {
				t.Errorf("servers-only Members from %s: entry %v, want %v", from.cfg.NodeID, servers.Members[i], grantors[i])
			}
		}
		if only.LeaderId != l.cfg.NodeID || only.AnsweredBy != from.cfg.NodeID {
			t.Fatalf("leader-only Members from %s: leader %q answered by %q", from.cfg.NodeID, only.LeaderId, only.AnsweredBy)
		}
		var want []*grantorpb.Member
		for _, m := range full.Members {
			if m.NodeId == l.cfg.NodeID || m.NodeId == from.cfg.NodeID {
				m.LastContactMs = -1 // changes between the two answers
				want = append(want, m)
			}
		}
		for _, m := range only.Members {
			m.LastContactMs = -1
		}
		if wantN := map[bool]int{true: 1, false: 2}[from == l]; len(want) != wantN || len(only.Members) != wantN {
			t.Fatalf("leader-only Members from %s: %v, want %d entries of %v", from.cfg.NodeID, only.Members, wantN, want)
		}
		for i := range want {
			if !proto.Equal(only.Members[i], want[i]) || want[i].RpcAddr == "" {
				t.Errorf("leader-only Members from %s: entry %v, want %v", from.cfg.NodeID, only.Members[i], want[i])
			}
		}
	}
}

// membersGrantor records the Members requests it answers (as the only
// server of its configuration, leading).
type membersGrantor struct {
	grantorpb.UnimplementedGrantorServer
	asked chan *grantorpb.MembersRequest
}

func (g *membersGrantor) Members(ctx context.Context, req *grantorpb.MembersRequest) (*grantorpb.MembersResponse, error) {
	g.asked <- req
	return &grantorpb.MembersResponse{LeaderId: "g1", AnsweredBy: "g1", Members: []*grantorpb.Member{
		{Name: "g1", Role: gossip.RoleGrantor, NodeId: "g1", Voter: true, RaftState: "leader"},
	}}, nil
}

// What grantors ask each other (retirement, self-removal, seed voters,
// bootstrap-expect: membersOf) is the servers of the configuration, not
// every sidecar: a full answer past about 54,000 sidecars is refused.
func TestGrantorsAskEachOtherForServersOnly(t *testing.T) {
	n := start(t, fastConfig(t, t.TempDir()), true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &membersGrantor{asked: make(chan *grantorpb.MembersRequest, 1)}
	s := grpc.NewServer()
	grantorpb.RegisterGrantorServer(s, g)
	go s.Serve(ln)
	defer s.Stop()
	resp, err := n.membersOf(tctx(t), "g1", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if req := <-g.asked; !req.GetServersOnly() {
		t.Errorf("membersOf asked %v, want servers_only", req)
	}
	if v, ok := answerVoters("g1", resp); !ok || len(v) != 1 || !membersList(resp, "g1") {
		t.Errorf("the answer %v reads as voters %v (%v), listing g1 %v", resp, v, ok, membersList(resp, "g1"))
	}
}
