package grantor

import (
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/pki"
)

// With TLS, a gossip member that claims a stopped voter's node ID and
// then leaves gracefully does not get that voter removed (review R8-4:
// every gossip-key holder, sidecars included, could shrink the
// configuration during a rolling restart). Gossip is a hint, never a
// credential: a grantor leaves raft through its own authenticated Leave,
// or an operator's RemoveServer.
func TestGossipLeaveClaimRemovesNoVoter(t *testing.T) {
	p := newTestPKI(t)
	c := &gossipCluster{t: t, events: map[*running]*eventLog{}}
	for i, id := range []string{"g1", "g2", "g3"} {
		n := c.add(id, 3, func(cfg *Config) { cfg.TLS = p.conf(pki.RoleGrantor, id) })
		if i == 0 {
			c.seed = n.GossipAddr()
		}
	}
	l := c.leader()
	var victim *running
	for _, n := range c.nodes {
		if n != l {
			victim = n
		}
	}
	id := victim.cfg.NodeID
	victim.stop() // as SIGTERM does: it stays a voter
	waitGossip(t, l, id+" dead", func() bool { return gossipState(l, id) == gossip.StateDead })

	fake, err := gossip.Start(tctx(t), gossip.Config{
		Name: "fake-" + id, BindAddr: "127.0.0.1:0", Join: []string{l.GossipAddr()}, Timing: gossip.LoopbackTiming(),
		Meta: gossip.Meta{Role: gossip.RoleGrantor, NodeID: id, RaftAddr: "127.0.0.1:9", RPCAddr: "127.0.0.1:9", Voter: true, Version: "test"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Shutdown() })
	if err := fake.Leave(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitGossip(t, l, "fake-"+id+" left", func() bool { return gossipState(l, "fake-"+id) == gossip.StateLeft })
	l = c.leader()
	l.reconcile(tctx(t))
	if got := servers(l); !slices.Contains(got, id+"=Voter") {
		t.Fatalf("a gossip member's claim that %s left removed it: %v", id, got)
	}
}

// Gossip members that claim to be grantors, whose raft address accepts
// connections and never answers, are probed all at once (review R8-12:
// one after another, each waiting out the probe timeout, they held up
// every membership change of the pass): the tarpit holds every one of
// their probes open at the same time. And none of them is added.
func TestReconcileProbesClaimsAtOnce(t *testing.T) {
	const fakes = 4
	p := newTestPKI(t)
	cfg := gossipConfig(t, "g1", 1, "")
	cfg.TLS = p.conf(pki.RoleGrantor, "g1")
	cfg.ReconcileInterval = 200 * time.Millisecond
	g1 := start(t, cfg, true)

	tarpit, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tarpit.Close() })
	var mu sync.Mutex
	open, reached, all := 0, false, make(chan struct{})
	go func() {
		for {
			conn, err := tarpit.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if open++; open == fakes && !reached {
				reached = true // open may reach fakes again in a later pass
				close(all)
			}
			mu.Unlock()
			go func() {
				conn.Read(make([]byte, 1)) // until the prober gives up
				conn.Close()
				mu.Lock()
				open--
				mu.Unlock()
			}()
		}
	}()
	for i := range fakes {
		id := fmt.Sprintf("fake%d", i)
		m, err := gossip.Start(tctx(t), gossip.Config{
			Name: id, BindAddr: "127.0.0.1:0", Join: []string{g1.GossipAddr()}, Timing: gossip.LoopbackTiming(),
			Meta: gossip.Meta{Role: gossip.RoleGrantor, NodeID: id, RaftAddr: tarpit.Addr().String(), RPCAddr: tarpit.Addr().String(), Voter: true, Version: "test"},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Shutdown() })
	}
	select {
	case <-all:
	case <-time.After(waitTimeout):
		t.Fatalf("the tarpit never held %d probes at once", fakes)
	}
	if got := servers(g1); !slices.Equal(got, []string{"g1=Voter"}) {
		t.Fatalf("raft configuration %v, want g1 alone", got)
	}
}
