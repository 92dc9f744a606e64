package grantor

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// startRecordedCluster is startGossipCluster with every node's log kept,
// and raft timeouts long enough that a busy machine changes no leader by
// itself while a test runs.
func startRecordedCluster(t *testing.T, size int) (*gossipCluster, map[*running]*recorded) {
	t.Helper()
	c := &gossipCluster{t: t, events: map[*running]*eventLog{}}
	logs := map[*running]*recorded{}
	for i := range size {
		rec := &recorded{}
		n := c.add("g"+string(rune('1'+i)), size, func(cfg *Config) {
			cfg.Logger = slog.New(rec)
			cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 3*time.Second, 3*time.Second, 3*time.Second
		})
		logs[n] = rec
		if i == 0 {
			c.seed = n.GossipAddr()
		}
	}
	c.leader()
	return c, logs
}

// messages lists the records' messages and attributes, one per line.
func (r *recorded) messages() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, rec := range r.recs {
		b.WriteString(rec.Level.String() + " " + rec.Message)
		rec.Attrs(func(a slog.Attr) bool {
			b.WriteString(" " + a.String())
			return true
		})
		b.WriteByte('\n')
	}
	return b.String()
}

// logged reports whether rec holds a record with message msg.
func (r *recorded) logged(msg string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.recs, func(rec slog.Record) bool { return rec.Message == msg })
}

func others(c *gossipCluster, not *running) []*running {
	var o []*running
	for _, n := range c.nodes {
		if n != not {
			o = append(o, n)
		}
	}
	return o
}

// Stop (SIGTERM) on the leader hands leadership over and keeps the node a
// voter: the others elect no replacement configuration, list it as a
// voter while it is down, and a reconcile pass leaves it in (gossip sees
// it fail, not leave).
func TestStopKeepsVoterAndHandsOver(t *testing.T) {
	// The transfer may take more than a second on a starved machine.
	handoverTimeout = waitTimeout
	t.Cleanup(func() { handoverTimeout = time.Second })
	c, logs := startRecordedCluster(t, 3)
	l := c.leader()
	rest := others(c, l)
	if err := l.Stop(tctx(t)); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	<-l.exited
	if l.runErr != nil {
		t.Fatalf("Run after Stop: %v", l.runErr)
	}
	if !logs[l].logged("grantor: leadership handed over") {
		t.Errorf("the stopped leader did not hand leadership over:\n%s", logs[l].messages())
	}
	c.nodes = rest
	n := c.leader()
	want := []string{"g1=Voter", "g2=Voter", "g3=Voter"}
	if got := servers(n); !slices.Equal(got, want) {
		t.Fatalf("configuration after the leader stopped: %v, want %v", got, want)
	}
	n.reconcile(tctx(t))
	if got := servers(n); !slices.Equal(got, want) {
		t.Fatalf("configuration after a reconcile pass: %v, want %v", got, want)
	}
	for _, o := range rest {
		if logs[o].logged("grantor: retiring: acknowledging nothing more") {
			t.Errorf("%s retired though only %s stopped", o.cfg.NodeID, l.cfg.NodeID)
		}
	}
}

// stopBound is what Stop may take on a grantor without a quorum: the
// issue asks for 2s; the bound leaves room for a loaded machine and is
// still far below the 10s and more it took when SIGTERM left the cluster
// (it waited for a leader to remove it).
const stopBound = 5 * time.Second

// Stop on a leader that has lost its quorum (both followers stopped)
// returns promptly: it waits for no quorum, and the handover, which has
// nobody to go to, is bounded.
func TestStopWithoutQuorumIsPrompt(t *testing.T) {
	c := startGossipCluster(t, 3)
	l := c.leader()
	for _, f := range others(c, l) {
		f.stop()
	}
	began := time.Now()
	if err := l.Stop(tctx(t)); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	took := time.Since(began)
	t.Logf("Stop without a quorum took %v", took)
	if took > stopBound {
		t.Errorf("Stop without a quorum took %v, more than %v", took, stopBound)
	}
}

// The Leave RPC (`leaseside grantor leave`) takes a follower out of the
// configuration, answers with the outcome, and then the node stops by
// itself: Run returns nil.
func TestLeaveRPCRemovesAndStops(t *testing.T) {
	c := startGossipCluster(t, 3)
	l := c.leader()
	f := others(c, l)[0]
	resp, err := f.client.Leave(tctx(t), &grantorpb.LeaveRequest{})
	if err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if resp.GetNodeId() != f.cfg.NodeID || resp.GetOutcome() != "removed" {
		t.Errorf("Leave answered %v, want node %s removed", resp, f.cfg.NodeID)
	}
	select {
	case <-f.exited:
	case <-time.After(waitTimeout):
		t.Fatal("Run still running after the Leave RPC")
	}
	if f.runErr != nil {
		t.Errorf("Run after the Leave RPC: %v", f.runErr)
	}
	waitRaft(t, "follower removed", func() bool { return len(servers(l)) == 2 }, l)
	if _, err := f.client.Leave(tctx(t), &grantorpb.LeaveRequest{}); err == nil {
		t.Errorf("the node that left still serves: a second Leave answered")
	}
}
