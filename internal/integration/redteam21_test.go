package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
	"github.com/leaseside/leaseside/internal/attack"
)

// Red team of issue 21 on real processes: attacks by the holder of one
// certificate of each role and the gossip key (which every sidecar
// started with --join has), written for the closing review.

// memberOf reports whether id is a server of the raft configuration as
// the grantor c answers Members, and whether it votes.
func memberOf(t *testing.T, c grantorpb.GrantorClient, id string) (in, voter bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := c.Members(ctx, &grantorpb.MembersRequest{})
	if err != nil {
		t.Fatalf("Members: %v", err)
	}
	for _, m := range resp.GetMembers() {
		if m.GetNodeId() == id && (m.GetVoter() || m.GetRaftState() != "") {
			return true, m.GetVoter()
		}
	}
	return false, false
}

// A grantor certificate of a name in no configuration, with the gossip
// key: its holder runs a grantor of that name that joins gossip at a
// seed. Without join rules the leader adds it as a voter (a member's
// certificate is full trust: it could then lead and write any entry);
// with name rules whose join rules do not name it, the leader refuses it
// at every pass and it stays out; a reload whose rules name it lets it
// in, so the rule and nothing else kept it out.
func TestRedTeamNonMemberGrantorCertJoinsOnlyByJoinRule(t *testing.T) {
	p := newClusterPKI(t)
	c, _, writeRules := newRulesCluster(t, p, "*  acquire  *\n*/*  acquire  *\ngrantor/g[1-3]  join\n")
	c.startAll()
	leader := c.waitOffice(c.marks0()).node
	op := grpcClient(t, c.nodes[leader].rpcAddr(), p.creds("operator", "op"))
	mark := c.nodes[leader].proc.out.mark()
	addGrantor(t, c, p, "evil", c.nodes[0].gossipAddr())
	_, line := c.nodes[leader].proc.waitMatch(t, mark, "evil added or refused", func(s string) bool {
		return containsAll("promoting a grantor that answers to voter", "node_id=evil")(s) ||
			containsAll("no join rule of the name rules names it", "node_id=evil")(s)
	})
	t.Logf("leader: %s", line.v)
	c.nodes[leader].proc.waitLine(t, mark, "event=refused_raft", `gossip member claims grantor \"evil\": no join rule names it`)
	if in, voter := memberOf(t, op, "evil"); in {
		t.Fatalf("a grantor certificate no join rule names joined the raft configuration through gossip (voter %v)", voter)
	}
	s := startSidecar(t, "sidecar s1", nil, append(p.cert("sidecar", "s1", false), "--grantors", c.rpcAddrs(0, 1, 2))...)
	acquireCLI(t, s, "redteam/after-join-refused", "--ttl", "5s", "--detached")

	mark = c.nodes[leader].proc.out.mark()
	writeRules("*  acquire  *\n*/*  acquire  *\ngrantor/g[1-3]  join\ngrantor/evil  join\n")
	hupAll(t, c)
	c.nodes[leader].proc.waitLine(t, mark, "promoting a grantor that answers to voter", "node_id=evil")
}

