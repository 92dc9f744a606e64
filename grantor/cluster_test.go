package grantor

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// testCluster is a raft cluster of Nodes on loopback sharing one fake
// clock, with each node's lessor milestones recorded.
type testCluster struct {
	t      *testing.T
	clock  *clockwatch.Fake
	nodes  []*running
	events []*eventLog
	alive  []bool
}

func startCluster(t *testing.T, size int) *testCluster {
	t.Helper()
	return startClusterWith(t, size, nil)
}

// startClusterWith is startCluster with each node's config passed to
// configure first, if not nil.
func startClusterWith(t *testing.T, size int, configure func(*Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, clock: clockwatch.NewFake(clockwatch.Instant(time.Hour))}
	for i := range size {
		cfg := fastConfig(t, t.TempDir())
		// Default raft timings: with several nodes, the fast ones make
		// leadership flap when the race detector and a busy host slow
		// heartbeats down.
		cfg.HeartbeatTimeout = DefaultHeartbeatTimeout
		cfg.ElectionTimeout = DefaultElectionTimeout
		cfg.LeaderLeaseTimeout = DefaultLeaderLeaseTimeout
		cfg.NodeID = fmt.Sprintf("n%d", i+1)
		cfg.Bootstrap = i == 0
		cfg.Clock = c.clock
		for j := range i { // the cluster that adds it
			cfg.JoinServers = append(cfg.JoinServers, fmt.Sprintf("n%d", j+1))
		}
		if configure != nil {
			configure(&cfg)
		}
		ev := newEventLog()
		n := start(t, cfg, i == 0, func(n *Node) { n.lessor.hook = ev.add })
		c.nodes = append(c.nodes, n)
		c.events = append(c.events, ev)
		c.alive = append(c.alive, true)
		if i > 0 {
			c.addVoter(cfg.NodeID, n.RaftAddr())
		}
	}
	return c
}

// addVoter adds a node through whichever node leads, trying again if
// leadership moves meanwhile.
func (c *testCluster) addVoter(id, raftAddr string) {
	c.t.Helper()
	var err error
	for range 20 {
		if err = c.nodes[c.leader()].AddVoter(tctx(c.t), id, raftAddr); !errors.Is(err, ErrNotLeader) {
			break
		}
	}
	if err != nil {
		c.t.Fatalf("AddVoter %s: %v", id, err)
	}
}

// leader waits until one of the live nodes is in office and returns its
// index.
func (c *testCluster) leader() int {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ready := make(chan int, len(c.nodes))
	for i, n := range c.nodes {
		if c.alive[i] {
			go func() {
				if n.WaitReady(ctx) == nil {
					ready <- i
				}
			}()
		}
	}
	select {
	case i := <-ready:
		return i
	case <-ctx.Done():
		c.t.Fatal("no leader took office")
	}
	return -1
}

func (c *testCluster) kill(i int) {
	c.nodes[i].stop()
	c.alive[i] = false
}

// Rule: a new leader waits out the old terms from its own tE, and tokens
// keep growing across the leader change.
func TestClusterNewLeaderWaitsOutOldTerms(t *testing.T) {
	c := startCluster(t, 3)
	l1 := c.leader()
	const ttl = 10 * time.Second
	t0 := c.clock.Now()
	a := mustAcquire(t, c.nodes[l1].client, &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: "s1", Seq: 1}, Lease: "a", TtlNs: int64(ttl)})
	if !a.Granted {
		t.Fatal(a)
	}
	oldExp := c.nodes[l1].cfg.Timing.GrantorExpiry(t0, ttl)

	advanceTo(t, c.nodes[l1].lessor, c.clock, c.events[l1], t0.Add(8*time.Second))
	c.kill(l1)
	l2 := c.leader()
	n2 := c.nodes[l2]
	tE := c.clock.Now() // the fake clock stood still while n2 took office
	newExp := n2.cfg.Timing.GrantorExpiry(tE, ttl)

	if r := mustAcquire(t, n2.client, &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: "s2", Seq: 1}, Lease: "a", TtlNs: int64(ttl)}); r.Granted || r.Token != a.Token {
		t.Fatalf("new leader granted a lease of an old term at once: %v", r)
	}
	m := c.events[l2].mark()
	waiter := make(chan *grantorpb.AcquireResponse, 1)
	go func() {
		r, err := n2.client.Acquire(tctx(t), &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: "s3", Seq: 1}, Lease: "a", TtlNs: int64(ttl), WaitNs: int64(time.Hour)})
		if err != nil {
			t.Error(err)
		}
		waiter <- r
	}()
	c.events[l2].wait(t, m, "waiter queued", func(e testEvent) bool { return e.what == "queued" })

	adv := func(to clockwatch.Instant) { advanceTo(t, n2.lessor, c.clock, c.events[l2], to) }
	adv(oldExp) // the old leader's expiry has passed: not enough
	adv(newExp - 1)
	if rec, _ := n2.fsm.lease("a"); rec.Token != a.Token {
		t.Fatalf("lease freed before tE + d(1+rho) + eps: %+v", rec)
	}
	select {
	case r := <-waiter:
		t.Fatalf("waiter answered before the wait-out ended: %v", r)
	default:
	}
	adv(newExp)
	select {
	case r := <-waiter:
		if r == nil || !r.Granted || r.Token <= a.Token {
			t.Fatalf("waiter after the wait-out: %v, want a grant above %d", r, a.Token)
		}
	case <-time.After(waitTimeout):
		t.Fatal("waiter not granted after the wait-out")
	}
}

