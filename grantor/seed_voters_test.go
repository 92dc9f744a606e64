package grantor

import (
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
)

// The joining grantor's case of issue 21 item 1: g1, g2 and g3 bootstrap
// a configuration of the three, and g3 has none of it (its data dir is
// new: it lost its disk, or it found the cluster bootstrapped without
// it); g3 joins through g1 only, g1 dies before any leader's entries
// reach g3 (here: g1 never campaigns, and g2 is down meanwhile), and g2
// comes back. g2 and g3 are two voters of three: they must elect and g3
// must get the configuration. Before the fix g3 refused g2's votes (its
// join path named only g1, now dead) and no leader was ever elected.
func TestJoiningGrantorElectsWithTheVotersItsDeadSeedShowed(t *testing.T) {
	c, cfgs := stoppedSeedCluster(t)

	g1, g3, _, logs := startSilentSeedAndJoiner(t, cfgs)
	logs.wait(t, "every --join seed gossip lists is proven at its address")
	if !g3.seedProofs.has(c.seed, "g1", "") {
		t.Fatal("g3 proved another claim than g1's, leaderless, at its seed address")
	}
	if g3.configured() {
		t.Fatal("g3 has a configuration before any leader")
	}
	g1.stop()
	g2AndG3Elect(t, cfgs, g3)
}

// startSilentSeedAndJoiner starts g1 of stoppedSeedCluster's cfgs again
// on its data, never calling an election, and g3 on a new data dir,
// joining through g1 only, with its log lines caught in logs.
func startSilentSeedAndJoiner(t *testing.T, cfgs []Config) (g1, g3 *running, g3cfg Config, logs *lineLog) {
	t.Helper()
	g1cfg := cfgs[0]
	g1cfg.Gossip.Join = nil
	g1cfg.HeartbeatTimeout, g1cfg.ElectionTimeout = time.Hour, time.Hour
	g1 = start(t, g1cfg, false)
	g3cfg = cfgs[2]
	g3cfg.DataDir = t.TempDir()
	logs = newLineLog()
	g3cfg.Logger = logs.logger()
	g3 = start(t, g3cfg, false)
	return g1, g3, g3cfg, logs
}

// g2AndG3Elect starts g2 of cfgs, joining through g3, with g1 dead, and
// waits until g2 and g3 elect a leader, g3 has the configuration of the
// three, and an entry commits; it returns g2, g3 and the leader.
func g2AndG3Elect(t *testing.T, cfgs []Config, g3 *running) (up []*running, leader *running) {
	t.Helper()
	g2cfg := cfgs[1]
	g2cfg.Gossip.Join = []string{g3.GossipAddr()}
	g2 := start(t, g2cfg, false)
	up = []*running{g2, g3}
	waitRaft(t, "g2 and g3 elect, and g3 has the configuration", func() bool {
		for _, n := range up {
			if n.raft.State() == raft.Leader {
				leader = n
			}
		}
		return leader != nil && slices.Equal(servers(g3), []string{"g1=Voter", "g2=Voter", "g3=Voter"})
	}, up...)
	if err := leader.raft.Barrier(waitTimeout).Error(); err != nil {
		t.Fatalf("an entry through %s, g1 dead: %v", leader.cfg.NodeID, err)
	}
	return up, leader
}

// The rule's other side: a joining grantor keeps the voters only from an
// answer its proven seed signs, never a grantor of another name, and
// admits them only while it has no configuration of its own.
func TestSeedVotersAnswerRules(t *testing.T) {
	resp := func(by string, members ...*grantorpb.Member) *grantorpb.MembersResponse {
		return &grantorpb.MembersResponse{AnsweredBy: by, Members: members}
	}
	voter := func(id string) *grantorpb.Member { return &grantorpb.Member{NodeId: id, Voter: true} }
	gossipOnly := &grantorpb.Member{NodeId: "g9", RaftState: ""}
	if v, ok := answerVoters("g1", resp("g1", voter("g2"), voter("g1"), gossipOnly, voter("g2"))); !ok || !slices.Equal(v, []string{"g1", "g2"}) {
		t.Errorf("the seed's own answer: %v %v, want [g1 g2] (a gossip member is no voter)", v, ok)
	}
	if v, ok := answerVoters("g1", resp("g9", voter("g9"))); ok {
		t.Errorf("an answer signed by g9 for seed g1 counts: %v", v)
	}
	if v, ok := answerVoters("g1", resp("g1", gossipOnly)); ok {
		t.Errorf("an answer without a configuration counts: %v", v)
	}
	var many []*grantorpb.Member
	for i := range 2 * maxSeedVoters {
		many = append(many, voter(string(rune('a'+i%26))+string(rune('a'+i/26))))
	}
	if v, _ := answerVoters("g1", resp("g1", many...)); len(v) > maxSeedVoters {
		t.Errorf("kept %d voters of one answer, more than %d", len(v), maxSeedVoters)
	}

	g := &raftGate{join: func(configured bool) joinPath {
		if configured {
			return joinPath{}
		}
		return joinPath{learned: []string{"g1", "g2"}}
	}}
	cfg := fastConfig(t, t.TempDir())
	cfg.Bootstrap = false
	n := start(t, cfg, false)
	g.raft.Store(n.raft)
	if err := g.check("g2", rpcRequestVote); err != nil {
		t.Errorf("a voter the seed showed, to a grantor without a configuration: %v", err)
	}
	if err := g.check("g9", rpcRequestVote); err == nil {
		t.Error("g9, whom no seed showed, admitted")
	}
	if err := n.raft.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: raft.ServerAddress(n.RaftAddr())}}}).Error(); err != nil {
		t.Fatal(err)
	}
	waitRaft(t, "n1 configured", func() bool { return n.configured() }, n)
	if err := g.check("g2", rpcRequestVote); err == nil {
		t.Error("a voter a seed showed is admitted by a grantor that has a configuration without it")
	}
}

// stoppedSeedCluster bootstraps a TLS gossip cluster of g1, g2 and g3,
// which join through g1 (c.seed), waits until each has applied the
// leader's entries, stops all three and returns their configurations, to
// be started again on the same addresses.
func stoppedSeedCluster(t *testing.T) (*gossipCluster, []Config) {
	t.Helper()
	p := newTestPKI(t)
	c := &gossipCluster{t: t, events: map[*running]*eventLog{}}
	var cfgs []Config
	for i, id := range []string{"g1", "g2", "g3"} {
		n := c.add(id, 3, func(cfg *Config) { cfg.TLS = p.conf(pki.RoleGrantor, id) })
		if i == 0 {
			c.seed = n.GossipAddr()
		}
	}
	l := c.leader()
	for _, n := range c.nodes {
		c.waitApplied(n, l)
	}
	for _, n := range c.nodes {
		cfg := n.cfg
		cfg.RaftAddr, cfg.RPCAddr = n.RaftAddr(), n.RPCAddr()
		g := *cfg.Gossip
		g.BindAddr = n.GossipAddr()
		cfg.Gossip = &g
		cfgs = append(cfgs, cfg)
		n.stop()
	}
	return c, cfgs
}
