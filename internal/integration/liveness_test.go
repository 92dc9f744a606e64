package integration

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/internal/netlab"
	"github.com/leaseside/leaseside/ipc"
)

// Issue 9, liveness: a sidecar started before any grantor serves its
// socket at once (status, clock, members with an empty list), answers
// acquires with unavailable after their wait, retries its gossip seeds in
// the background, and grants as soon as a leader appears, logging once
// that it reached it. Its ready line says how it finds grantors, and it
// logs when it stops and why.
func TestSidecarStartsBeforeGrantors(t *testing.T) {
	t.Parallel()
	c := newLoopbackCluster(t, 1)
	seed := c.gossipAddrs()
	started := boottime()
	s := startSidecar(t, "sidecar", nil, "--join", seed)
	_, ready := s.waitLine(t, 0, "leaseside daemon ready")
	t.Logf("socket served %s after the start, with no grantor up: %s", ms(ready.at.Sub(started)), ready.v)
	if !strings.Contains(ready.v, "join="+seed) && !strings.Contains(ready.v, "join=["+seed+"]") {
		t.Errorf("the ready line does not say how the sidecar finds grantors (join %s): %s", seed, ready.v)
	}
	ctx := tctx(t)
	cl := s.client(t)
	st, err := cl.StatusAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Grantor == nil || st.Grantor.LeaderReachable || st.Grantor.FoundBy != "gossip" {
		t.Fatalf("status before any grantor: %+v, want no leader reachable, grantors found by gossip", st.Grantor)
	}
	if _, err := cl.Clock(ctx); err != nil {
		t.Fatalf("clock before any grantor: %v", err)
	}
	if ms, _, err := cl.Members(ctx); err != nil || len(ms) != 0 {
		t.Fatalf("members before any grantor: %v %v, want an empty list", ms, err)
	}
	const wait = time.Second
	asked := boottime()
	_, err = cl.Acquire(ctx, "jobs/early", ipc.AcquireOptions{TTL: 5 * time.Second, Wait: wait})
	answered := boottime()
	if !errors.Is(err, ipc.ErrUnavailable) {
		t.Fatalf("acquire with no grantor: %v, want unavailable", err)
	}
	if answered.Sub(asked) < wait {
		t.Fatalf("acquire with no grantor answered after %s, before its wait of %v ran out", ms(answered.Sub(asked)), wait)
	}
	t.Logf("acquire with no grantor: unavailable after %s (wait %v): %v", ms(answered.Sub(asked)), wait, err)

	mark := s.out.mark()
	c.startAll()
	_, reached := s.waitLine(t, mark, "reached the grantor leader")
	t.Logf("reached the leader %s after the grantor's start", ms(reached.at.Sub(asked)))
	if _, err := cl.Acquire(ctx, "jobs/early", ipc.AcquireOptions{TTL: 5 * time.Second}); err != nil {
		t.Fatalf("acquire once a leader is up: %v", err)
	}
	if st, err := cl.StatusAll(ctx); err != nil || !st.Grantor.LeaderReachable {
		t.Fatalf("status with a leader: %+v %v, want it reachable", st.Grantor, err)
	}
	mark = s.out.mark()
	s.term(t)
	s.waitLine(t, mark, "leaseside daemon stopped", "signal terminated")
}

// Issue 9, liveness: wait_ms is kept. The grantor the sidecar sends to,
// the leader, is cut off from every host, the sidecar's included: it
// neither answers nor resets anything. An acquire with a wait must still
// be granted within its wait by the majority side's new leader: the
// sidecar abandons a grantor that does not confirm it leads within a
// second (about an election timeout), where it used to wait out the whole
// attempt (wait plus 3 s) first.
func TestClusterAcquireKeepsItsWaitWhileLeaderCutOff(t *testing.T) {
	t.Parallel()
	const wait = 6 * time.Second
	// Hosts 0-2: grantors; 3: the sidecar.
	lab := netlab.New(t, 4)
	c := newLabCluster(t, lab, 0, 1, 2)
	c.startAll()
	s := startSidecar(t, "sidecar", lab.Host(3), "--grantors", c.rpcAddrs())
	ctx := tctx(t)
	cl := s.client(t)
	// The sidecar finds the leader: from now on it sends there first.
	if _, err := cl.Acquire(ctx, "jobs/warm-up", ipc.AcquireOptions{TTL: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	leader := c.currentLeader()
	marks := c.marks()
	lag := ownLag(t)
	lab.Partition(leader.node)
	asked := boottime()
	t.Logf("cut off leader %s", c.nodes[leader.node].id)
	l, err := cl.Acquire(ctx, "jobs/kept", ipc.AcquireOptions{TTL: 10 * time.Second, Wait: wait})
	answered := boottime()
	if err != nil {
		t.Fatalf("acquire with wait %v while the old leader is cut off: %v (after %s)", wait, err, ms(answered.Sub(asked)))
	}
	next := c.waitOffice(marks, c.others(leader.node)...)
	took := answered.Sub(asked)
	t.Logf("granted token %s %s after the cut; %s took office %s after it", l.Token, ms(took), c.nodes[next.node].id, ms(next.tE.Sub(asked)))
	// Due within the wait, or, when the election itself ended too close
	// to the end of the wait, within grantAfterOffice of the new leader
	// taking office; a stall of this test (measured) moves the bound by as
	// much. Either way the bound is asserted.
	const grantAfterOffice = 3 * time.Second
	due := max(wait, next.tE.Sub(asked)+grantAfterOffice)
	if l := lag(); l > 0 {
		t.Logf("this test stalled %s: the bound moves by as much", ms(l))
		due += l
	}
	if took > due {
		t.Fatalf("granted %s after the cut, past its bound of %s (wait %v; a new leader took office %s after the cut)", ms(took), ms(due), wait, ms(next.tE.Sub(asked)))
	}
}
