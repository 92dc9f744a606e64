package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// The operations tests: what an operator of a grantor cluster sees and
// does in normal operation (failovers, restarts), as opposed to the
// faults of cluster_test.go.

// errorLines returns the lines of p's output logged at ERROR (text or
// JSON log format).
func errorLines(p *process) []string {
	var errs []string
	for _, l := range p.out.all() {
		if strings.Contains(l.v, "level=ERROR") || strings.Contains(l.v, `"level":"ERROR"`) {
			errs = append(errs, l.v)
		}
	}
	return errs
}

// A normal failover, the leader killed and started again while a sidecar
// holds a lease, logs no ERROR line on any grantor: hashicorp/raft logs
// every failed RPC to an unreachable peer at ERROR, which during a
// failover or a restart is routine (grantor/hclog.go demotes those lines
// to WARN, at most one per peer and message every few seconds, and keeps
// real errors at ERROR). The survivors keep retrying the dead peer for as
// long as the test waits for two renewals through the new leader.
func TestClusterFailoverLogsNoErrors(t *testing.T) {
	const term = 6 * time.Second
	c := newLoopbackCluster(t, 3)
	c.startAll()
	s := startSidecar(t, "sidecar", nil, "--grantors", c.rpcAddrs())
	g := acquireCLI(t, s, "jobs/quiet-failover", "--ttl", term.String(), "--detached")

	leader := c.currentLeader()
	marks := c.marks()
	ev := s.events.mark()
	killed := c.kill(leader.node)
	next := c.waitOffice(marks, c.others(leader.node)...)
	t.Logf("leader %s killed; %s took office %s later", c.nodes[leader.node].id, c.nodes[next.node].id, ms(next.seen.Sub(killed)))
	for range 2 {
		ev, _ = s.waitEvent(t, ev, ipc.EventRenewed, "jobs/quiet-failover")
		ev++
	}
	c.start(leader.node)
	c.waitReady(leader.node)
	for range 2 {
		ev, _ = s.waitEvent(t, ev, ipc.EventRenewed, "jobs/quiet-failover")
		ev++
	}
	for _, l := range s.lost() {
		t.Errorf("lease lost across the failover: %+v", l.v)
	}
	cli(t, s.socket, "check", "jobs/quiet-failover", "--token", g.Token).must(t, 0)

	for _, n := range c.nodes {
		errs := errorLines(n.proc)
		for _, l := range errs {
			t.Errorf("grantor %s logged at ERROR during a normal failover: %s", n.id, l)
		}
	}
	for _, l := range errorLines(s.process) {
		t.Errorf("the sidecar logged at ERROR during a normal failover: %s", l)
	}
}