// A grantor certificate of a name in no configuration and the gossip
// key, used against sidecars instead of grantors: the attack program
// serves the Grantor API under that certificate and gossips itself as the
// leader from four members, outvoting the real leader's three claims. A
// sidecar that finds the grantors by gossip sends it its acquire of a
// name another sidecar holds at the real cluster. Without
// --grantor-names it was granted (token 2^60, while the holder held token
// 1); with the names of its cluster's grantors, the impostor's
// certificate is no grantor to it, and the acquire is refused as held.
func TestRedTeamImpostorGrantorServesNoSidecar(t *testing.T) {
	p := newClusterPKI(t)
	c := newTLSCluster(t, p)
	holder := startSidecar(t, "sidecar holder", nil, append(p.cert("sidecar", "holder", false), "--grantors", c.rpcAddrs())...)
	held := acquireCLI(t, holder, "redteam/primary", "--ttl", "60s", "--detached")

	p.cert("grantor", "evil", false)
	keys, err := gossip.LoadKeyFile(p.key)
	if err != nil {
		t.Fatal(err)
	}
	im, err := attack.StartImpostor(tctx(t), "evil", p.configurator("grantor", "evil").ServerCredentials(), keys,
		[]string{c.nodes[0].gossipAddr()}, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })

	victim := startSidecar(t, "sidecar victim", nil, append(p.cert("sidecar", "victim", false),
		"--join", c.gossipAddrs(), "--gossip-addr", "127.0.0.1:0", "--gossip-key-file", p.key, "--grantor-names", "g[1-3]")...)
	victim.waitLine(t, 0, "grantor names: this sidecar takes only grantor certificates named")
	start := time.Now()
	r := cli(t, victim.socket, "acquire", "redteam/primary", "--json", "--detached", "--ttl", "60s")
	took := time.Since(start)
	if r.code == 0 {
		t.Fatalf("the victim sidecar was granted redteam/primary (%s) while holder holds it with token %s; the impostor answered %d acquires",
			strings.TrimSpace(r.stdout), held.Token, im.Acquires.Load())
	}
	if n := im.Acquires.Load(); n > 0 || !strings.Contains(r.stderr, "held elsewhere (token "+held.Token) {
		t.Fatalf("victim: exit %d: %s; the impostor answered %d acquires; want refused as held with token %s, and none at the impostor",
			r.code, strings.TrimSpace(r.stderr), n, held.Token)
	}
	t.Logf("victim: exit %d in %v: %s", r.code, took.Round(time.Millisecond), strings.TrimSpace(r.stderr))
}

// Removal and re-add on real processes, as the operations guide tells
// it: an operator removes a running grantor, which stops by itself (exit
// 0); started again, it begins from a raft log whose latest configuration
// lacks it, while the leader adds it back once gossip sees the new run. It
// must come back as a voter and stay (not stop again on its own old
// removal, nor be kept out), and the cluster must grant with it.
func TestRedTeamRemovedGrantorRestartedIsAddedBack(t *testing.T) {
	p := newClusterPKI(t)
	c := newTLSCluster(t, p)
	s := startSidecar(t, "sidecar s1", nil, append(p.cert("sidecar", "s1", false), "--grantors", c.rpcAddrs())...)
	acquireCLI(t, s, "readd/before", "--ttl", "5s", "--detached")
	leader := c.currentLeader().node
	ri := c.others(leader)[0]
	r := c.nodes[ri]
	op := grpcClient(t, c.nodes[leader].rpcAddr(), p.creds("operator", "op"))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := op.RemoveServer(ctx, &grantorpb.RemoveServerRequest{NodeId: r.id}); err != nil {
		t.Fatalf("RemoveServer %s: %v", r.id, err)
	}
	r.proc.waitLine(t, 0, "removed from the raft configuration; stopping")
	if code := r.proc.waitExit(t); code != 0 {
		t.Fatalf("the removed grantor exited %d, want 0", code)
	}
	r.alive = false

	mark := c.nodes[leader].proc.out.mark()
	c.start(ri)
	_, line := c.nodes[leader].proc.waitLine(t, mark, "event=member_add", "node_id="+r.id, "voter=true")
	t.Logf("leader: %s", line.v)
	if in, voter := memberOf(t, op, r.id); !in || !voter {
		t.Fatalf("%s after its restart: member %v, voter %v; want a voter", r.id, in, voter)
	}
	// The re-added grantor is one of the quorum: with the third grantor
	// stopped, the leader commits a grant only with its vote.
	c.stop(c.others(leader, ri)[0])
	g := acquireCLI(t, s, "readd/after", "--ttl", "5s", "--detached", "--wait", "30s")
	if r.proc.done() {
		t.Fatalf("the re-added grantor stopped:\n%s", r.proc.tail(30))
	}
	t.Logf("%s back as a voter; with it and the leader alone, readd/after was granted token %s", r.id, g.Token)
}

