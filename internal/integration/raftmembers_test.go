package integration

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
	"github.com/leaseside/leaseside/internal/stranger"
	"github.com/leaseside/leaseside/ipc"
)

// attackerIP is the loopback address the attacks come from: a host of
// their own. A grantor audits its refusals per source address, at most
// connlimit.MaxReasonsPerSource reasons each per interval and the rest as
// "(other reasons)"; from 127.0.0.1, where the grantors themselves are, a
// grantor that refused its peers' first RPCs at start-up (before it had a
// configuration) had used up 4 of the 8 reasons, and the attack's fifth
// refusal, of InstallSnapshot, was counted but not named.
const attackerIP = "127.0.0.9"

// raftAttacker is a raft transport speaking with the cluster's grantor
// certificate of name, from attackerIP, and the header in which it speaks
// for it.
func raftAttacker(t *testing.T, p *clusterPKI, name string) (*raft.NetworkTransport, raft.RPCHeader) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(p.dir, "grantor-"+name+".pem")); err != nil {
		p.cert("grantor", name, false)
	}
	tr := stranger.RaftFrom(t, p.configurator("grantor", name).ClientConfig(pki.ALPNRaft, pki.Peer{Roles: []string{pki.RoleGrantor}}), attackerIP)
	return tr, raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(name), Addr: []byte(tr.LocalAddr())}
}

// attackAll runs stranger.Attack, as name, against every live grantor
// of c, and waits until each has audited the refusal of every RPC.
func attackAll(t *testing.T, c *cluster, tr *raft.NetworkTransport, hdr raft.RPCHeader, name string) {
	t.Helper()
	marks := c.marks()
	for i, n := range c.nodes {
		if !n.alive {
			continue
		}
		for rpc, err := range stranger.Attack(tr, n.id, n.raftAddr(), hdr, forgedTerm, 4096) {
			if err == nil {
				t.Errorf("grantor %s answered %s from the grantor certificate %s", n.id, rpc, name)
			}
		}
		for _, rpc := range []string{"AppendEntries", "RequestVote", "RequestPreVote", "TimeoutNow", "InstallSnapshot"} {
			n.proc.waitLine(t, marks[i], "event=refused_raft", "peer="+attackerIP, rpc+` from \"`+name+`\": not a server of this grantor's raft configuration`)
		}
	}
}

// Issue 21 item 1 on real processes: a grantor certificate of the
// cluster's CA for a name in no raft configuration (g9) sends every
// grantor the attack that used to halt the whole cluster for good (an
// AppendEntries in a far term that overwrites the log from its first
// entry with entries no grantor can decode and commits them), and votes,
// a TimeoutNow and a snapshot. Every grantor refuses each before raft sees
// it and audits it; none takes the term or halts; the held lease stays
// and the cluster grants, and again after every grantor restarted.
func TestRaftNonMemberCertificateRefused(t *testing.T) {
	t.Parallel()
	p := newClusterPKI(t)
	c := newTLSCluster(t, p)
	s := startSidecar(t, "sidecar s1", nil, append(p.cert("sidecar", "s1", false), "--grantors", c.rpcAddrs())...)
	held := acquireCLI(t, s, "members/held", "--ttl", "30s", "--detached")

	tr, hdr := raftAttacker(t, p, "g9")
	attackAll(t, c, tr, hdr, "g9")
	noForgedTerm(t, c)
	cli(t, s.socket, "check", "members/held", "--token", held.Token).must(t, 0)
	after := acquireCLI(t, s, "members/after", "--ttl", "5s", "--detached")
	t.Logf("granted token %s after the attack (held: %s)", after.Token, held.Token)

	for i := range c.nodes {
		c.stop(i)
	}
	c.startAll()
	c.waitOffice(c.marks0())
	noForgedTerm(t, c)
	// The sidecar saw no leader while every grantor was down: an acquire
	// with a wait keeps trying until it reaches the new one.
	restarted := acquireCLI(t, s, "members/after-restart", "--ttl", "5s", "--detached", "--wait", "30s")
	if tokenOf(t, restarted) <= tokenOf(t, after) {
		t.Fatalf("token %s after the restart, not above %s", restarted.Token, after.Token)
	}
	// And the attack again, on the restarted cluster.
	attackAll(t, c, tr, hdr, "g9")
	acquireCLI(t, s, "members/after-second-attack", "--ttl", "5s", "--detached")
}

