package grantor

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/pki"
	"github.com/leaseside/leaseside/internal/stranger"
)

// raftAs returns a raft transport that speaks with the grantor
// certificate of name, and the header that speaks for it. It dials from
// 127.0.0.9, a host of its own: a grantor audits refusals per source
// address, at most connlimit.MaxReasonsPerSource reasons each per
// interval and the rest as "(other reasons)", and from 127.0.0.1 the
// refusals of the test's grantors starting and joining (a grantor without
// a configuration refuses its peers' first RPCs) could leave the attack's
// unnamed.
func raftAs(t *testing.T, p *testPKI, name string) (*raft.NetworkTransport, raft.RPCHeader) {
	t.Helper()
	cfg := p.conf(pki.RoleGrantor, name).ClientConfig(pki.ALPNRaft, pki.Peer{Roles: []string{pki.RoleGrantor}})
	tr := stranger.RaftFrom(t, cfg, "127.0.0.9")
	return tr, raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(name), Addr: []byte(tr.LocalAddr())}
}

// sendEvery sends to n, as hdr says, one RPC of every kind raft has, each
// of the kind an attacker would send (a term far ahead, an entry no
// grantor can decode right after n's last one, a snapshot), and fails the
// test if any is answered.
func sendEvery(t *testing.T, tr *raft.NetworkTransport, hdr raft.RPCHeader, n *running, forged uint64) {
	t.Helper()
	id, addr := raft.ServerID(n.cfg.NodeID), raft.ServerAddress(n.RaftAddr())
	term, last := n.raft.CurrentTerm(), n.raft.LastIndex()
	var ae raft.AppendEntriesResponse
	if err := tr.AppendEntries(id, addr, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: forged}, &ae); err == nil {
		t.Errorf("%s answered AppendEntries with a forged term: %+v", id, ae)
	}
	if err := tr.AppendEntries(id, addr, &raft.AppendEntriesRequest{
		RPCHeader: hdr, Term: term, PrevLogEntry: last, PrevLogTerm: term,
		Entries:           []*raft.Log{{Index: last + 1, Term: term, Type: raft.LogCommand, Data: []byte{0xEE}}},
		LeaderCommitIndex: last + 1,
	}, &ae); err == nil {
		t.Errorf("%s answered AppendEntries with an undecodable entry: %+v", id, ae)
	}
	var rv raft.RequestVoteResponse
	if err := tr.RequestVote(id, addr, &raft.RequestVoteRequest{RPCHeader: hdr, Term: forged, LastLogIndex: 1 << 40, LastLogTerm: forged}, &rv); err == nil {
		t.Errorf("%s answered RequestVote: %+v", id, rv)
	}
	var pv raft.RequestPreVoteResponse
	if err := tr.RequestPreVote(id, addr, &raft.RequestPreVoteRequest{RPCHeader: hdr, Term: forged, LastLogIndex: 1 << 40, LastLogTerm: forged}, &pv); err == nil {
		t.Errorf("%s answered RequestPreVote: %+v", id, pv)
	}
	var tn raft.TimeoutNowResponse
	if err := tr.TimeoutNow(id, addr, &raft.TimeoutNowRequest{RPCHeader: hdr}, &tn); err == nil {
		t.Errorf("%s answered TimeoutNow: %+v", id, tn)
	}
	var is raft.InstallSnapshotResponse
	snap := []byte(`{"last_token":0}`)
	if err := tr.InstallSnapshot(id, addr, &raft.InstallSnapshotRequest{
		RPCHeader: hdr, SnapshotVersion: raft.SnapshotVersionMax, Term: forged, LastLogIndex: 1 << 40, LastLogTerm: forged,
		Size: int64(len(snap)), ConfigurationIndex: 1 << 40,
	}, &is, bytes.NewReader(snap)); err == nil {
		t.Errorf("%s answered InstallSnapshot: %+v", id, is)
	}
}

