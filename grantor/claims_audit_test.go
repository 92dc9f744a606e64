package grantor

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/pki"
	"github.com/leaseside/leaseside/internal/connlimit"
)

// Gossip members' claims to be grantors that reconciliation refuses (no
// join rule names one; the raft address of another presents no grantor
// certificate) are audited summed up, as refused raft RPCs are: anyone
// with the gossip key starts a pass at every gossip change, and a line at
// every pass for every claim filled the audit log as fast as the claims
// changed (issue 21). 200 passes write at most two lines per claim and
// reason in each raftRefusalInterval, the last counting them all. The
// node log warns of each claim once per claimWarnEvery on the node's
// clock (a fake one here), its next line counting the refusals it did
// not log: before, it warned at every pass (200 lines a claim).
func TestRefusedGossipClaimsAreSummedUp(t *testing.T) {
	const passes = 200
	p := newTestPKI(t)
	audit := newLineLog()
	cfg := gossipConfig(t, "g1", 1, "")
	cfg.TLS = p.conf(pki.RoleGrantor, "g1")
	cfg.Audit = audit.logger()
	nodeLog := newLineLog() // a line at each refusal
	cfg.Logger = nodeLog.logger()
	cfg.ReconcileInterval = time.Hour // the passes are the test's
	clock := clockwatch.NewFake(clockwatch.Instant(1000 * time.Second))
	cfg.Clock = clock
	rules, err := ParseNameRules("rules", []byte("grantor/g[1-8] join\n* acquire *\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.NameRules = rules
	g1 := start(t, cfg, true)

	// g8 is let join by the rules, but its raft address presents no
	// certificate; no rule lets g9 join. Each has an address of its own,
	// the source its lines are summed up under.
	addrs := map[string]string{}
	for _, id := range []string{"g8", "g9"} {
		plain, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { plain.Close() })
		go func() {
			for {
				conn, err := plain.Accept()
				if err != nil {
					return
				}
				conn.Close()
			}
		}()
		addrs[id] = plain.Addr().String()
		m, err := gossip.Start(tctx(t), gossip.Config{
			Name: id, BindAddr: "127.0.0.1:0", Join: []string{g1.GossipAddr()}, Timing: gossip.LoopbackTiming(),
			Meta: gossip.Meta{Role: gossip.RoleGrantor, NodeID: id, RaftAddr: addrs[id], RPCAddr: addrs[id], Voter: true, Version: "test"},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Shutdown() })
	}
	audit.wait(t, "event=refused_raft", `claims grantor \"g8\"`)
	audit.wait(t, "event=refused_raft", `claims grantor \"g9\": no join rule names it`)

	// refused counts the refusals of id's claim (claimWarnings notes
	// each).
	refused := func(id string) int { return g1.claimWarns.refusals(id) }
	// warned returns the node log's lines of id's claim, and the
	// refusals they count (each its own and those it did not log before).
	warned := func(id string) (lines, refusals int) {
		nodeLog.mu.Lock()
		defer nodeLog.mu.Unlock()
		for _, l := range nodeLog.lines {
			if strings.Contains(l, claimRefusedLine) && strings.Contains(l, "node_id="+id+" ") {
				lines++
				refusals += 1 + intAfter(t, l, " unlogged_refusals=")
			}
		}
		return lines, refusals
	}
	// A pass refuses only the claims gossip lists alive at that moment: on
	// a loaded machine memberlist calls a member dead for a while now and
	// then (beside two CPU hogs, g8's claim was refused in 99 of 200
	// passes). So the passes go on until each claim was refused in as many
	// as the test wants, within a generous limit.
	began := time.Now()
	ran := 0
	for ; ran < passes || refused("g8") < passes || refused("g9") < passes; ran++ {
		if time.Since(began) > 5*time.Minute {
			t.Fatalf("%d passes in %v refused g8's claim %d times and g9's %d, not %d each", ran, time.Since(began), refused("g8"), refused("g9"), passes)
		}
		g1.reconcile(tctx(t))
	}
	for _, id := range []string{"g8", "g9"} {
		if lines, _ := warned(id); lines != 1 {
			t.Errorf("claim of %s: %d passes within %v on the node's clock logged %d warnings, want 1", id, ran, claimWarnEvery, lines)
		}
	}
	// claimWarnEvery later, the next pass that refuses a claim logs a
	// second line for it, counting every refusal since the first.
	clock.Advance(claimWarnEvery)
	for ; ; ran++ {
		l8, _ := warned("g8")
		l9, _ := warned("g9")
		if l8 >= 2 && l9 >= 2 {
			break
		}
		if time.Since(began) > 5*time.Minute {
			t.Fatalf("%d passes in %v, %v after the first warning: %d and %d warnings of g8's and g9's claims, not 2", ran, time.Since(began), claimWarnEvery, l8, l9)
		}
		g1.reconcile(tctx(t))
	}
	took := time.Since(began)
	g1.audit.claims.Flush()
	count := func(id string) (lines, refusals int) {
		audit.mu.Lock()
		defer audit.mu.Unlock()
		for _, l := range audit.lines {
			if !strings.Contains(l, "event=refused_raft") || !strings.Contains(l, "peer="+addrs[id]+" ") {
				continue
			}
			lines++
			refusals += intAfter(t, l, " count=")
		}
		return lines, refusals
	}
	// A probe's error may name the connection's own port, a reason of
	// its own at each pass: a source has at most MaxReasonsPerSource, the
	// rest counted under OtherReasons.
	bound := 2 * (connlimit.MaxReasonsPerSource + 1) * (int(took/raftRefusalInterval) + 2)
	for _, id := range []string{"g8", "g9"} {
		lines, refusals := count(id)
		want := refused(id)
		logLines, logged := warned(id)
		t.Logf("claim of %s: %d passes in %v refused it %d times, logged %d warnings counting %d and wrote %d audit lines counting %d refusals",
			id, ran, took, want, logLines, logged, lines, refusals)
		if lines > bound {
			t.Errorf("claim of %s: %d passes in %v wrote %d audit lines, more than %d", id, ran, took, lines, bound)
		}
		if refusals != want {
			t.Errorf("claim of %s: the audit lines count %d refusals of the %d made in %d passes", id, refusals, want, ran)
		}
		if logLines != 2 || logged <= passes || logged > want {
			t.Errorf("claim of %s: %d warnings counting %d refusals of %d; want 2, counting more than %d", id, logLines, logged, want, passes)
		}
	}
}

// intAfter returns the decimal number that follows key in line, failing
// the test if there is none.
func intAfter(t *testing.T, line, key string) int {
	t.Helper()
	i := strings.Index(line, key)
	if i < 0 {
		t.Fatalf("a line without %q: %q", key, line)
	}
	var n int
	for _, c := range line[i+len(key):] {
		if c < '0' || c > '9' {
			break
		}
		n = 10*n + int(c-'0')
	}
	return n
}

// refusals returns how many refusals of node ID id's claims w noted.
func (w *claimWarnings) refusals(id string) (n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, c := range w.last {
		if k.nodeID == id {
			n += c.total
		}
	}
	return n
}
