package grantor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/leaseside/leaseside/grantor/pki"
)

// removalRounds waits for n's rounds of asking whether it was removed
// (watchLeaders), advancing the cluster's clock at the call and after
// each round (which is what starts the next), until n has completed want rounds since the call
// (then stopped is false) or n stopped (then true); want 0 waits for the
// stop. last is the last round's log line.
func removalRounds(t *testing.T, c *testCluster, logs *lineLog, n *running, want int) (stopped bool, last string) {
	t.Helper()
	from := logs.mark()
	c.clock.Advance(removalAskEvery) // for a round that ended before the call
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	seen, rounds := 0, 0
	for {
		logs.mu.Lock()
		ch, lines := logs.changed, logs.lines[from:]
		from += len(lines)
		for _, line := range lines {
			if strings.Contains(line, removalRoundLine) {
				rounds++
				last = line
			}
		}
		logs.mu.Unlock()
		if rounds > seen {
			seen = rounds
			if want > 0 && seen >= want {
				select {
				case <-n.exited:
					return true, last
				default:
					return false, last
				}
			}
			c.clock.Advance(removalAskEvery)
		}
		select {
		case <-n.exited:
			return true, last
		case <-ch:
		case <-timer.C:
			t.Fatalf("timed out waiting for %s's rounds of asking whether it was removed (%d of %d seen; the last: %s)", n.cfg.NodeID, seen, want, last)
		}
	}
}

// exited reports whether n's Run has returned.
func exited(n *running) bool {
	select {
	case <-n.exited:
		return true
	default:
		return false
	}
}