// noForged fails the test if a node took the forged term or holds the
// undecodable entry.
func noForged(t *testing.T, c *testCluster, forged uint64) {
	t.Helper()
	for i, n := range c.nodes {
		if !c.alive[i] {
			continue
		}
		if got := n.raft.CurrentTerm(); got >= forged {
			t.Fatalf("%s is in term %d: it took the forged term", n.cfg.NodeID, got)
		}
		for idx := uint64(1); idx <= n.raft.LastIndex(); idx++ {
			var e raft.Log
			if n.wal.GetLog(idx, &e) == nil && bytes.Equal(e.Data, []byte{0xEE}) {
				t.Fatalf("%s's log holds the forged entry at %d", n.cfg.NodeID, idx)
			}
		}
	}
}

// tlsCluster starts three grantors over TLS, auditing into audits.
func tlsCluster(t *testing.T, p *testPKI) (*testCluster, []*lineLog) {
	t.Helper()
	c, audits, _ := tlsClusterLogged(t, p)
	return c, audits
}

// tlsClusterLogged is tlsCluster that also keeps each grantor's log (at
// debug level) in logs.
func tlsClusterLogged(t *testing.T, p *testPKI, opts ...func(*Config)) (c *testCluster, audits, logs []*lineLog) {
	t.Helper()
	audits, logs = make([]*lineLog, 3), make([]*lineLog, 3)
	i := 0
	c = startClusterWith(t, 3, func(cfg *Config) {
		cfg.TLS = p.conf(pki.RoleGrantor, cfg.NodeID)
		audits[i], logs[i] = newLineLog(), newLineLog()
		cfg.Audit, cfg.Logger = audits[i].logger(), logs[i].logger()
		for _, o := range opts {
			o(cfg)
		}
		i++
	})
	return c, audits, logs
}

// Issue 21 item 1, the attack: a grantor certificate of the cluster's CA
// for a name in no raft configuration (n9) speaks raft in its own name.
// Every kind of raft RPC it sends, to the leader and to a follower, is
// refused before raft sees it, named in the audit trail and counted per
// kind; no grantor takes its term or its entry, the held lease keeps its
// token and the cluster still grants.
func TestRaftRefusesNonMembers(t *testing.T) {
	p := newTestPKI(t)
	c, audits := tlsCluster(t, p)
	li := c.leader()
	l := c.nodes[li]
	sideCreds := p.conf(pki.RoleSidecar, "h1").ClientCredentials()
	held := c.acquireAtLeader(sideCreds, acqReq("s1", 1, "jobs/held"))
	if !held.Granted {
		t.Fatalf("acquire: %v", held)
	}
	fi := (li + 1) % 3
	f := c.nodes[fi]
	waitRaft(t, "the grant replicated", func() bool { return f.fsm.leaseCount() == 1 }, l, f)
	forged := l.raft.CurrentTerm() + 1000

	tr, hdr := raftAs(t, p, "n9")
	for _, i := range []int{li, fi} {
		sendEvery(t, tr, hdr, c.nodes[i], forged)
		audits[i].wait(t, "event=refused_raft", `AppendEntries from \"n9\": not a server of this grantor's raft configuration`)
		audits[i].wait(t, "event=refused_raft", `RequestVote from \"n9\"`)
		for k := range rpcKinds {
			if got := c.nodes[i].gate.refusedCount(k); got == 0 {
				t.Errorf("%s counted no refused %s", c.nodes[i].cfg.NodeID, k)
			}
		}
	}
	noForged(t, c, forged)
	if again := c.acquireAtLeader(sideCreds, acqReq("s2", 1, "jobs/held")); again.Granted || again.Token != held.Token {
		t.Fatalf("the held lease: %v, want held under token %d", again, held.Token)
	}
	if fresh := c.acquireAtLeader(sideCreds, acqReq("s2", 2, "jobs/other")); !fresh.Granted {
		t.Fatalf("a new acquire: %v", fresh)
	}
}

