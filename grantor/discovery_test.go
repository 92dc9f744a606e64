package grantor

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// gossipCluster is grantors with real gossip on 127.0.0.1:0 and real raft
// on loopback TCP, brought up with BootstrapExpect.
type gossipCluster struct {
	t      *testing.T
	nodes  []*running
	events map[*running]*eventLog
	seed   string // the first node's gossip address
}

func testLogger(t *testing.T, id string) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", id)
	}
	return slog.New(slog.DiscardHandler)
}

// gossipConfig is a node config with gossip on loopback, joining seed.
func gossipConfig(t *testing.T, id string, expect int, seed string) Config {
	cfg := DefaultConfig()
	cfg.NodeID = id
	cfg.DataDir = t.TempDir()
	cfg.BootstrapExpect = expect
	cfg.Logger = testLogger(t, id)
	cfg.ReconcileInterval = time.Second
	g := &gossip.Config{
		BindAddr:         "127.0.0.1:0",
		Timing:           gossip.LoopbackTiming(),
		BroadcastTimeout: 2 * time.Second,
		Meta:             gossip.Meta{Version: "test"},
	}
	if seed != "" {
		g.Join = []string{seed}
	}
	cfg.Gossip = g
	return cfg
}

// startGossipCluster starts size grantors with BootstrapExpect size and
// waits until one of them is in office.
func startGossipCluster(t *testing.T, size int) *gossipCluster {
	t.Helper()
	c := &gossipCluster{t: t, events: map[*running]*eventLog{}}
	for i := range size {
		n := c.add(fmt.Sprintf("g%d", i+1), size)
		if i == 0 {
			c.seed = n.GossipAddr()
		}
	}
	c.leader()
	return c
}

// add starts another grantor that joins through the seed; opts change its
// config first.
func (c *gossipCluster) add(id string, expect int, opts ...func(*Config)) *running {
	ev := newEventLog()
	cfg := gossipConfig(c.t, id, expect, c.seed)
	for _, o := range opts {
		o(&cfg)
	}
	n := start(c.t, cfg, false, func(n *Node) { n.lessor.hook = ev.add })
	c.events[n] = ev
	c.nodes = append(c.nodes, n)
	return n
}

// waitApplied waits until n has applied the registration of leader's
// gRPC address, which the leader proposes on taking office: n then has
// the leader's log up to it, configuration included.
func (c *gossipCluster) waitApplied(n, leader *running) {
	c.t.Helper()
	c.events[n].wait(c.t, 0, n.cfg.NodeID+" applied "+leader.cfg.NodeID+"'s registration", func(e testEvent) bool {
		return e.what == "registered" && e.lease == leader.cfg.NodeID
	})
}

// leader waits until a running node is in office and returns it.
func (c *gossipCluster) leader() *running {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ready := make(chan *running, len(c.nodes))
	for _, n := range c.nodes {
		go func() {
			if n.WaitReady(ctx) == nil {
				ready <- n
			}
		}()
	}
	select {
	case n := <-ready:
		return n
	case <-ctx.Done():
		c.t.Fatal("no grantor took office")
	}
	return nil
}

// servers returns the raft configuration n knows, as "id=suffrage".
func servers(n *running) []string {
	var out []string
	for _, s := range n.raft.GetConfiguration().Configuration().Servers {
		out = append(out, fmt.Sprintf("%s=%v", s.ID, s.Suffrage))
	}
	slices.Sort(out)
	return out
}

// waitRaft waits, on raft events of the given nodes, until cond holds:
// their raft observations (leader and peer changes) and the answers they
// get from other servers while they lead (which a promotion follows).
func waitRaft(t *testing.T, what string, cond func() bool, nodes ...*running) {
	t.Helper()
	ch := make(chan raft.Observation, 64)
	for _, n := range nodes {
		obs := raft.NewObserver(ch, false, nil)
		n.raft.RegisterObserver(obs)
		defer n.raft.DeregisterObserver(obs)
	}
	contacts := make(chan struct{}, 1)
	stop := make(chan struct{})
	defer close(stop)
	for _, n := range nodes {
		go func() {
			for {
				select {
				case <-n.trans.contacts():
					poke(contacts)
				case <-stop:
					return
				}
			}
		}()
	}
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for !cond() {
		select {
		case <-ch:
		case <-contacts:
		case <-timer.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// waitContacts waits until the leader l has heard from each of fs.
func waitContacts(t *testing.T, l *running, fs ...*running) {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		ch := l.trans.contacts()
		all := true
		for _, f := range fs {
			_, ok := l.trans.lastContact(raft.ServerID(f.cfg.NodeID))
			all = all && ok
		}
		if all {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			t.Fatal("timed out waiting for the leader to hear from its followers")
		}
	}
}

// waitGossip waits, on n's gossip changes, until cond holds.
func waitGossip(t *testing.T, n *running, what string, cond func() bool) {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		ch := n.gossip.Changes()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("%s: timed out waiting for %s; gossip: %+v", n.cfg.NodeID, what, n.gossip.Members())
		}
	}
}

