package grantor

import (
	"net"
	"strings"
	"testing"
	"time"

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
// reason in each raftRefusalInterval, the last counting them all.
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

	// refused counts the refusals of id's claim: the node logs each.
	refused := func(id string) (n int) {
		nodeLog.mu.Lock()
		defer nodeLog.mu.Unlock()
		for _, l := range nodeLog.lines {
			if strings.Contains(l, "not adding a grantor gossip told of") && strings.Contains(l, "node_id="+id+" ") {
				n++
			}
		}
		return n
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
			i := strings.Index(l, " count=")
			if i < 0 {
				t.Fatalf("a refused_raft line without its count: %q", l)
			}
			var n int
			for _, c := range l[i+len(" count="):] {
				if c < '0' || c > '9' {
					break
				}
				n = 10*n + int(c-'0')
			}
			refusals += n
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
		t.Logf("claim of %s: %d passes in %v refused it %d times and wrote %d audit lines counting %d refusals", id, ran, took, want, lines, refusals)
		if lines > bound {
			t.Errorf("claim of %s: %d passes in %v wrote %d audit lines, more than %d", id, ran, took, lines, bound)
		}
		if refusals != want {
			t.Errorf("claim of %s: the audit lines count %d refusals of the %d logged in %d passes", id, refusals, want, ran)
		}
	}
}