// The removed grantor's case: a running follower removed by the leader
// learns it, the two left confirm it, and it stops (Run returns nil, having logged why), and its own
// certificate then speaks raft to no one: every RPC it sends is refused
// as a non-member's. The two left keep granting.
func TestRemovedGrantorStopsAndIsRefused(t *testing.T) {
	p := newTestPKI(t)
	c, audits, logs := tlsClusterLogged(t, p)
	li := c.leader()
	l := c.nodes[li]
	ri := (li + 1) % 3
	r := c.nodes[ri]
	// The removed grantor asks the voters left at the addresses it knows;
	// without gossip here, those the replicated state registered, which
	// it must hold before its removal (it hears nothing after it). An
	// applied registration is no raft observation, so this polls the
	// grantor's state until it shows them all.
	registered := func() bool {
		for _, n := range c.nodes {
			if r.fsm.nodeAddr(n.cfg.NodeID) == "" {
				return false
			}
		}
		return true
	}
	poll := time.NewTicker(50 * time.Millisecond)
	deadline := time.NewTimer(waitTimeout)
	for !registered() {
		select {
		case <-poll.C:
		case <-deadline.C:
			t.Fatal("timed out waiting for every grantor's address at the grantor to be removed")
		}
	}
	poll.Stop()
	deadline.Stop()
	if err := l.RemoveServer(tctx(t), r.cfg.NodeID); err != nil {
		t.Fatalf("RemoveServer: %v", err)
	}
	if stopped, _ := removalRounds(t, c, logs[ri], r, 0); !stopped {
		t.Fatal("the removed grantor still runs")
	}
	if r.runErr != nil {
		t.Fatalf("the removed grantor's Run: %v, want nil", r.runErr)
	}
	c.alive[ri] = false
	forged := l.raft.CurrentTerm() + 1000
	tr, hdr := raftAs(t, p, r.cfg.NodeID)
	for i, n := range c.nodes {
		if !c.alive[i] {
			continue
		}
		sendEvery(t, tr, hdr, n, forged)
		audits[i].wait(t, "event=refused_raft", `RequestVote from \"`+r.cfg.NodeID+`\": not a server`)
	}
	noForged(t, c, forged)
	sideCreds := p.conf(pki.RoleSidecar, "h1").ClientCredentials()
	if a := c.acquireAtLeader(sideCreds, acqReq("s1", 1, "jobs/after")); !a.Granted {
		t.Fatalf("acquire after the removal: %v", a)
	}

	// Started again on its data dir, it waits to be added back, and the
	// others go on. If its log has the entry that removed it, it calls
	// no election (raft's own rule); if it missed it (and stopped on the
	// refusals instead), its vote requests are refused by both, and it
	// does not stop: it has heard of no leader in this run.
	marks := []int{audits[li].mark(), audits[(ri+1)%3].mark()}
	again := start(t, r.cfg, false)
	if again.listed(again.raft.GetConfiguration().Configuration()) {
		t.Log("the removed grantor missed the entry that removed it")
		for i, a := range []*lineLog{audits[li], audits[(ri+1)%3]} {
			a.waitFrom(t, marks[i], "event=refused_raft", `RequestPreVote from \"`+r.cfg.NodeID+`\": not a server`)
		}
		select {
		case <-again.exited:
			t.Fatalf("the removed grantor, started again, stopped by itself: %v", again.runErr)
		default:
		}
	}
	if a := c.acquireAtLeader(sideCreds, acqReq("s1", 2, "jobs/after-restart")); !a.Granted {
		t.Fatalf("acquire while the removed grantor campaigns: %v", a)
	}
}