// The removed grantor's case on real processes: an operator removes a
// running grantor (RemoveServer); it learns it, says so and exits 0 (a
// service manager does not restart it into a cluster that removed it);
// its own certificate then speaks raft to no one, and the two left keep
// granting.
func TestRaftRemovedGrantorStopsAndIsRefused(t *testing.T) {
	t.Parallel()
	p := newClusterPKI(t)
	c := newTLSCluster(t, p)
	s := startSidecar(t, "sidecar s1", nil, append(p.cert("sidecar", "s1", false), "--grantors", c.rpcAddrs())...)
	acquireCLI(t, s, "members/before", "--ttl", "5s", "--detached")
	leader := c.currentLeader().node
	ri := c.others(leader)[0]
	r := c.nodes[ri]
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := grpcClient(t, c.nodes[leader].rpcAddr(), p.creds("operator", "op")).RemoveServer(ctx,
		&grantorpb.RemoveServerRequest{NodeId: r.id}); err != nil {
		t.Fatalf("RemoveServer %s: %v", r.id, err)
	}
	r.proc.waitLine(t, 0, "removed from the raft configuration; stopping")
	if code := r.proc.waitExit(t); code != 0 {
		t.Fatalf("the removed grantor exited %d, want 0; last lines:\n%s", code, r.proc.tail(20))
	}
	r.alive = false

	tr, hdr := raftAttacker(t, p, r.id)
	attackAll(t, c, tr, hdr, r.id)
	noForgedTerm(t, c)
	g := acquireCLI(t, s, "members/after", "--ttl", "5s", "--detached")
	t.Logf("granted token %s by the two left", g.Token)
}

// tokenOf is g's fencing token as a number.
func tokenOf(t *testing.T, g ipc.Grant) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(g.Token, 10, 64)
	if err != nil {
		t.Fatalf("token %q: %v", g.Token, err)
	}
	return n
}

// addGrantor lays out one more grantor of c on loopback, with TLS and the
// gossip key of p, joining gossip at join, and starts it.
func addGrantor(t *testing.T, c *cluster, p *clusterPKI, id string, join ...string) *grantorNode {
	t.Helper()
	ports := freeLoopbackPorts(t, 3)
	n := &grantorNode{id: id, ip: "127.0.0.1", rpc: ports[0], raft: ports[1], gossip: ports[2],
		dataDir: t.TempDir(), join: join, tlsDir: p.dir, keyFile: p.key}
	p.cert("grantor", id, false)
	c.nodes = append(c.nodes, n)
	c.start(len(c.nodes) - 1)
	c.waitReady(len(c.nodes) - 1)
	return n
}

// The joining grantor's case on real processes. A grantor without raft
// state whose seed does not answer has no configuration and a join path
// that names no one: the non-member certificate's RPCs are refused, as
// everyone's would be. A grantor that joins through the cluster's seed is
// added by the leader (its seed names it) and becomes a voter; the
// non-member is refused there too, and the cluster of four grants.
func TestRaftJoiningGrantorFollowsOnlyItsJoinPath(t *testing.T) {
	t.Parallel()
	p := newClusterPKI(t)
	c := newTLSCluster(t, p)
	s := startSidecar(t, "sidecar s1", nil, append(p.cert("sidecar", "s1", false), "--grantors", c.rpcAddrs())...)
	tr, hdr := raftAttacker(t, p, "g9")

	silent := freeLoopbackPorts(t, 1)
	alone := addGrantor(t, c, p, "g5", "127.0.0.1:"+strconv.Itoa(silent[0]))
	for rpc, err := range stranger.Attack(tr, alone.id, alone.raftAddr(), hdr, forgedTerm, 64) {
		if err == nil {
			t.Errorf("the grantor without a configuration answered %s from g9", rpc)
		}
	}
	alone.proc.waitLine(t, 0, "event=refused_raft", "peer="+attackerIP, `AppendEntries from \"g9\": this grantor has no raft configuration yet, and its join path names no server`)
	c.stop(len(c.nodes) - 1)
	c.nodes = c.nodes[:len(c.nodes)-1]

	leader := c.currentLeader().node
	mark := c.nodes[leader].proc.out.mark()
	addGrantor(t, c, p, "g4", c.nodes[0].gossipAddr())
	c.nodes[leader].proc.waitLine(t, mark, "promoting a grantor that answers to voter", "node_id=g4")
	attackAll(t, c, tr, hdr, "g9")
	noForgedTerm(t, c)
	g := acquireCLI(t, s, "members/four", "--ttl", "5s", "--detached")
	t.Logf("granted token %s by the cluster of four", g.Token)
}
