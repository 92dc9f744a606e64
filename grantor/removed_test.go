package grantor

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// killRaft stops n's raft and closes its raft transport, so that it
// answers no raft request any more, as after a kill -9, while its gossip
// member runs on: the state memberlist shows for seconds after a kill,
// before it declares the member dead, held here for as long as the test
// needs it.
func killRaft(t *testing.T, n *running) {
	t.Helper()
	if err := n.raft.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	if err := n.trans.Close(); err != nil {
		t.Fatal(err)
	}
}

// leading waits until one of nodes leads and has taken office, and
// returns it.
func leading(t *testing.T, nodes ...*running) *running {
	t.Helper()
	c := &gossipCluster{t: t, nodes: nodes}
	return c.leader()
}

// operatorRemove removes id as `leaseside members remove` does: at
// whichever of nodes leads, again when it stopped leading meanwhile. It
// returns the leader that removed it.
func operatorRemove(t *testing.T, id string, nodes ...*running) *running {
	t.Helper()
	for {
		l := leading(t, nodes...)
		_, err := l.client.RemoveServer(tctx(t), &grantorpb.RemoveServerRequest{NodeId: id})
		switch {
		case err == nil:
			return l
		case status.Code(err) != codes.FailedPrecondition:
			t.Fatalf("RemoveServer %s: %v", id, err)
		}
	}
}

// hasServer reports whether n's raft configuration lists id.
func hasServer(n *running, id string) bool {
	return slices.ContainsFunc(servers(n), func(s string) bool { return s == id+"=Voter" || s == id+"=Nonvoter" })
}

// Chaos finding F3, first half: `members remove` of a grantor killed a
// moment ago, which gossip still lists alive, sticks. Reconciliation adds
// it back neither on the leader that removed it nor on the next one (every
// node noted the removal); once it comes back as another run, it is added
// again, as a non-voter until it answers.
func TestRemovedGrantorStaysOut(t *testing.T) {
	c := startGossipCluster(t, 3)
	victim := others(c, c.leader())[0]
	id := victim.cfg.NodeID
	rest := others(c, victim)
	killRaft(t, victim)
	l := operatorRemove(t, id, rest...)
	if s := gossipState(l, id); s != gossip.StateAlive {
		t.Fatalf("setup: gossip lists %s as %q, want alive", id, s)
	}
	l.reconcile(tctx(t))
	if hasServer(l, id) {
		t.Fatalf("a grantor just removed was added back while gossip still lists it alive: %v", servers(l))
	}

	// The other one leads next (it may already): it keeps it out too.
	next := others(&gossipCluster{nodes: rest}, l)[0]
	transferTo(t, next, rest...)
	next.reconcile(tctx(t))
	if hasServer(next, id) {
		t.Fatalf("the next leader added back a grantor the last one removed: %v", servers(next))
	}

	// It restarts: another run of it gossips (on its old address, so it
	// never answers over raft here), and the leader stages it again.
	meta := victim.gossip.Meta()
	if err := victim.gossip.Shutdown(); err != nil {
		t.Fatal(err)
	}
	again, err := gossip.Start(tctx(t), gossip.Config{
		Name: victim.gossip.Name(), BindAddr: victim.GossipAddr(), Join: []string{next.GossipAddr()},
		Timing: gossip.LoopbackTiming(), Meta: meta,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = again.Shutdown() })
	waitRaft(t, id+" staged again after it restarted", func() bool {
		return slices.Contains(leaderServers(rest), id+"=Nonvoter")
	}, rest...)
}

// Chaos finding F3, second half: a staged grantor is promoted only on an
// answer to a raft request sent after its staging. One that died a moment
// ago (gossip still lists it alive, as a voter) answered the leader
// until then; that answer does not make it a voter again.
func TestPromotionNeedsAnAnswerAfterStaging(t *testing.T) {
	c := startGossipCluster(t, 3)
	l := c.leader()
	victim := others(c, l)[0]
	id := victim.cfg.NodeID
	rest := others(c, victim)
	waitContacts(t, l, victim)
	killRaft(t, victim)
	// Staged again: a non-voter that gossips that it is to be a voter.
	for {
		l = leading(t, rest...)
		err := l.await(tctx(t), l.raft.DemoteVoter(raft.ServerID(id), 0, membershipTimeout))
		if err == nil {
			break
		}
		if !errors.Is(err, ErrNotLeader) {
			t.Fatalf("DemoteVoter: %v", err)
		}
	}
	for range 3 {
		l = leading(t, rest...)
		l.reconcile(tctx(t))
		if got := servers(l); !slices.Contains(got, id+"=Nonvoter") {
			t.Fatalf("a dead grantor was promoted on an answer from before its staging: %v", got)
		}
	}
}

// transferTo makes to the leader of nodes, and waits until it is in
// office.
func transferTo(t *testing.T, to *running, nodes ...*running) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		l := leading(t, nodes...)
		if l == to {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not take leadership over", to.cfg.NodeID)
		}
		// It returns once the transfer is done or has failed.
		err := l.raft.LeadershipTransferToServer(raft.ServerID(to.cfg.NodeID), raft.ServerAddress(to.RaftAddr())).Error()
		if err != nil {
			t.Logf("leadership transfer to %s: %v; again", to.cfg.NodeID, err)
		}
	}
}

// The transport tells an answer to a request sent after a moment from
// one sent before it.
func TestContactTransportAnsweredAfter(t *testing.T) {
	addrA, a := raft.NewInmemTransport("a")
	addrB, b := raft.NewInmemTransport("b")
	a.Connect(addrB, b)
	b.Connect(addrA, a)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case rpc := <-b.Consumer():
				rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
			case <-done:
				return
			}
		}
	}()
	ct := newContactTransport(a)
	send := func() error {
		return ct.AppendEntries("b", addrB, &raft.AppendEntriesRequest{}, &raft.AppendEntriesResponse{})
	}
	before := ct.requests()
	if _, ok := ct.answeredAfter("b", before); ok {
		t.Fatal("answered before any request")
	}
	if err := send(); err != nil {
		t.Fatal(err)
	}
	if d, ok := ct.answeredAfter("b", before); !ok || d < 0 || d > waitTimeout {
		t.Fatalf("answeredAfter = %v, %v after an answer", d, ok)
	}
	staged := ct.requests()
	if _, ok := ct.answeredAfter("b", staged); ok {
		t.Fatal("an answer to a request sent before the mark counts after it")
	}
	a.Disconnect(addrB)
	if err := send(); err == nil {
		t.Fatal("a disconnected peer answered")
	}
	if _, ok := ct.answeredAfter("b", staged); ok {
		t.Fatal("a failed request counts as an answer")
	}
	if _, ok := ct.lastContact("b"); !ok {
		t.Fatal("the last contact was forgotten")
	}
	a.Connect(addrB, b)
	if err := send(); err != nil {
		t.Fatal(err)
	}
	if _, ok := ct.answeredAfter("b", staged); !ok {
		t.Fatal("an answer to a request sent after the mark does not count")
	}
}