// The joining grantor's case: a grantor without raft state takes raft
// RPCs only from the servers its join path names (here JoinServers, the
// cluster that adds it): a non-member's AppendEntries, votes and snapshot
// are refused before it has a configuration, and the leader that adds it
// then brings it up to date; from then on, only the configuration's
// servers speak raft to it.
func TestJoiningGrantorFollowsOnlyItsJoinPath(t *testing.T) {
	p := newTestPKI(t)
	c, _ := tlsCluster(t, p)
	l := c.nodes[c.leader()]
	sideCreds := p.conf(pki.RoleSidecar, "h1").ClientCredentials()
	if a := c.acquireAtLeader(sideCreds, acqReq("s1", 1, "jobs/before")); !a.Granted {
		t.Fatalf("acquire: %v", a)
	}
	cfg := fastConfig(t, t.TempDir())
	cfg.NodeID, cfg.Bootstrap = "n4", false
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = DefaultHeartbeatTimeout, DefaultElectionTimeout, DefaultLeaderLeaseTimeout
	cfg.Clock = c.clock
	cfg.TLS = p.conf(pki.RoleGrantor, "n4")
	cfg.JoinServers = []string{"n1", "n2", "n3"}
	audit := newLineLog()
	cfg.Audit = audit.logger()
	j := start(t, cfg, false)

	tr, hdr := raftAs(t, p, "n9")
	sendEvery(t, tr, hdr, j, 1000)
	audit.wait(t, "event=refused_raft", `AppendEntries from \"n9\": this grantor has no raft configuration yet, and its join path names only [\"n1\" \"n2\" \"n3\"]`)
	if got := j.raft.LastIndex(); got != 0 {
		t.Fatalf("the joining grantor's log reaches %d: it took the non-member's entries", got)
	}
	c.addVoter("n4", j.RaftAddr())
	waitRaft(t, "the joining grantor caught up", func() bool { return j.fsm.leaseCount() == 1 }, l, j)
	c.nodes, c.alive = append(c.nodes, j), append(c.alive, true)
	forged := l.raft.CurrentTerm() + 1000
	sendEvery(t, tr, hdr, j, forged)
	audit.wait(t, "event=refused_raft", `AppendEntries from \"n9\": not a server of this grantor's raft configuration`)
	noForged(t, c, forged)
	if a := c.acquireAtLeader(sideCreds, acqReq("s1", 2, "jobs/after")); !a.Granted {
		t.Fatalf("acquire after the join: %v", a)
	}
}

