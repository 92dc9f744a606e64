package integration

import (
	"testing"
)

// Issue 21 item 1, the joining grantor's case, on real processes: three
// TLS grantors with --bootstrap-expect 3 bootstrap a configuration of
// the three; g3 joins through g1 only. g3 then starts on an empty data
// dir (a lost disk; or it found the cluster bootstrapped without it: its
// state is the same, a voter of a configuration it does not have), and
// its only seed dies before any leader's entries reach it: g1 is
// restarted never to call an election (1h raft timeouts), and it is
// killed (SIGKILL) once g3 has proven it at its seed address (the event
// waited on), with g2 down meanwhile. Then g2 comes back: g2 and g3 are
// two voters of three, and they must elect, and grant. Before the fix g3
// refused every raft RPC of g2's ("its join path names no server") and no
// grantor ever took office.
func TestJoiningGrantorElectsAfterItsOnlySeedDies(t *testing.T) {
	t.Parallel()
	p := newClusterPKI(t)
	c := newTLSCluster(t, p)
	c.waitOffice(c.marks0())
	for i := range c.nodes {
		c.nodes[i].proc.waitLine(t, 0, "grantor: leader is ") // it has the configuration
	}
	for i := range c.nodes {
		c.stop(i)
	}
	g1, g2, g3 := c.nodes[0], c.nodes[1], c.nodes[2]

	g1.extra = []string{"--raft-heartbeat-timeout", "1h", "--raft-election-timeout", "1h"}
	c.start(0)
	g1.proc.waitLine(t, 0, "grantor: node started")
	g3.dataDir = t.TempDir()
	c.start(2)
	g3.proc.waitLine(t, 0, "every --join seed gossip lists is proven at its address")
	c.kill(0)

	g2.join = []string{g3.gossipAddr()}
	c.start(1)
	o := c.waitOffice(c.marks0(), 1, 2)
	t.Logf("grantor %s took office with g1 dead", c.nodes[o.node].id)
	s := startSidecar(t, "sidecar s1", nil, append(p.cert("sidecar", "s1", false), "--grantors", c.rpcAddrs(1, 2))...)
	g := acquireCLI(t, s, "joinseed/after", "--ttl", "5s", "--detached", "--wait", "30s")
	t.Logf("granted token %s by g2 and g3", g.Token)
}
