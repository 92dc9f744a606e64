package grantor

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/pki"
)

// joinRules returns name rules whose join rules admit the grantors ids,
// and that give every sidecar and every other identity every name.
func joinRules(t *testing.T, ids ...string) *NameRules {
	t.Helper()
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "grantor/%s join\n", id)
	}
	b.WriteString("* acquire *\n*/* acquire *\n")
	r, err := ParseNameRules("rules", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// acquireAt acquires a fresh name, as sidecar h1, at whichever of nodes
// leads, and fails the test unless it is granted.
func acquireAt(t *testing.T, p *testPKI, nodes ...*running) {
	t.Helper()
	creds := p.conf(pki.RoleSidecar, "h1").ClientCredentials()
	for attempt := 1; ; attempt++ {
		resp, err := dialWith(t, leading(t, nodes...).RPCAddr(), creds).Acquire(tctx(t), acqReq("s1", 1, "jobs/after"))
		switch {
		case err == nil && resp.Granted:
			return
		case err == nil:
			t.Fatalf("acquire: %v", resp)
		case status.Code(err) != codes.FailedPrecondition || attempt == 20:
			t.Fatalf("acquire: %v", err)
		}
	}
}

// retiredCluster starts grantors g1, g2 and g3 over TLS with gossip, each
// with name rules whose join rule names all three, each logging (debug)
// into its own lineLog, and waits until one is in office.
func retiredCluster(t *testing.T, p *testPKI) (*gossipCluster, map[string]*lineLog) {
	t.Helper()
	c := &gossipCluster{t: t, events: map[*running]*eventLog{}}
	logs := map[string]*lineLog{}
	for i, id := range []string{"g1", "g2", "g3"} {
		logs[id] = newLineLog()
		n := c.add(id, 3, func(cfg *Config) {
			cfg.TLS = p.conf(pki.RoleGrantor, id)
			cfg.NameRules = joinRules(t, "g1", "g2", "g3")
			cfg.Logger = logs[id].logger()
			starvedRaftTiming(cfg)
		})
		if i == 0 {
			c.seed = n.GossipAddr()
		}
	}
	c.leader()
	return c, logs
}

// restartAt starts n again on its data dir, at its gossip address (raft
// too with sameRaft, else another port; gRPC always on another), joining gossip
// through seed, logging into a new lineLog; n must have stopped. With
// seed "" it joins nobody, on another gossip port: the others, which
// gossip to a dead member's address for a while, do not find it either
// (as a grantor down for longer than that).
//
// A grantor removed while down misses its removal only if the leader's
// one last send to it fails (raft then stops replicating to it), and
// that send may come late, after a backoff: one started again at the
// same raft address may get it (and stop as removed).
func restartAt(t *testing.T, n *running, seed string, sameRaft bool) (*running, *lineLog) {
	t.Helper()
	cfg := n.cfg
	// A new gRPC port: the old one, released by the stopped grantor, is
	// in the ephemeral range, where another process's connection may take
	// it before the restart binds it (nothing here needs it to be the same).
	cfg.RPCAddr = "127.0.0.1:0"
	if sameRaft {
		cfg.RaftAddr = n.RaftAddr()
	}
	g := *cfg.Gossip
	g.BindAddr, g.Join = "127.0.0.1:0", nil
	if seed != "" {
		g.BindAddr, g.Join = n.GossipAddr(), []string{seed}
	}
	cfg.Gossip = &g
	log := newLineLog()
	cfg.Logger = log.logger()
	return start(t, cfg, false), log
}

// removeWhileDown stops v, removes it at whichever of rest leads, and
// waits until both of rest have its removal in their configuration.
func removeWhileDown(t *testing.T, v *running, rest ...*running) {
	t.Helper()
	v.stop()
	id := v.cfg.NodeID
	for attempt := 1; ; attempt++ { // as `members remove`, at whichever leads
		err := leading(t, rest...).RemoveServer(tctx(t), id)
		if err == nil {
			break
		}
		if !isNotLeader(err) || attempt == 20 {
			t.Fatalf("RemoveServer %s: %v", id, err)
		}
	}
	waitRaft(t, id+"'s removal at every grantor left", func() bool {
		for _, n := range rest {
			if hasServer(n, id) {
				return false
			}
		}
		return true
	}, rest...)
}

// Issue 21: a grantor removed while it was down, whose join rule the
// operator dropped at every grantor (retired), starts again with a
// configuration that lists it, calls elections the others refuse, and no
// leader adds it back. It asks the voters whether it was retired, and
// stops with a RetiredError naming the leader and the voters that
// answered, and what to do; the others go on granting. Before the
// change it campaigned for good (the wait for its stop times out).
func TestRemovedWhileDownStopsOnceRetired(t *testing.T) {
	removedWhileDownStops(t, true, false)
}

// The same grantor started again without a gossip seed that reaches the
// others (its seed was itself, or is down): gossip lists none of them,
// no snapshot restored their registrations, and it applies none of its
// log's entries while no leader says which are committed, so it knew no
// address of a voter to ask, and waited for good (the wait for its stop
// timed out). The registrations in its own raft log name them
// (loggedRPCAddrs).
func TestRemovedWhileDownWithoutSeedStopsOnceRetired(t *testing.T) {
	removedWhileDownStops(t, false, false)
}

// Review rev2 of db42730: a retired grantor without a seed asks a voter
// at the address its own raft log gives, which may be wrong (the voter
// moved while the grantor was down) or missing (the voter registered
// after the grantor stopped: the original test failed so 4 times in 9
// runs under -race on a busy machine). The leader's answer then gives
// the right one, but a voter asked once in a round was never asked again
// in it, and every round began the same way: it waited for good (the
// wait for its stop timed out, the voter "silent" in every round). Now a
// voter whose ask did not count is asked again in the same round at the
// address a counted answer gives, when it differs.
func TestRemovedWhileDownWithoutSeedStopsWhenAVoterMoved(t *testing.T) {
	removedWhileDownStops(t, false, true)
}

// removedWhileDownStops is TestRemovedWhileDownStopsOnceRetired, the
// grantor started again with a gossip seed that reaches the others when
// seeded, else with none; with moved, the voter that does not lead
// started again at another gRPC port while the grantor was down.
func removedWhileDownStops(t *testing.T, seeded, moved bool) {
	p := newTestPKI(t)
	c, _ := retiredCluster(t, p)
	l := c.leader()
	v := others(c, l)[0]
	id := v.cfg.NodeID
	rest := others(c, v)
	removeWhileDown(t, v, rest...)
	if moved {
		i := slices.Index(rest, l) ^ 1 // the voter that does not lead
		m := rest[i]
		old := m.RPCAddr()
		m.stop()
		cfg := m.cfg
		cfg.RPCAddr, cfg.RaftAddr = "127.0.0.1:0", m.RaftAddr()
		g := *cfg.Gossip
		g.BindAddr, g.Join = m.GossipAddr(), []string{rest[i^1].GossipAddr()}
		cfg.Gossip = &g
		rest[i] = start(t, cfg, false)
		mid := m.cfg.NodeID
		waitRaft(t, mid+" registered at its new gRPC address", func() bool {
			a := l.fsm.nodeAddr(mid)
			return a != "" && a != old
		}, rest...)
	}
	var keep []string
	for _, n := range rest {
		keep = append(keep, n.cfg.NodeID)
	}
	for _, n := range rest {
		n.SetNameRules(joinRules(t, keep...))
	}

	seed := ""
	if seeded {
		seed = rest[0].GossipAddr()
	}
	again, log := restartAt(t, v, seed, false)
	again.runErrOK = func(err error) bool { return errors.Is(err, ErrRetired) }
	if !lists(again, id) {
		t.Fatalf("setup: %s, started again, does not list itself: %v (it should have missed its removal)", id, servers(again))
	}
	t.Cleanup(func() {
		if t.Failed() {
			log.mu.Lock()
			t.Logf("%s's log:\n%s", id, strings.Join(log.lines, "\n"))
			log.mu.Unlock()
		}
	})
	log.wait(t, "no leader has added it back since it started")
	select {
	case <-again.exited:
	case <-time.After(waitTimeout):
		line, _ := log.find(retiredRoundLine)
		t.Fatalf("the retired grantor still runs; its last round: %s", line)
	}
	var re *RetiredError
	if !errors.As(again.runErr, &re) {
		t.Fatalf("Run: %v, want a *RetiredError", again.runErr)
	}
	msg := re.Error()
	for _, want := range []string{"retired: remove its data dir, or add its join rule back and restart", "leader " + re.Leader} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error %q does not say %q", msg, want)
		}
	}
	if !slices.Contains(keep, re.Leader) || !slices.Contains(re.Confirmed, re.Leader) || len(re.Confirmed) < 2 ||
		!slices.Equal(re.Voters, keep) {
		t.Errorf("RetiredError %+v: want the leader among %v, and both confirming", re, keep)
	}
	log.wait(t, retiredRoundLine, "confirmed=true")
	if hasServer(leading(t, rest...), id) {
		t.Errorf("the retired grantor was added back: %v", servers(leading(t, rest...)))
	}
	acquireAt(t, p, rest...)
}

