package grantor

import (
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// TEAM.md decision 1: a grant's identity is its token. A holder asking
// again for a lease it holds gets a new grant with the next token and its
// new term, in one entry; the old grant is over, and a Release that names
// its token changes nothing. Only a retry of the same (session, seq)
// returns the same token.
func TestFSMHolderReacquireTakesNextToken(t *testing.T) {
	f := newTestFSM()
	acquire := func(seq uint64, ttl time.Duration) *acquireResult {
		t.Helper()
		r, ok := f.apply(cmdAcquire3, acquireCmd{ID: requestID{Session: "s1", Seq: seq}, Lease: "a", Owner: "o", TTL: ttl}).(*acquireResult)
		if !ok || !r.Granted {
			t.Fatalf("acquire seq %d: %+v", seq, r)
		}
		return r
	}
	first := acquire(1, 10*time.Second)
	again := acquire(2, 20*time.Second)
	if again.Token != first.Token+1 || again.TTL != 20*time.Second {
		t.Fatalf("re-acquire by the holder: token %d ttl %v, want token %d ttl 20s", again.Token, again.TTL, first.Token+1)
	}
	if rec, _ := f.lease("a"); rec.Token != again.Token || rec.TTL != 20*time.Second {
		t.Fatalf("lease after re-acquire: %+v", rec)
	}
	if retry := acquire(2, 20*time.Second); retry.Token != again.Token {
		t.Fatalf("retry of seq 2: token %d, want the same %d", retry.Token, again.Token)
	}
	// Issue 9 item 2: the release of the old grant, retried after the
	// re-acquire, lands: it must not free the new grant.
	if f.release(t, "s1", 3, "a", "o", first.Token) {
		t.Fatal("a release naming the old grant's token freed the lease")
	}
	if rec, ok := f.lease("a"); !ok || rec.Token != again.Token {
		t.Fatalf("after the stale release: %+v %v, want held with %d", rec, ok, again.Token)
	}
	if !f.release(t, "s1", 4, "a", "o", again.Token) {
		t.Fatal("release naming the live grant failed")
	}
}

// Mixed versions: while some server has not registered cmdAcquire3, the
// leader writes the older entry, in which the holder keeps its token, and
// every replica applies it the same way.
func TestLessorReacquireKeepsTokenUntilEveryServerKnowsAcquire3(t *testing.T) {
	h := newHarness(t)
	h.raft.allowCmd.Store(uint32(cmdRelease2))
	h.takeOffice()
	first := h.acquire(acq("s1", 1, "a", 10*time.Second))
	if again := h.acquire(acq("s1", 2, "a", 20*time.Second)); !again.Granted || again.Token != first.Token {
		t.Fatalf("re-acquire with an older server in the cluster: %+v, want token %d kept", again, first.Token)
	}
	h.raft.allowCmd.Store(uint32(cmdAcquire3))
	if again := h.acquire(acq("s1", 3, "a", 20*time.Second)); !again.Granted || again.Token != first.Token+1 {
		t.Fatalf("re-acquire once every server knows acquire3: %+v, want token %d", again, first.Token+1)
	}
}

// Issue 9 item 2 through a real grantor over gRPC: a lost lease's release,
// retried after its owner re-acquired, does not free the re-acquired
// lease, and nobody else can then take it.
func TestNodeStaleReleaseDoesNotFreeReacquiredLease(t *testing.T) {
	n := start(t, fastConfig(t, t.TempDir()), true)
	c := n.client
	first := mustAcquire(t, c, acqReq("s1", 1, "a"))
	again := mustAcquire(t, c, acqReq("s1", 2, "a"))
	if !again.Granted || again.Token <= first.Token {
		t.Fatalf("re-acquire: %v, want a grant with a token above %d", again, first.Token)
	}
	rel, err := c.Release(tctx(t), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: "s1", Seq: 3}, Lease: "a", Owner: "o", Token: first.Token})
	if err != nil || rel.Released {
		t.Fatalf("stale release: %v %v, want not released", rel, err)
	}
	if other := mustAcquire(t, c, acqReq("s2", 1, "a")); other.Granted || other.Token != again.Token {
		t.Fatalf("another session's acquire after the stale release: %v, want refused naming token %d", other, again.Token)
	}
}

