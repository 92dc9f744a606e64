package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
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
// long as the test waits for two renewals through the new leader. The
// sidecar finds the grantors by gossip, and its ready line says so; it
// says why it stopped.
func TestClusterFailoverLogsNoErrors(t *testing.T) {
	t.Parallel()
	const term = 6 * time.Second
	c := newLoopbackCluster(t, 3)
	c.startAll()
	s := startSidecar(t, "sidecar", nil, "--join", c.gossipAddrs(0), "--gossip-addr", "127.0.0.1:0")
	s.waitLine(t, 0, "leaseside daemon ready", "join=["+c.gossipAddrs(0)+"]", "gossip=127.0.0.1:")
	s.waitLine(t, 0, "reached the grantor leader") // gossip told it of one (TestClusterFiveGrantorsLoseTwo)
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
	m := s.out.mark()
	s.term(t)
	s.waitLine(t, m, "leaseside daemon stopped", `why="signal terminated"`)
}

// renewals checks what a sidecar reported of one grant: every renewal came
// before the deadline the grant had (nothing lapsed), and no two
// successive confirmations (the grant, then each renewal) are further
// apart than the term. It returns the longest gap.
func renewals(t *testing.T, s *sidecar, lease, token string, granted stamped[int64], term time.Duration) time.Duration {
	t.Helper()
	prevAt, deadline := granted.at, clockwatch.Instant(granted.v)
	var longest time.Duration
	n := 0
	for _, e := range s.events.all() {
		if e.v.Lease != lease || e.v.Token != token || e.v.Event != ipc.EventRenewed || !e.at.After(granted.at) {
			continue
		}
		n++
		gap := e.at.Sub(prevAt)
		longest = max(longest, gap)
		if gap > term {
			t.Errorf("%s: renewal %d came %s after the one before, more than the term %s", lease, n, ms(gap), term)
		}
		if !e.at.Before(deadline) {
			t.Errorf("%s: renewal %d seen %s after the deadline it had", lease, n, ms(e.at.Sub(deadline)))
		}
		prevAt, deadline = e.at, clockwatch.Instant(e.v.DeadlineBoottimeNs)
	}
	if n == 0 {
		t.Errorf("%s: never renewed", lease)
	}
	return longest
}

// A rolling restart of the three grantors, one at a time with SIGTERM and
// a start on the same data dir, while a sidecar holds leases of a 6s term
// for a Go client and for the CLI and renews them: SIGTERM keeps each
// grantor a voter (it never leaves the configuration, so the cluster
// never runs on two voters re-adding the third), a stopped leader hands
// leadership over, and no lease is lost: no lost event, every renewal
// before the deadline it extended and no gap between renewals longer
// than the term, the same tokens valid at the end, and three voters.
func TestClusterRollingRestartLosesNoLease(t *testing.T) {
	t.Parallel()
	const term = 6 * time.Second
	c := newLoopbackCluster(t, 3)
	c.startAll()
	s := startSidecar(t, "sidecar", nil, "--grantors", c.rpcAddrs())
	ctx := tctx(t)

	type held struct {
		name, token string
		granted     stamped[int64] // the grant's deadline, seen when
		lease       *ipc.Lease     // the Go client's
	}
	var leases []*held
	at := boottime()
	l, err := s.client(t).Acquire(ctx, "jobs/rolling-go", ipc.AcquireOptions{TTL: term})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	leases = append(leases, &held{name: "jobs/rolling-go", token: l.Token, lease: l, granted: stamped[int64]{l.Deadline(), at}})
	at = boottime()
	g := acquireCLI(t, s, "jobs/rolling-cli", "--ttl", term.String(), "--detached")
	leases = append(leases, &held{name: "jobs/rolling-cli", token: g.Token, granted: stamped[int64]{g.DeadlineBoottimeNs, at}})

	for i, n := range c.nodes {
		leader := c.currentLeader()
		marks := c.marks()
		began := boottime()
		c.stop(i)
		stopped := boottime()
		what := "a follower"
		if leader.node == i {
			what = "the leader"
			next := c.waitOffice(marks, c.others(i)...)
			t.Logf("%s (%s) stopped in %s; %s took office %s after the SIGTERM", n.id, what, ms(stopped.Sub(began)),
				c.nodes[next.node].id, ms(next.seen.Sub(began)))
		} else {
			t.Logf("%s (%s) stopped in %s", n.id, what, ms(stopped.Sub(began)))
		}
		if out := n.proc.tail(40); strings.Contains(out, "removed from the raft configuration") || strings.Contains(out, "leaving the cluster") {
			t.Fatalf("%s left the cluster on SIGTERM:\n%s", n.id, out)
		}
		ev := s.events.mark()
		c.start(i)
		c.waitReady(i)
		n.proc.waitLine(t, 0, "grantor: leader is")
		// Every lease renewed since the restart: the cluster serves with
		// the grantor back.
		for _, h := range leases {
			s.waitEvent(t, ev, ipc.EventRenewed, h.name)
		}
		t.Logf("%s back and following %s after the SIGTERM", n.id, ms(boottime().Sub(began)))
	}
	// One more renewal of each, then the checks.
	ev := s.events.mark()
	for _, h := range leases {
		s.waitEvent(t, ev, ipc.EventRenewed, h.name)
	}
	for _, l := range s.lost() {
		t.Errorf("lease lost during the rolling restart: %+v", l.v)
	}
	for _, h := range leases {
		longest := renewals(t, s, h.name, h.token, h.granted, term)
		t.Logf("%s: longest gap between renewals %s (term %s)", h.name, ms(longest), term)
		cli(t, s.socket, "check", h.name, "--token", h.token).must(t, 0)
		if h.lease != nil && !h.lease.Valid() {
			t.Errorf("the Go client's lease %s is no longer valid (%s)", h.name, h.lease.Reason())
		}
	}
	r := cli(t, s.socket, "members", "--grantors", c.rpcAddrs(), "--json").must(t, 0)
	var m struct {
		Members []struct {
			NodeID string `json:"node_id"`
			Voter  bool   `json:"voter"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("members --json: %v\n%s", err, r.stdout)
	}
	voters := 0
	for _, mm := range m.Members {
		if mm.Voter {
			voters++
		}
	}
	if voters != 3 {
		t.Errorf("after the rolling restart %d voters, want 3:\n%s", voters, r.stdout)
	}
}

// SIGTERM on a grantor that has lost its quorum (the two others killed)
// stops it promptly: it waits for no leader (it used to wait for one to
// remove it, 10s and more, until a second signal). Not parallel: it bounds
// how long the stop takes (stopBound).
func TestClusterStopWithoutQuorum(t *testing.T) {
	c := newLoopbackCluster(t, 3)
	c.startAll()
	c.waitOffice(c.marks0())
	leader := c.currentLeader()
	last := c.others(leader.node)[0]
	for _, i := range c.others(last) {
		c.kill(i)
	}
	// The survivor notices: whatever it was, it has no leader now.
	c.nodes[last].proc.waitLine(t, 0, "grantor: no leader known")
	began := boottime()
	c.stop(last)
	took := boottime().Sub(began)
	t.Logf("SIGTERM to exit without a quorum: %s", ms(took))
	if took > stopBound {
		t.Errorf("SIGTERM to exit took %s without a quorum, more than %s", ms(took), stopBound)
	}
}

// stopBound is the most SIGTERM may take to stop a grantor. The target is
// 2s; the bound leaves room for a loaded machine and the race detector.
const stopBound = 5 * time.Second