// A retired grantor that learned of its removal (the leader, removing
// itself: its own log has the entry) and stopped by itself, started
// again, begins with a configuration that lacks it: it calls no election
// and nobody refuses it, so it asks from the start, and stops with a
// RetiredError too. Before, it waited for good (the wait times out).
func TestRemovedGrantorStartedAgainStopsOnceRetired(t *testing.T) {
	p := newTestPKI(t)
	c, _ := retiredCluster(t, p)
	v := c.leader()
	id := v.cfg.NodeID
	rest := others(c, v)
	if err := v.RemoveServer(tctx(t), id); err != nil {
		t.Fatalf("RemoveServer %s at itself, the leader: %v", id, err)
	}
	select {
	case <-v.exited:
	case <-time.After(waitTimeout):
		t.Fatal("the removed grantor still runs")
	}
	if v.runErr != nil {
		t.Fatalf("the removed grantor's Run: %v, want nil", v.runErr)
	}
	var keep []string
	for _, n := range rest {
		keep = append(keep, n.cfg.NodeID)
	}
	for _, n := range rest {
		n.SetNameRules(joinRules(t, keep...))
	}

	again, log := restartAt(t, v, rest[0].GossipAddr(), false)
	again.runErrOK = func(err error) bool { return errors.Is(err, ErrRetired) }
	if lists(again, id) {
		t.Fatalf("setup: %s, started again, lists itself: %v", id, servers(again))
	}
	select {
	case <-again.exited:
	case <-time.After(waitTimeout):
		line, _ := log.find(retiredRoundLine)
		t.Fatalf("the retired grantor still runs; its last round: %s", line)
	}
	if !errors.Is(again.runErr, ErrRetired) {
		t.Fatalf("Run: %v, want a *RetiredError", again.runErr)
	}
	t.Logf("Run: %v", again.runErr)
}