// Rule: followers fail every RPC with FailedPrecondition and a NotLeader
// detail naming the leader's gRPC address.
func TestClusterFollowersNameTheLeader(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader()
	leaderID := c.nodes[l].cfg.NodeID
	for i, n := range c.nodes {
		if i == l {
			continue
		}
		// The leader registered its address before it took office; wait
		// until this follower has applied that entry.
		c.events[i].wait(t, 0, "leader's address applied", func(e testEvent) bool {
			return e.what == "registered" && e.lease == leaderID
		})
		_, err := n.client.Acquire(tctx(t), acqReq("s", 1, "a"))
		st := status.Convert(err)
		if st.Code() != codes.FailedPrecondition {
			t.Fatalf("follower %d: %v", i, err)
		}
		var hint string
		for _, d := range st.Details() {
			if nl, ok := d.(*grantorpb.NotLeader); ok {
				hint = nl.LeaderRpcAddr
			}
		}
		if hint != c.nodes[l].RPCAddr() {
			t.Fatalf("follower %d names leader %q, want %q", i, hint, c.nodes[l].RPCAddr())
		}
		if id, addr := n.Leader(); id != leaderID || addr != hint {
			t.Fatalf("Leader() = %q %q", id, addr)
		}
	}
}

// Rule: on losing leadership, the lessor state is dropped and waiting
// calls and keepalive streams fail with NotLeader. On a busy machine the
// leadership may move on its own before the test moves it; the setup is
// then done again on the new leader.
func TestClusterLeadershipLossFailsWaitersAndStreams(t *testing.T) {
	c := startCluster(t, 3)
	for attempt := 1; !c.leadershipLoss(t, attempt); attempt++ {
		if attempt == 5 {
			t.Fatal("the leadership kept moving on its own")
		}
		t.Logf("attempt %d: the leadership moved on its own; again", attempt)
	}
}

// waitOr waits for an event matching match from index from on, and
// returns nil; or for an error on errc first, and returns it.
func (e *eventLog) waitOr(from int, errc <-chan error, match func(testEvent) bool) error {
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		e.mu.Lock()
		for i := from; i < len(e.evs); i++ {
			if match(e.evs[i]) {
				e.mu.Unlock()
				return nil
			}
		}
		from = len(e.evs)
		ch := e.changed
		e.mu.Unlock()
		select {
		case <-ch:
		case err := <-errc:
			return err
		case <-deadline.C:
			return errors.New("timed out")
		}
	}
}

// movedOn reports an error of a node that no longer leads.
func movedOn(err error) bool { return status.Code(err) == codes.FailedPrecondition }

// leadershipLoss is one try of TestClusterLeadershipLossFailsWaitersAndStreams;
// false means the leadership moved before the test moved it.
func (c *testCluster) leadershipLoss(t *testing.T, attempt int) bool {
	l := c.leader()
	n := c.nodes[l]
	lease := fmt.Sprintf("a%d", attempt)
	s1, s2, s3 := fmt.Sprintf("s1-%d", attempt), fmt.Sprintf("s2-%d", attempt), fmt.Sprintf("s3-%d", attempt)
	a, err := n.client.Acquire(tctx(t), acqReq(s1, 1, lease))
	switch {
	case movedOn(err):
		return false
	case err != nil || !a.Granted:
		t.Fatalf("acquire: %v %v", a, err)
	}
	ka, err := n.client.KeepAlive(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ka.CloseSend()
	if err := ka.Send(&grantorpb.KeepAliveRequest{Session: s1, Leases: []*grantorpb.LeaseRef{{Lease: lease, Token: a.Token}}}); err != nil {
		t.Fatal(err)
	}
	r, err := ka.Recv()
	switch {
	case movedOn(err):
		return false
	case err != nil || len(r.Renewed) != 1:
		t.Fatalf("keepalive: %v %v", r, err)
	}
	m := c.events[l].mark()
	waitErr := make(chan error, 1)
	go func() {
		req := acqReq(s2, 1, lease)
		req.WaitNs = int64(time.Hour)
		_, err := n.client.Acquire(tctx(t), req)
		waitErr <- err
	}()
	if err := c.events[l].waitOr(m, waitErr, func(e testEvent) bool { return e.what == "queued" }); movedOn(err) {
		return false
	} else if err != nil {
		t.Fatalf("the waiter did not queue: %v", err)
	}

	if err := n.raft.LeadershipTransfer().Error(); errors.Is(err, raft.ErrNotLeader) {
		return false
	} else if err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	if err := <-waitErr; status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("waiter on a deposed leader: %v, want FailedPrecondition", err)
	}
	if _, err := ka.Recv(); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("keepalive stream on a deposed leader: %v, want FailedPrecondition", err)
	}
	// The new leader carries on with the next token (asked again should
	// the leadership move once more on its own).
	for {
		r, err := c.nodes[c.leader()].client.Acquire(tctx(t), acqReq(s3, 1, "b"+lease))
		if movedOn(err) {
			continue
		}
		if err != nil || !r.Granted || r.Token <= a.Token {
			t.Fatalf("acquire on the new leader: %v %v", r, err)
		}
		return true
	}
}