func gossipState(n *running, name string) string {
	for _, in := range n.gossip.Members() {
		if in.Name == name {
			return in.State
		}
	}
	return ""
}

// BootstrapExpect: three fresh grantors that find each other in gossip
// form exactly one cluster, all three voters, and gossip its leader.
func TestBootstrapExpectFormsOneCluster(t *testing.T) {
	c := startGossipCluster(t, 3)
	l := c.leader()
	want := []string{"g1=Voter", "g2=Voter", "g3=Voter"}
	// One cluster: every node follows the same leader's log and has the
	// same three voters.
	for _, n := range c.nodes {
		c.waitApplied(n, l)
		_, id := n.raft.LeaderWithID()
		if got := servers(n); !slices.Equal(got, want) || string(id) != l.cfg.NodeID {
			t.Errorf("%s: configuration %v, leader %q; want %v and %s", n.cfg.NodeID, got, id, want, l.cfg.NodeID)
		}
	}
	for _, n := range c.nodes {
		waitGossip(t, n, "every grantor gossiping the leader", func() bool {
			for _, in := range n.gossip.Members() {
				if in.Meta.LeaderID != l.cfg.NodeID {
					return false
				}
			}
			return len(n.gossip.Members()) == 3
		})
		_, leaderRPC := n.gossip.Grantors()
		if leaderRPC != l.RPCAddr() {
			t.Errorf("%s: gossip leader %q, want %q", n.cfg.NodeID, leaderRPC, l.RPCAddr())
		}
	}
	// It serves: a grant through the leader.
	if r := mustAcquire(t, l.client, acqReq("s", 1, "a")); !r.Granted {
		t.Fatalf("acquire: %v", r)
	}
}