// The other half of issue 21's case: a grantor removed while it was
// down whose join rule stays is added back by the leader once gossip
// shows its new run, and does not stop, whatever its rounds of asking
// found before that. (A guard: it held before the change too; a rule
// that stops on the refusals alone, or on the configurations alone,
// breaks it.)
func TestRemovedWhileDownIsAddedBackWhileItsRuleStays(t *testing.T) {
	p := newTestPKI(t)
	c, _ := retiredCluster(t, p)
	l := c.leader()
	v := others(c, l)[0]
	id := v.cfg.NodeID
	rest := others(c, v)
	removeWhileDown(t, v, rest...)

	again, log := restartAt(t, v, rest[0].GossipAddr(), false)
	waitRaft(t, id+" a voter again", func() bool {
		return slices.Contains(leaderServers(rest), id+"=Voter")
	}, append(rest, again)...)
	waitRaft(t, id+" knows the leader", func() bool { return again.removal.hadLeader.Load() }, again)
	if exited(again) {
		t.Fatalf("the grantor added back stopped: %v", again.runErr)
	}
	if line, ok := log.find(retiredRoundLine, "confirmed=true"); ok {
		t.Fatalf("a round confirmed that the grantor added back was retired: %s", line)
	}
	acquireAt(t, p, append(rest, again)...)
}