// The calls limit refuses at the gRPC tap, after grpc-go has taken the
// stream: measured here. One sidecar certificate opens as many
// connections as its account allows (32) and on each opens Acquire calls
// as fast as the grantor takes them, each declaring a request of 256 KiB
// (max_request_bytes) and sending 1 KiB of it, and never reads an
// answer. The leader's RSS is measured before, during and after, while
// another sidecar keeps renewing and acquiring. A measurement that
// floods the machine's CPU for 20 s: it runs with LEASESIDE_ATTACK_FULL=1
// (the binary without the race detector), figures in docs/limits.md.
func TestRedTeamUnfinishedCallsFlood(t *testing.T) {
	if os.Getenv("LEASESIDE_ATTACK_FULL") != "1" {
		t.Skip("a measurement: LEASESIDE_ATTACK_FULL=1 runs it")
	}
	p := newClusterPKI(t)
	c := newLoopbackCluster(t, 3)
	metricsAddr := map[*grantorNode]string{}
	for _, n := range c.nodes {
		p.cert("grantor", n.id, false)
		n.tlsDir, n.keyFile = p.dir, p.key
		n.extra = []string{"--metrics-addr", "127.0.0.1:0"}
	}
	c.startAll()
	// Metrics on ports the grantors chose (a port picked free may be taken
	// by another process first): read from their logs.
	for _, n := range c.nodes {
		metricsAddr[n] = servedMetricsAddr(t, n.proc)
	}
	lnode := c.nodes[c.currentLeader().node]
	addr := lnode.rpcAddr()
	pid := lnode.proc.pid()
	victimDial := grpcDialer(t, p.creds("sidecar", "victim"))
	bctx, bcancel := context.WithTimeout(context.Background(), 20*time.Second)
	cpu0 := cpuTime(t, pid)
	base := <-attack.Victim(bctx, victimDial, addr, "victim-0", 3*time.Second, 200*time.Millisecond)
	bcancel()
	t.Logf("victim alone for 20 s: %d renewals, %d acquires, slowest %v, failures %v; leader CPU %v",
		base.Renewals, base.Acquires, base.Slowest, base.Failures, cpuTime(t, pid)-cpu0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	victim := attack.Victim(ctx, victimDial, addr, "victim-1", 3*time.Second, 200*time.Millisecond)

	p.cert("sidecar", "evil", false)
	cfg := p.configurator("sidecar", "evil").ClientConfig(pki.ALPNgRPC, pki.Peer{Roles: []string{pki.RoleGrantor}})
	before := rss(t, pid)
	peak := peakRSS(t, pid)
	cpu1 := cpuTime(t, pid)
	fctx, fcancel := context.WithTimeout(ctx, 20*time.Second)
	defer fcancel()
	fl := attack.UnfinishedCalls(fctx, addr, cfg, grantorpb.Grantor_Acquire_FullMethodName, 32, 256<<10, 1<<10)
	during := peak()
	goroutines := int64(metric(t, metricsAddr[lnode], "go_goroutines"))
	t.Logf("flood: %d connections, %d calls opened, %d MiB written in 20 s; leader RSS %d -> peak %d MiB, goroutines %d, CPU %v",
		fl.Conns, fl.Streams, fl.Written>>20, before>>20, during>>20, goroutines, cpuTime(t, pid)-cpu1)
	cancel()
	st := <-victim
	t.Logf("victim during the flood: %d renewals, %d acquires, slowest %v, failures %v, leader moves followed %d", st.Renewals, st.Acquires, st.Slowest, st.Failures, st.LeaderMoves)
	t.Logf("leader RSS after the flood: %d MiB", rss(t, pid)>>20)
	if len(st.Failures) > 0 || st.Renewals == 0 || st.Acquires == 0 {
		t.Errorf("the other sidecar failed during the flood: %v", st.Failures)
	}
	if grown := during - before; grown > 160<<20 {
		t.Errorf("the leader's RSS grew %d MiB under one identity's unfinished calls", grown>>20)
	}
}

// cpuTime is the CPU time (user and system) process pid has used.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command's closing parenthesis: state is the
	// first, utime and stime the 12th and 13th, in clock ticks (100 a
	// second on Linux).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