// lists reports whether n's latest raft configuration lists id.
func lists(n *running, id string) bool {
	for _, s := range n.raft.GetConfiguration().Configuration().Servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

// transfer hands leadership from c's node from to its node to.
func (c *testCluster) transfer(t *testing.T, from, to int) {
	t.Helper()
	toNode := c.nodes[to]
	if err := c.nodes[from].raft.LeadershipTransferToServer(raft.ServerID(toNode.cfg.NodeID), raft.ServerAddress(toNode.RaftAddr())).Error(); err != nil {
		t.Fatalf("leadership transfer to %s: %v", toNode.cfg.NodeID, err)
	}
	waitRaft(t, toNode.cfg.NodeID+" leads", func() bool { return toNode.raft.State() == raft.Leader }, toNode)
}

// fill appends entries entries (barriers) to the log through leader l,
// more than raft sends in one AppendEntries.
func fill(t *testing.T, l *running, entries int) {
	t.Helper()
	for range entries {
		if err := l.raft.Barrier(waitTimeout).Error(); err != nil {
			t.Fatalf("barrier: %v", err)
		}
	}
}

// Issue 21 item 1, the removed node's case, from a 30-minute chaos run: a
// grantor that catches up passes through historical configurations, and
// one that lacks it is no evidence that it was removed. Here grantor d
// (n3 or whichever follows) was removed while down, then added back; when
// it starts again, the leader b sends it the history, in which a
// configuration lists only a (the one from when b too was out), and d's
// raft gate then refuses b (not a server of that configuration) and
// forgets the leader: d sits on a historical configuration without it.
// It must not stop: a asks, and a's configuration lists d. Once a leads,
// d catches up and is a member again. (Before the fix d stopped here as
// "removed from the raft configuration".)
func TestCatchingUpThroughARemovalAndReAddDoesNotStop(t *testing.T) {
	p := newTestPKI(t)
	c, _, logs := tlsClusterLogged(t, p)
	ai := c.leader()
	bi, di := (ai+1)%3, (ai+2)%3
	a, b, d := c.nodes[ai], c.nodes[bi], c.nodes[di]
	aID, bID, dID := a.cfg.NodeID, b.cfg.NodeID, d.cfg.NodeID

	// d down and removed, then b: the configuration is {a}.
	c.kill(di)
	if err := a.RemoveServer(tctx(t), dID); err != nil {
		t.Fatalf("RemoveServer %s: %v", dID, err)
	}
	c.kill(bi)
	if err := a.RemoveServer(tctx(t), bID); err != nil {
		t.Fatalf("RemoveServer %s: %v", bID, err)
	}
	fill(t, a, 200)

	// b back (it catches up through {a} from a, which {a} lists), and
	// leading; then d back, added by b while d runs with its old log.
	b = start(t, b.cfg, false)
	c.nodes[bi], c.alive[bi] = b, true
	if err := a.AddVoter(tctx(t), bID, b.RaftAddr()); err != nil {
		t.Fatalf("AddVoter %s: %v", bID, err)
	}
	waitRaft(t, bID+" caught up", func() bool { return lists(b, bID) && b.raft.AppliedIndex() >= a.raft.CommitIndex() }, a, b)
	c.transfer(t, ai, bi)
	d = start(t, d.cfg, false)
	c.nodes[di], c.alive[di] = d, true
	if f := d.raft.GetConfiguration(); f.Error() != nil || !lists(d, dID) {
		t.Fatalf("d's own configuration does not list it at its start: %+v, %v (exited %v)", f.Configuration(), f.Error(), exited(d))
	}
	dFrom := logs[di].mark()
	if err := b.AddVoter(tctx(t), dID, d.RaftAddr()); err != nil {
		t.Fatalf("AddVoter %s: %v", dID, err)
	}
	logs[di].waitFrom(t, dFrom, "grantor: this grantor's latest raft configuration does not list it", "servers=["+aID+"]")
	if stopped, line := removalRounds(t, c, logs[di], d, 2); stopped || !strings.Contains(line, "listed_by=["+aID+"]") {
		t.Fatalf("d, caught up to a historical configuration without it: stopped %v, last round %q", stopped, line)
	}

	c.transfer(t, bi, ai)
	waitRaft(t, dID+" caught up", func() bool { return lists(d, dID) && d.raft.AppliedIndex() >= a.raft.CommitIndex() }, a, d)
	logs[di].waitFrom(t, dFrom, "grantor: this grantor's latest raft configuration lists it again")
	if exited(d) {
		t.Fatalf("d stopped: %v", d.runErr)
	}
}

// A grantor removed while it cannot reach a majority of its new
// configuration's voters (here: b is down, so of {a, b} only a can
// answer) does not stop, however often it asks; once b is back and a
// majority confirms, it stops. (Before the fix it stopped at once.)
func TestRemovedWithoutAMajorityWaitsUntilOneConfirms(t *testing.T) {
	p := newTestPKI(t)
	c, _, logs := tlsClusterLogged(t, p)
	ai := c.leader()
	bi, di := (ai+1)%3, (ai+2)%3
	a, b, d := c.nodes[ai], c.nodes[bi], c.nodes[di]
	dID := d.cfg.NodeID
	waitRaft(t, "d knows a and b", func() bool {
		return d.fsm.nodeAddr(a.cfg.NodeID) != "" && d.fsm.nodeAddr(b.cfg.NodeID) != ""
	}, a, d)

	c.kill(bi)
	dFrom := logs[di].mark()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// a loses office without b, so this may fail; the entry commits
	// once b is back and a leads again.
	go a.RemoveServer(ctx, dID) //nolint:errcheck
	logs[di].waitFrom(t, dFrom, "grantor: this grantor's latest raft configuration does not list it")
	if stopped, line := removalRounds(t, c, logs[di], d, 3); stopped || !strings.Contains(line, "confirmed=false") {
		t.Fatalf("without a majority to ask: stopped %v, last round %q", stopped, line)
	}

	// Back at its addresses: those that a's configuration and d's state have.
	bcfg := b.cfg
	bcfg.RaftAddr, bcfg.RPCAddr = b.RaftAddr(), b.RPCAddr()
	b = start(t, bcfg, false)
	c.nodes[bi], c.alive[bi] = b, true
	if stopped, _ := removalRounds(t, c, logs[di], d, 0); !stopped {
		t.Fatal("d still runs")
	}
	if d.runErr != nil {
		t.Fatalf("d's Run: %v, want nil", d.runErr)
	}
	c.alive[di] = false
	logs[di].waitFrom(t, 0, removalRoundLine, "confirmed=true")
	sideCreds := p.conf(pki.RoleSidecar, "h1").ClientCredentials()
	if r := c.acquireAtLeader(sideCreds, acqReq("s1", 1, "jobs/after")); !r.Granted {
		t.Fatalf("acquire after the removal: %v", r)
	}
}