// The grant reply states the term the grantor stored and its timing model;
// a renewal states the term it applied (TEAM.md decision 2).
func TestNodeRepliesStateTermAndTiming(t *testing.T) {
	cfg := fastConfig(t, t.TempDir())
	n := start(t, cfg, true)
	req := acqReq("s1", 1, "a")
	req.TtlNs = int64(7 * time.Second)
	a := mustAcquire(t, n.client, req)
	if a.TtlNs != req.TtlNs || a.Rho != cfg.Timing.Rho || a.EpsilonNs != int64(cfg.Timing.Epsilon) {
		t.Fatalf("acquire reply: ttl %d rho %v eps %d; want %d, %v, %d", a.TtlNs, a.Rho, a.EpsilonNs, req.TtlNs, cfg.Timing.Rho, int64(cfg.Timing.Epsilon))
	}
	ka, err := n.client.KeepAlive(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ka.CloseSend()
	// The holder assumes another term than the stored one: the renewal
	// runs with the stored term and says so.
	if err := ka.Send(&grantorpb.KeepAliveRequest{Session: "s1", Batch: 1, Leases: []*grantorpb.LeaseRef{{Lease: "a", Token: a.Token, TtlNs: int64(30 * time.Second)}}}); err != nil {
		t.Fatal(err)
	}
	kr, err := ka.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(kr.Renewed) != 1 || kr.Renewed[0].TtlNs != req.TtlNs || kr.Rho != cfg.Timing.Rho || kr.EpsilonNs != int64(cfg.Timing.Epsilon) {
		t.Fatalf("keepalive reply: %v, want a renewal stating ttl %d and the timing model", kr, req.TtlNs)
	}
}

// TEAM.md decision 4 on a real node: with a server in the configuration
// that never registered (an older grantor), a holder's re-acquire keeps
// its token (cmdAcquire); once that server is gone, every server knows
// cmdAcquire3 and a re-acquire takes the next token.
func TestNodeProposesNewTypesOnlyWhenEveryServerKnows(t *testing.T) {
	ev := newEventLog()
	n := start(t, fastConfig(t, t.TempDir()), true, func(n *Node) { n.lessor.hook = ev.add })
	if got := (raftProposer{n.Node}).allowed(); got != newestCmd {
		t.Fatalf("single registered node: allowed %v, want %v", got, newestCmd)
	}
	if err := n.await(tctx(t), n.raft.AddNonvoter("old", "127.0.0.1:1", 0, 0)); err != nil {
		t.Fatal(err)
	}
	if got := (raftProposer{n.Node}).allowed(); got != baselineCmd {
		t.Fatalf("with an unregistered server: allowed %v, want %v", got, baselineCmd)
	}
	first := mustAcquire(t, n.client, acqReq("s1", 1, "a"))
	if again := mustAcquire(t, n.client, acqReq("s1", 2, "a")); again.Token != first.Token {
		t.Fatalf("re-acquire with an older server: token %d, want %d kept", again.Token, first.Token)
	}
	if err := n.RemoveServer(tctx(t), "old"); err != nil {
		t.Fatal(err)
	}
	if again := mustAcquire(t, n.client, acqReq("s1", 3, "a")); again.Token != first.Token+1 {
		t.Fatalf("re-acquire once every server knows acquire3: token %d, want %d", again.Token, first.Token+1)
	}
}

// Followers register their newest command type with the leader, so that a
// cluster of current grantors uses the newest types.
func TestClusterFollowersRegisterTheirCommands(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader()
	for i, n := range c.nodes {
		if i == l {
			continue
		}
		id := n.NodeID()
		c.events[l].wait(t, 0, "registration of "+id, func(e testEvent) bool {
			return e.what == "registered" && e.lease == id && c.nodes[l].fsm.nodeCmd(id) == newestCmd
		})
	}
	if got := (raftProposer{c.nodes[l].Node}).allowed(); got != newestCmd {
		t.Fatalf("allowed %v on a cluster of current grantors, want %v", got, newestCmd)
	}
}