// Reconciliation: an alive grantor that is not in the configuration is
// added as a voter; one that left gracefully is removed; a dead one stays.
// The leader is looked up again at each step: on a busy machine it may
// change on its own, and whichever grantor leads reconciles.
func TestReconcileGossipWithRaft(t *testing.T) {
	c := startGossipCluster(t, 3)
	first := c.nodes[:3]
	c.leader()

	// A fourth grantor joins the running cluster (its bootstrap-expect
	// sees a cluster and waits to be added).
	g4 := c.add("g4", 3)
	// It is staged as a non-voter, and promoted once it answers.
	waitRaft(t, "g4 added as a voter", func() bool { return slices.Contains(leaderServers(first), "g4=Voter") }, first...)
	c.waitApplied(g4, c.leader()) // it has the cluster's log

	// g4 leaves gossip gracefully without taking itself out of raft (as
	// if its own removal had failed): the leader removes it.
	if err := g4.gossip.Leave(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	g4.stop()
	waitRaft(t, "g4 removed after leaving", func() bool {
		s := leaderServers(first)
		return s != nil && !slices.Contains(s, "g4=Voter")
	}, first...)

	// A follower dies (no leave): gossip says dead, and it stays.
	l := c.leader()
	var f *running
	for _, n := range first {
		if n != l {
			f = n
		}
	}
	f.stop()
	waitGossip(t, l, f.cfg.NodeID+" dead", func() bool { return gossipState(l, f.cfg.NodeID) == gossip.StateDead })
	l = c.leader()
	l.reconcile(tctx(t))
	if !slices.Contains(servers(l), f.cfg.NodeID+"=Voter") {
		t.Fatalf("a dead grantor was removed: %v", servers(l))
	}
	// Only an operator removes it (asking whoever leads when it asks).
	for {
		l = c.leader()
		_, err := l.client.RemoveServer(tctx(t), &grantorpb.RemoveServerRequest{NodeId: f.cfg.NodeID})
		if status.Code(err) == codes.FailedPrecondition {
			continue
		}
		if err != nil {
			t.Fatalf("RemoveServer: %v", err)
		}
		break
	}
	if got := servers(l); len(got) != 2 || slices.Contains(got, f.cfg.NodeID+"=Voter") {
		t.Fatalf("after RemoveServer: %v", got)
	}
}

// leaderServers is servers() as the node of nodes that leads now sees
// it; nil when none leads at this instant.
func leaderServers(nodes []*running) []string {
	for _, n := range nodes {
		if n.raft.State() == raft.Leader {
			return servers(n)
		}
	}
	return nil
}

// Members and RemoveServer over real gRPC.
func TestMembersAndRemoveServer(t *testing.T) {
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
	var followers []*running
	for _, n := range c.nodes {
		if n != l {
			followers = append(followers, n)
		}
	}
	for _, n := range c.nodes {
		waitGossip(t, n, "4 alive members", func() bool {
			alive := 0
			for _, in := range n.gossip.Members() {
				if in.State == gossip.StateAlive {
					alive++
				}
			}
			return alive == 4
		})
	}
	// The followers know the leader, and the leader has heard from both.
	for _, f := range followers {
		c.waitApplied(f, l)
	}
	waitContacts(t, l, followers...)

	check := func(from *running) *grantorpb.MembersResponse {
		t.Helper()
		resp, err := from.client.Members(tctx(t), &grantorpb.MembersRequest{})
		if err != nil {
			t.Fatalf("Members from %s: %v", from.cfg.NodeID, err)
		}
		if resp.LeaderId != l.cfg.NodeID || resp.AnsweredBy != from.cfg.NodeID {
			t.Fatalf("Members from %s: leader %q answered by %q", from.cfg.NodeID, resp.LeaderId, resp.AnsweredBy)
		}
		if len(resp.Members) != 4 {
			t.Fatalf("Members from %s: %v", from.cfg.NodeID, resp.Members)
		}
		for i, m := range resp.Members[:3] {
			n := c.nodes[i]
			wantState := "follower"
			if n == l {
				wantState = "leader"
			}
			if m.Role != gossip.RoleGrantor || m.NodeId != n.cfg.NodeID || m.Name != n.cfg.NodeID || !m.Voter ||
				m.RaftState != wantState || m.GossipState != gossip.StateAlive || m.RpcAddr != n.RPCAddr() ||
				m.RaftAddr != n.RaftAddr() || m.GossipAddr != n.GossipAddr() || m.Version != "test" {
				t.Errorf("Members from %s: member %d = %v", from.cfg.NodeID, i, m)
			}
			switch {
			case from != l || n == l:
				if m.LastContactMs != -1 {
					t.Errorf("Members from %s: last contact of %s = %d, want -1", from.cfg.NodeID, n.cfg.NodeID, m.LastContactMs)
				}
			case m.LastContactMs < 0 || m.LastContactMs > waitTimeout.Milliseconds():
				t.Errorf("leader's last contact with %s = %dms", n.cfg.NodeID, m.LastContactMs)
			}
		}
		if s := resp.Members[3]; s.Role != gossip.RoleSidecar || s.Name != "side1" || s.GossipState != gossip.StateAlive || s.Voter || s.RaftState != "" || s.NodeId != "" {
			t.Errorf("Members from %s: sidecar = %v", from.cfg.NodeID, s)
		}
		return resp
	}
	check(l)
	check(followers[0])

	// RemoveServer: only the leader answers; unknown IDs are NotFound.
	_, err = followers[0].client.RemoveServer(tctx(t), &grantorpb.RemoveServerRequest{NodeId: followers[1].cfg.NodeID})
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || len(st.Details()) != 1 {
		t.Fatalf("RemoveServer on a follower: %v, want FailedPrecondition with NotLeader", err)
	}
	if _, err := l.client.RemoveServer(tctx(t), &grantorpb.RemoveServerRequest{NodeId: "nobody"}); status.Code(err) != codes.NotFound {
		t.Fatalf("RemoveServer of an unknown node: %v, want NotFound", err)
	}
	if _, err := l.client.RemoveServer(tctx(t), &grantorpb.RemoveServerRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("RemoveServer without a node id: %v, want InvalidArgument", err)
	}
	// A dead grantor removed by the operator is listed from gossip only.
	dead := followers[1]
	dead.stop()
	waitGossip(t, l, dead.cfg.NodeID+" dead", func() bool { return gossipState(l, dead.cfg.NodeID) == gossip.StateDead })
	if _, err := l.client.RemoveServer(tctx(t), &grantorpb.RemoveServerRequest{NodeId: dead.cfg.NodeID}); err != nil {
		t.Fatalf("RemoveServer of a dead grantor: %v", err)
	}
	resp, err := l.client.Members(tctx(t), &grantorpb.MembersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range resp.Members {
		if m.NodeId == dead.cfg.NodeID && (m.Voter || m.RaftState != "" || m.GossipState != gossip.StateDead) {
			t.Errorf("removed dead grantor listed as %v", m)
		}
	}
	// The last voter cannot be removed... but two are left: remove the
	// follower, then the leader is alone and refuses to remove itself.
	if _, err := l.client.RemoveServer(tctx(t), &grantorpb.RemoveServerRequest{NodeId: followers[0].cfg.NodeID}); err != nil {
		t.Fatalf("RemoveServer: %v", err)
	}
	_, err = l.client.RemoveServer(tctx(t), &grantorpb.RemoveServerRequest{NodeId: l.cfg.NodeID})
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || len(st.Details()) != 0 {
		t.Fatalf("RemoveServer of the last voter: %v, want FailedPrecondition without NotLeader", err)
	}
}

// Graceful leave: a follower and then the leader leave; each is removed
// from the configuration, the leader hands leadership over first, and
// nobody adds them back.
func TestLeaveRemovesFromRaft(t *testing.T) {
	c := startGossipCluster(t, 3)
	l := c.leader()
	var rest []*running
	for _, n := range c.nodes {
		if n != l {
			rest = append(rest, n)
		}
	}
	f := rest[0]
	if err := f.Leave(tctx(t)); err != nil {
		t.Fatalf("follower Leave: %v", err)
	}
	waitRaft(t, "follower removed", func() bool { return len(servers(l)) == 2 }, l)
	f.stop()
	waitGossip(t, l, "follower left", func() bool { return gossipState(l, f.cfg.NodeID) == gossip.StateLeft })

	// The leader leaves: the last other voter takes over and removes it.
	other := rest[1]
	if err := l.Leave(tctx(t)); err != nil {
		t.Fatalf("leader Leave: %v", err)
	}
	waitRaft(t, "leader handed over and was removed", func() bool {
		_, id := other.raft.LeaderWithID()
		return string(id) == other.cfg.NodeID && slices.Equal(servers(other), []string{other.cfg.NodeID + "=Voter"})
	}, other)
	if _, err := l.client.Acquire(tctx(t), acqReq("s", 1, "a")); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("acquire on a node that left: %v, want NotLeader", err)
	}
	l.stop()
	// The remaining grantor serves alone; a reconcile pass adds nobody.
	c.nodes = []*running{other}
	n := c.leader()
	waitGossip(t, n, "old leader left", func() bool { return gossipState(n, l.cfg.NodeID) == gossip.StateLeft })
	n.reconcile(tctx(t))
	if got := servers(n); !slices.Equal(got, []string{other.cfg.NodeID + "=Voter"}) {
		t.Fatalf("configuration after both left: %v", got)
	}
	if r := mustAcquire(t, n.client, acqReq("s", 1, "a")); !r.Granted {
		t.Fatalf("acquire on the last grantor: %v", r)
	}
	// The last voter leaves without removing itself.
	if err := n.Leave(tctx(t)); err != nil {
		t.Fatalf("last voter Leave: %v", err)
	}
	if got := servers(n); len(got) != 1 {
		t.Fatalf("the last voter removed itself: %v", got)
	}
}

// A grantor that gossips but does not answer over raft (an unreachable
// raft address) is staged as a non-voter and never promoted, so it never
// counts towards the quorum.
func TestReconcileStagesUnreachableGrantor(t *testing.T) {
	c := startGossipCluster(t, 3)
	l := c.leader()
	ghost, err := gossip.Start(tctx(t), gossip.Config{
		Name: "ghost", BindAddr: "127.0.0.1:0", Join: []string{c.seed}, Timing: gossip.LoopbackTiming(),
		Meta: gossip.Meta{Role: gossip.RoleGrantor, NodeID: "ghost", RPCAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:1", Voter: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ghost.Shutdown() })
	waitRaft(t, "ghost staged", func() bool { return slices.Contains(servers(l), "ghost=Nonvoter") }, l)
	for range 3 {
		if pending := l.reconcile(tctx(t)); !pending {
			t.Fatal("reconcile reports no staged grantor")
		}
		if got := servers(l); !slices.Contains(got, "ghost=Nonvoter") {
			t.Fatalf("an unreachable grantor was promoted: %v", got)
		}
	}
	// It still serves with the three voters.
	if r := mustAcquire(t, l.client, acqReq("s", 1, "a")); !r.Granted {
		t.Fatalf("acquire: %v", r)
	}
}

// Grantors come back in any order after an outage: one whose seed is not
// up yet gossips alone and joins once the seed is there.
func TestJoinRetriedUntilTheSeedIsUp(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	seedAddr := l.Addr().String()
	l.Close() // a free port, for the seed that comes later
	early := start(t, gossipConfig(t, "g1", 2, seedAddr), false)
	seedCfg := gossipConfig(t, "g2", 2, "")
	seedCfg.Gossip.BindAddr = seedAddr
	seed := start(t, seedCfg, false)
	for _, n := range []*running{early, seed} {
		waitGossip(t, n, "both grantors", func() bool { return len(n.gossip.Members()) == 2 })
	}
	c := &gossipCluster{t: t, nodes: []*running{early, seed}}
	if r := mustAcquire(t, c.leader().client, acqReq("s", 1, "a")); !r.Granted {
		t.Fatalf("acquire: %v", r)
	}
}
