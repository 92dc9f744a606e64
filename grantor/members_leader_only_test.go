package grantor

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// Issue 21 (remainder): a Members answer lists every gossip member, about
// 77 bytes a sidecar, so past about 54,000 sidecars it is larger than the
// default queued_bytes (4 MiB) and refused to every caller, the sidecars'
// leader probe included. A leader-only answer lists the leader and the
// answering grantor alone, whatever the number of members.
func TestLeaderOnlyMembersStaySmall(t *testing.T) {
	n := start(t, fastConfig(t, t.TempDir()), true)
	const sidecars = 60_000
	ms := make([]gossip.MemberInfo, 0, sidecars+2)
	// An old run of this grantor that gossip still lists dead, then its
	// alive run: only the alive one stands for it.
	for i, state := range []string{gossip.StateDead, gossip.StateAlive} {
		ms = append(ms, gossip.MemberInfo{Name: fmt.Sprintf("n1-run%d", i), Addr: "127.0.0.1:7946", State: state,
			Meta: gossip.Meta{Role: gossip.RoleGrantor, NodeID: "n1", RPCAddr: n.RPCAddr(), RaftAddr: n.RaftAddr(), Version: "test"}})
	}
	for i := range sidecars {
		ms = append(ms, gossip.MemberInfo{Name: fmt.Sprintf("web-%05d.example.net", i), Addr: fmt.Sprintf("10.0.%d.%d:7946", i/256%256, i%256),
			State: gossip.StateAlive, Meta: gossip.Meta{Role: gossip.RoleSidecar, Version: "test"}})
	}
	full := n.membersFrom(ms, false)
	only := n.membersFrom(ms, true)
	fullSize, onlySize := proto.Size(full), proto.Size(only)
	t.Logf("%d sidecars: full answer %d bytes, leader-only %d bytes", sidecars, fullSize, onlySize)
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
}

// From a follower, a leader-only answer holds the leader's entry and the
// follower's own, as the full answer gives them, and no sidecar; from the
// leader, its own entry alone. Real gossip, raft and gRPC.
func TestLeaderOnlyMembersOverGossip(t *testing.T) {
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