// What a join path says, read from gossip: the grantors at the seed
// addresses, and the leader they agree on. With TLS (proven set) a seed
// address names a grantor only once this node proved the claim at that
// address (seed_proof.go); without TLS, an address two grantors claim
// names neither.
func TestSeedsSay(t *testing.T) {
	g := func(addr, id, leader string) gossip.MemberInfo {
		return gossip.MemberInfo{Name: id, Addr: addr, State: gossip.StateAlive,
			Meta: gossip.Meta{Role: gossip.RoleGrantor, NodeID: id, LeaderID: leader}}
	}
	side := gossip.MemberInfo{Name: "s", Addr: "10.0.0.9:1", State: gossip.StateAlive, Meta: gossip.Meta{Role: gossip.RoleSidecar}}
	dead := g("10.0.0.3:1", "g3", "evil")
	dead.State = gossip.StateDead
	seeds := map[string]bool{"10.0.0.1:1": true, "10.0.0.2:1": true, "10.0.0.3:1": true}
	for _, tc := range []struct {
		name    string
		members []gossip.MemberInfo
		seeds   map[string]bool
		// proven lists the claims proven at their address; nil is a
		// node without TLS, which proves nothing.
		proven []seedClaim
		want   joinPath
	}{
		{name: "seeds agree on a leader that is no seed", seeds: seeds,
			members: []gossip.MemberInfo{g("10.0.0.1:1", "g1", "g4"), g("10.0.0.2:1", "g2", "g4"), g("10.0.0.4:1", "g4", "g4"), side},
			want:    joinPath{servers: []string{"g1", "g2"}, leader: "g4"}},
		{name: "a non-seed's claim counts for nothing", seeds: seeds,
			members: []gossip.MemberInfo{g("10.0.0.1:1", "g1", ""), g("10.0.0.66:1", "evil", "evil"), dead},
			want:    joinPath{servers: []string{"g1"}}},
		{name: "seeds that disagree name no leader", seeds: seeds,
			members: []gossip.MemberInfo{g("10.0.0.1:1", "g1", "g1"), g("10.0.0.2:1", "g2", "g2")},
			want:    joinPath{servers: []string{"g1", "g2"}}},
		{name: "a seed naming this node names no leader", seeds: seeds,
			members: []gossip.MemberInfo{g("10.0.0.1:1", "g1", "me"), g("10.0.0.5:1", "me", "me")},
			want:    joinPath{servers: []string{"g1"}}},
		{name: "a seed address two grantors claim names neither, nor their leader", seeds: seeds,
			members: []gossip.MemberInfo{g("10.0.0.1:1", "g1", "g2"), g("10.0.0.1:1", "evil", "evil"), g("10.0.0.2:1", "g2", "g2")},
			want:    joinPath{servers: []string{"g2"}, leader: "g2"}},
		{name: "TLS: the seeds' proven claims name them and their leader", seeds: seeds,
			proven:  []seedClaim{{"10.0.0.1:1", "g1", "g4"}, {"10.0.0.2:1", "g2", "g4"}},
			members: []gossip.MemberInfo{g("10.0.0.1:1", "g1", "g4"), g("10.0.0.2:1", "g2", "g4"), g("10.0.0.4:1", "g4", "g4")},
			want:    joinPath{servers: []string{"g1", "g2"}, leader: "g4"}},
		{name: "TLS: every seed down, an impostor's unproven claim to a seed's address names no one", seeds: seeds,
			proven:  []seedClaim{},
			members: []gossip.MemberInfo{g("10.0.0.1:1", "evil", "evil"), g("10.0.0.4:1", "g4", "g4")},
			want:    joinPath{}},
		{name: "TLS: a claim proven for another name does not prove the impostor's", seeds: seeds,
			proven:  []seedClaim{{"10.0.0.1:1", "g1", "evil"}},
			members: []gossip.MemberInfo{g("10.0.0.1:1", "evil", "evil")},
			want:    joinPath{}},
		{name: "TLS: the seed and an impostor at its address: the proven seed counts, the impostor's leader does not", seeds: seeds,
			proven:  []seedClaim{{"10.0.0.1:1", "g1", "g2"}},
			members: []gossip.MemberInfo{g("10.0.0.1:1", "g1", "g2"), g("10.0.0.1:1", "evil", "evil"), g("10.0.0.2:1", "g2", "g2")},
			want:    joinPath{servers: []string{"g1"}, leader: "g2"}},
		{name: "TLS: an unproven seed's disagreement does not cancel the proven seeds' leader", seeds: seeds,
			proven:  []seedClaim{{"10.0.0.1:1", "g1", "g2"}},
			members: []gossip.MemberInfo{g("10.0.0.1:1", "g1", "g2"), g("10.0.0.2:1", "g2", "evil")},
			want:    joinPath{servers: []string{"g1"}, leader: "g2"}},
		{name: "TLS: a proven seed that is down counts for nothing", seeds: seeds,
			proven:  []seedClaim{{"10.0.0.3:1", "g3", "evil"}},
			members: []gossip.MemberInfo{dead},
			want:    joinPath{}},
		{name: "TLS: a proven seed whose gossiped leader is forged (the seed's name, its address, a higher incarnation) names no one", seeds: seeds,
			proven:  []seedClaim{{"10.0.0.1:1", "g1", "g2"}},
			members: []gossip.MemberInfo{g("10.0.0.1:1", "g1", "evil")},
			want:    joinPath{}},
		{name: "without seeds, every alive grantor, and their leader only as a server", seeds: nil,
			members: []gossip.MemberInfo{g("10.0.0.1:1", "g1", "g2"), g("10.0.0.2:1", "g2", "g2"), side},
			want:    joinPath{servers: []string{"g1", "g2", "g2"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var proven func(addr, id, leader string) bool
			if tc.proven != nil {
				proven = func(addr, id, leader string) bool { return slices.Contains(tc.proven, seedClaim{addr, id, leader}) }
			}
			got := seedsSay(tc.members, tc.seeds, "me", proven)
			if !slices.Equal(got.servers, tc.want.servers) || got.leader != tc.want.leader {
				t.Fatalf("seedsSay = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The gate on its own: a server of the latest configuration passes; with
// a configuration, a non-member passes only as the leader the seeds agree
// on and only with entries or a snapshot (a seed is not enough).
func TestRaftGateRules(t *testing.T) {
	cfg := fastConfig(t, t.TempDir())
	n := start(t, cfg, true)
	jp := joinPath{servers: []string{"seed"}, leader: "told"}
	n.gate.join = func(bool) joinPath { return jp }
	for _, tc := range []struct {
		id   string
		kind raftRPCKind
		ok   bool
	}{
		{id: "n1", kind: rpcRequestVote, ok: true},
		{id: "told", kind: rpcAppendEntries, ok: true},
		{id: "told", kind: rpcInstallSnapshot, ok: true},
		{id: "told", kind: rpcRequestVote},
		{id: "told", kind: rpcTimeoutNow},
		{id: "seed", kind: rpcAppendEntries},
		{id: "n9", kind: rpcAppendEntries},
	} {
		err := n.gate.admit(tc.id, tc.kind)
		if (err == nil) != tc.ok {
			t.Errorf("admit(%s, %s) = %v, want admitted %v", tc.id, tc.kind, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "not a server of this grantor's raft configuration") {
			t.Errorf("admit(%s, %s) = %v: does not say why", tc.id, tc.kind, err)
		}
	}
}

// mark returns how many lines l holds now: waitFrom it waits for later ones.
func (l *lineLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// waitFrom waits for a line after the first from that contains every one
// of subs.
func (l *lineLog) waitFrom(t *testing.T, from int, subs ...string) string {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		l.mu.Lock()
		ch, lines := l.changed, l.lines[from:]
		for _, line := range lines {
			if containsAll(line, subs) {
				l.mu.Unlock()
				return line
			}
		}
		l.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			l.mu.Lock()
			tail := l.lines[from:]
			tail = tail[max(0, len(tail)-60):]
			l.mu.Unlock()
			t.Fatalf("timed out waiting for a log line with %q; its last lines:\n%s", subs, strings.Join(tail, "\n"))
		}
	}
}

// A grantor that followed a leader and missed the entry that removed it
// learns of its removal from the refusals of its vote requests: it stops
// once a majority of its configuration's voters refused it as a
// non-member, not before, and not if it heard of no leader in this run
// (removed while down: it waits to be added back).
func TestRefusedByAMajorityAsNonMemberStops(t *testing.T) {
	p := newTestPKI(t)
	c, _ := tlsCluster(t, p)
	l := c.nodes[c.leader()]
	var f []*running
	for _, n := range c.nodes {
		if n != l {
			f = append(f, n)
		}
	}
	stopped := func(n *running) bool {
		select {
		case <-n.removal.done:
			return true
		default:
			return false
		}
	}
	// A majority is counted against the configuration each follower
	// holds: both must hold the one of three voters (the third's AddVoter
	// may commit before one of them stored it). A follower stores it as it
	// answers the leader, whose contacts wake the wait.
	three := []string{"n1=Voter", "n2=Voter", "n3=Voter"}
	waitRaft(t, "the followers know the leader and the three voters", func() bool {
		return f[0].removal.hadLeader.Load() && slices.Equal(servers(f[0]), three) && slices.Equal(servers(f[1]), three)
	}, l, f[0], f[1])
	f[0].refusedAsNonMember(raft.ServerID(l.cfg.NodeID))
	if stopped(f[0]) {
		t.Fatal("one refusal of three voters stopped the grantor")
	}
	f[1].removal.hadLeader.Store(false) // as if it had heard of no leader since its start
	f[1].refusedAsNonMember(raft.ServerID(l.cfg.NodeID))
	f[1].refusedAsNonMember(raft.ServerID(f[0].cfg.NodeID))
	if stopped(f[1]) {
		t.Fatal("a grantor that heard of no leader stopped on refusals")
	}
	f[0].refusedAsNonMember(raft.ServerID(f[1].cfg.NodeID))
	select {
	case <-f[0].exited:
	case <-time.After(waitTimeout):
		t.Fatal("refused by a majority, the grantor still runs")
	}
	if f[0].runErr != nil {
		t.Fatalf("Run: %v, want nil", f[0].runErr)
	}
}

// The gossip attack on a joining grantor: a holder of the gossip key (a
// sidecar's) and of a grantor certificate of a name in no configuration
// (g9) gossips a grantor g9 that names itself leader, then speaks raft as
// g9 to a grantor that joins the cluster through seed g1. The joining
// grantor's join path names only its seed and the leader the seed names,
// so it refuses g9 whether it already has a configuration or not, and it
// joins the real cluster.
func TestGossipLeaderClaimDoesNotMisleadAJoiningGrantor(t *testing.T) {
	p := newTestPKI(t)
	c := &gossipCluster{t: t, events: map[*running]*eventLog{}}
	for i, id := range []string{"g1", "g2", "g3"} {
		n := c.add(id, 3, func(cfg *Config) {
			cfg.TLS = p.conf(pki.RoleGrantor, id)
			starvedRaftTiming(cfg)
		})
		if i == 0 {
			c.seed = n.GossipAddr()
		}
	}
	l := c.leader()
	tr, hdr := raftAs(t, p, "g9")
	fake, err := gossip.Start(tctx(t), gossip.Config{
		Name: "g9", BindAddr: "127.0.0.1:0", Join: []string{l.GossipAddr()}, Timing: gossip.LoopbackTiming(),
		Meta: gossip.Meta{Role: gossip.RoleGrantor, NodeID: "g9", RaftAddr: string(tr.LocalAddr()), RPCAddr: "127.0.0.1:9",
			Voter: true, LeaderID: "g9", Version: "test"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Shutdown() })

	audit := newLineLog()
	j := c.add("g4", 0, func(cfg *Config) {
		cfg.TLS = p.conf(pki.RoleGrantor, "g4")
		cfg.Audit = audit.logger()
		starvedRaftTiming(cfg)
	})
	waitGossip(t, j, "the fake leader claim", func() bool { return gossipState(j, "g9") == gossip.StateAlive })
	waitGossip(t, j, "the seed naming the leader", func() bool { return j.joinPath(false).leader == l.cfg.NodeID })
	if jp := j.joinPath(false); !slices.Equal(jp.servers, []string{"g1"}) {
		t.Fatalf("the joining grantor's join path names %+v, want only its seed g1 and the leader %s", jp, l.cfg.NodeID)
	}
	sendEvery(t, tr, hdr, j, 1<<40)
	audit.wait(t, "event=refused_raft", `AppendEntries from \"g9\"`)
	waitRaft(t, "g4 a voter", func() bool { return slices.Contains(servers(l), "g4=Voter") }, l, j)
	if got := j.raft.CurrentTerm(); got >= 1<<40 {
		t.Fatalf("the joining grantor took the forged term %d", got)
	}
}

// A non-member's flood of vote requests over one connection: every one
// is refused and counted, the refusals make two audit lines per
// raftRefusalInterval at most (the first at once, then the count), and
// the cluster grants meanwhile. The refusal rate is logged.
func TestNonMemberVoteFloodIsCheap(t *testing.T) {
	const flood = 200
	p := newTestPKI(t)
	c, audits := tlsCluster(t, p)
	li := c.leader()
	l := c.nodes[li]
	tr, hdr := raftAs(t, p, "n9")
	id, addr := raft.ServerID(l.cfg.NodeID), raft.ServerAddress(l.RaftAddr())
	began := time.Now()
	for range flood {
		var rv raft.RequestVoteResponse
		if err := tr.RequestVote(id, addr, &raft.RequestVoteRequest{RPCHeader: hdr, Term: 1 << 40, LastLogIndex: 1 << 40, LastLogTerm: 1 << 40}, &rv); err == nil {
			t.Fatalf("a vote request of the flood was answered: %+v", rv)
		}
	}
	took := time.Since(began)
	t.Logf("%d refused vote requests in %v (%.0f/s, one connection, one at a time)", flood, took, flood/took.Seconds())
	sideCreds := p.conf(pki.RoleSidecar, "h1").ClientCredentials()
	if a := c.acquireAtLeader(sideCreds, acqReq("s1", 1, "jobs/during")); !a.Granted {
		t.Fatalf("acquire after the flood: %v", a)
	}
	if got := l.gate.refusedCount(rpcRequestVote); got < flood {
		t.Fatalf("%d refusals counted, want %d", got, flood)
	}
	l.trans.baseTransport.(*tlsTransport).refusals.Flush()
	lines := 0
	audits[li].mu.Lock()
	for _, line := range audits[li].lines {
		if strings.Contains(line, "event=refused_raft") {
			lines++
		}
	}
	audits[li].mu.Unlock()
	if bound := 2 * (int(took/raftRefusalInterval) + 2); lines > bound {
		t.Fatalf("%d refusals in %v made %d audit lines, more than %d", flood, took, lines, bound)
	}
	t.Logf("%d audit lines", lines)
}

// BenchmarkRaftGateAdmit measures what the gate adds to every inbound raft
// RPC: a member's admission (the common case) and a non-member's vote
// refused.
func BenchmarkRaftGateAdmit(b *testing.B) {
	n := start(b, fastConfig(b, b.TempDir()), true)
	b.Run("member", func(b *testing.B) {
		for range b.N {
			if err := n.gate.admit("n1", rpcAppendEntries); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("non-member vote", func(b *testing.B) {
		for range b.N {
			if err := n.gate.admit("n9", rpcRequestVote); err == nil {
				b.Fatal("admitted")
			}
		}
	})
}

// What a grantor certificate of a name in no configuration costs a
// grantor is bounded before the gate refuses its RPCs, which raft's
// transport decodes first: an AppendEntries larger than nonMemberBytes
// ends its connection (not decoded into memory), and it holds at most
// nonMemberConns connections at once. The cluster grants meanwhile.
func TestNonMemberConnectionsAreBounded(t *testing.T) {
	p := newTestPKI(t)
	c, audits := tlsCluster(t, p)
	li := c.leader()
	l := c.nodes[li]
	tr, hdr := raftAs(t, p, "n9")
	var ae raft.AppendEntriesResponse
	err := tr.AppendEntries(raft.ServerID(l.cfg.NodeID), raft.ServerAddress(l.RaftAddr()), &raft.AppendEntriesRequest{
		RPCHeader: hdr, Term: 1 << 40,
		Entries: []*raft.Log{{Index: 1, Term: 1 << 40, Type: raft.LogCommand, Data: make([]byte, 2*nonMemberBytes)}},
	}, &ae)
	if err == nil || strings.Contains(err.Error(), notAMember) {
		t.Fatalf("an AppendEntries of %d bytes: %v, want the connection ended before it was decoded", 2*nonMemberBytes, err)
	}
	audits[li].wait(t, "event=refused_raft", "grantor/n9, in no raft configuration, sent more than")

	cfg := p.conf(pki.RoleGrantor, "n9").ClientConfig(pki.ALPNRaft, pki.Peer{Roles: []string{pki.RoleGrantor}})
	var conns []*tls.Conn
	for range nonMemberConns + 2 {
		conn, err := tls.Dial("tcp", l.RaftAddr(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conns = append(conns, conn)
	}
	audits[li].wait(t, "event=refused_raft", fmt.Sprintf("grantor/n9, in no raft configuration, holds %d connections already", nonMemberConns))
	// The ones past the bound are closed by the grantor; a held one
	// answers nothing unasked, until the test's cleanup closes it.
	ended := make(chan struct{}, len(conns))
	for _, conn := range conns {
		go func() {
			conn.Read(make([]byte, 1))
			ended <- struct{}{}
		}()
	}
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for range len(conns) - nonMemberConns {
		select {
		case <-ended:
		case <-timer.C:
			t.Fatalf("fewer than %d of the non-member's %d connections ended", len(conns)-nonMemberConns, len(conns))
		}
	}
	sideCreds := p.conf(pki.RoleSidecar, "h1").ClientCredentials()
	if a := c.acquireAtLeader(sideCreds, acqReq("s1", 1, "jobs/during")); !a.Granted {
		t.Fatalf("acquire: %v", a)
	}
}
