package grantor

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/pki"
)

// stall holds n TCP connections to addr that never send a byte, dialling
// again each one that is closed, until ctx ends (review finding R8-5's
// attack). It returns how many connections it made, once ctx ended and
// every dialler stopped.
func stall(ctx context.Context, addr string, n int) (dials func() int) {
	var mu sync.Mutex
	count := 0
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var d net.Dialer
			for ctx.Err() == nil {
				c, err := d.DialContext(ctx, "tcp", addr)
				if err != nil { // a stopped node: try again soon
					select {
					case <-ctx.Done():
					case <-time.After(10 * time.Millisecond):
					}
					continue
				}
				mu.Lock()
				count++
				mu.Unlock()
				stop := context.AfterFunc(ctx, func() { c.Close() })
				c.Read(make([]byte, 1)) // until the server closes it
				stop()
				c.Close()
				select { // an attacker on another host pays a round trip
				case <-ctx.Done():
				case <-time.After(time.Millisecond):
				}
			}
		}()
	}
	return func() int {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return count
	}
}

// Review finding R8-5: a stranger without a certificate holds as many
// silent connections to every grantor's raft port as one address may
// hold in handshake (four times the 64 slots that used to be all),
// from the grantors' own address (loopback), dialling again each one that
// is closed. The grantors'
// own connections still get through: new TLS connections from one
// grantor to another (the probe a leader makes before it adds one)
// succeed (at most a tenth may fail on a loaded machine), and when the leader stops, the others, which need
// new connections between them to vote, elect a new one. The stranger's
// thousands of refused connections make a handful of audit lines.
// Before the fix, every new connection was refused at once while the
// stranger held the 64 slots (every probe failed), and an election waited
// for one of the 10 s handshake timeouts to free a slot at the right
// moment (27 s in the review).
func TestRaftHandshakeFloodDoesNotBlockGrantors(t *testing.T) {
	p := newTestPKI(t)
	audits := make([]*lineLog, 3)
	i := 0
	c := startClusterWith(t, 3, func(cfg *Config) {
		cfg.TLS = p.conf(pki.RoleGrantor, cfg.NodeID)
		audits[i] = newLineLog()
		cfg.Audit = audits[i].logger()
		i++
	})
	li := c.leader()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var dials []func() int
	for _, n := range c.nodes {
		dials = append(dials, stall(ctx, n.RaftAddr(), raftMaxHandshakesPerSource))
	}
	// Every node times the stranger's handshakes out: it held them.
	for _, a := range audits {
		a.wait(t, "event=refused_raft", "TLS handshake: not finished within")
	}
	trans := func(n *running) *tlsTransport { return n.trans.baseTransport.(*tlsTransport) }
	// Raft dials again when a dial fails; so may a probe here, but
	// before the fix every one failed, and now hardly any do.
	probes, failed := 0, 0
	maxHeld := map[*running]int{} // connections in handshake, at the probes
	for _, from := range c.nodes {
		for _, to := range c.nodes {
			if from == to {
				continue
			}
			for range 10 {
				probes++
				pctx, pcancel := context.WithTimeout(context.Background(), waitTimeout)
				err := trans(from).probe(pctx, to.cfg.NodeID, to.RaftAddr())
				pcancel()
				if err != nil {
					failed++
					t.Logf("%s dialling %s during the flood: %v", from.cfg.NodeID, to.cfg.NodeID, err)
				}
				maxHeld[to] = max(maxHeld[to], trans(to).pending.Held())
			}
		}
	}
	t.Logf("%d of %d probes between grantors failed during the flood", failed, probes)
	// The stranger's connections time out together every 2 s and it
	// dials them again: at some probe, it held more than the 64 slots
	// there used to be.
	for n, held := range maxHeld {
		if held <= 64 {
			t.Fatalf("%s held at most %d connections in handshake during the probes, no more than the 64 slots there used to be: the stranger did not hold them", n.cfg.NodeID, held)
		}
	}
	if failed > probes/10 {
		t.Fatalf("%d of %d probes between grantors failed during the flood", failed, probes)
	}
	began := time.Now()
	c.kill(li)
	nl := c.leader()
	t.Logf("new leader %s %v after the leader stopped, during the flood", c.nodes[nl].cfg.NodeID, time.Since(began).Round(time.Millisecond))
	cancel()
	made := 0
	for _, d := range dials {
		made += d()
	}
	for i, n := range c.nodes {
		if !c.alive[i] {
			continue
		}
		n.stop() // flushes the counts
		c.alive[i] = false
		refused := n.metrics.refusedRaft.Load()
		lines := 0
		audits[i].mu.Lock()
		for _, l := range audits[i].lines {
			if strings.Contains(l, "event=refused_raft") {
				lines++
			}
		}
		audits[i].mu.Unlock()
		t.Logf("%s: %d refused raft connections, %d audit lines (the stranger dialled %d times in all)", n.cfg.NodeID, refused, lines, made)
		if refused < raftMaxHandshakesPerSource || lines > 20 {
			t.Errorf("%s: %d refusals made %d audit lines; want a flood (%d or more) in at most 20 lines", n.cfg.NodeID, refused, lines, raftMaxHandshakesPerSource)
		}
	}
}