// A member cut off from the majority never stops as retired, even with
// its join rule dropped (an operator preparing to retire it) and refusals
// that say it is no member (forged here: the transport tells of
// refusals only from the servers it dialed): nobody it reaches confirms
// anything, and once the majority is back, its answers list it and it
// follows the leader again. (A guard: it held before the change too; it
// fails if the refusals alone stop a grantor that knew no leader.)
func TestCutOffMemberWithoutAJoinRuleDoesNotStop(t *testing.T) {
	p := newTestPKI(t)
	c, _ := retiredCluster(t, p)
	l := c.leader()
	v := others(c, l)[0]
	id := v.cfg.NodeID
	rest := others(c, v)
	var keep []string
	for _, n := range rest {
		keep = append(keep, n.cfg.NodeID)
	}
	for _, n := range c.nodes {
		n.SetNameRules(joinRules(t, keep...))
	}
	// Everyone down; v comes back alone: it has known no leader in this
	// run, and cannot reach a majority.
	v.stop()
	for _, n := range rest {
		n.stop()
	}
	again, log := restartAt(t, v, rest[0].GossipAddr(), true)
	for range 2 {
		m := log.mark()
		for _, n := range rest {
			again.refusedAsNonMember(raft.ServerID(n.cfg.NodeID))
		}
		log.waitFrom(t, m, retiredRoundLine, "confirmed=false")
	}
	if exited(again) {
		t.Fatalf("the cut-off member stopped: %v", again.runErr)
	}

	// The majority is back: v is a member, and follows the leader.
	var back []*running
	for _, n := range rest {
		b, _ := restartAt(t, n, again.GossipAddr(), true)
		b.SetNameRules(joinRules(t, keep...))
		back = append(back, b)
	}
	waitRaft(t, id+" follows a leader", func() bool {
		_, lid := again.raft.LeaderWithID()
		return lid != ""
	}, append(back, again)...)
	if exited(again) {
		t.Fatalf("the cut-off member stopped: %v", again.runErr)
	}
	if l := leading(t, append(back, again)...); !hasServer(l, id) {
		t.Fatalf("the member is not in the leader's configuration: %v", servers(l))
	}
	if line, ok := log.find(retiredRoundLine, "confirmed=true"); ok {
		t.Fatalf("a round confirmed that a member was retired: %s", line)
	}
}

// The rule of a round (retiredRound.confirmed): the leader that answered
// and a majority of its configuration's voters say the configuration
// lacks the grantor and no join rule admits it, and nobody says
// otherwise.
func TestRetiredRoundRules(t *testing.T) {
	voters := []string{"a", "b", "c"}
	for _, tt := range []struct {
		name string
		r    retiredRound
		want bool
	}{
		{"leader and a majority", retiredRound{leader: "a", voters: voters, notAdmitted: []string{"a", "b"}, silent: []string{"c"}}, true},
		{"all", retiredRound{leader: "a", voters: voters, notAdmitted: voters}, true},
		{"no leader", retiredRound{voters: voters, notAdmitted: voters}, false},
		{"a minority", retiredRound{leader: "a", voters: voters, notAdmitted: []string{"a"}, silent: []string{"b", "c"}}, false},
		{"a majority without the leader", retiredRound{leader: "a", voters: voters, notAdmitted: []string{"b", "c"}, silent: []string{"a"}}, false},
		{"one admits it", retiredRound{leader: "a", voters: voters, notAdmitted: []string{"a", "b"}, admittedBy: []string{"c"}}, false},
		{"a grantor outside the configuration admits it", retiredRound{leader: "a", voters: voters, notAdmitted: voters, admittedBy: []string{"d"}}, false},
	} {
		if got := tt.r.confirmed(); got != tt.want {
			t.Errorf("%s: confirmed %v, want %v", tt.name, got, tt.want)
		}
	}
	err := retiredRound{leader: "a", voters: voters, notAdmitted: []string{"a", "b"}}.err("g9")
	if !errors.Is(err, ErrRetired) || !strings.Contains(err.Error(), "leader a and voters a, b (of a, b, c)") {
		t.Errorf("the error %q", err)
	}
}
