package grantor

import (
	"encoding/binary"
	"io"
	"log"
	"net"
	"slices"
	"strconv"
	"testing"

	"github.com/hashicorp/memberlist"

	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/pki"
)

// spoofMeta is a memberlist delegate that gossips a hand-encoded grantor
// metadata (gossip's version 1 encoding, as a build of any version reads
// it): what an attacker with the gossip key can send without the gossip
// package's checks.
type spoofMeta struct{ b []byte }

func (d spoofMeta) NodeMeta(int) []byte                  { return d.b }
func (spoofMeta) NotifyMsg([]byte)                       {}
func (spoofMeta) GetBroadcasts(int, int) [][]byte        { return nil }
func (spoofMeta) LocalState(bool) []byte                 { return nil }
func (spoofMeta) MergeRemoteState(buf []byte, join bool) {}

func encodeSpoofMeta(fields ...string) []byte {
	b := []byte{1, 1} // version 1, voter
	for _, s := range fields {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return binary.AppendUvarint(b, 7)
}

// The gossip attack on a joining grantor's seed: memberlist takes the
// address a member advertises as it says. A holder of the gossip key (a
// sidecar's) and of a grantor certificate of a name in no configuration
// (g9) gossips a grantor g9 that advertises the seed's own gossip address
// and names itself leader. The joining grantor's join path must not name
// g9, and it refuses g9's raft RPCs (before seedsSay refused an address
// two grantors claim, g9 was in the join path: the joining grantor took
// its forged term and granted it votes). While the impostor stays, the
// seed's address names nobody and the joining grantor waits: a denial of
// the join, not of the cluster.
func TestGossipSpoofedSeedAddressDoesNotMisleadAJoiningGrantor(t *testing.T) {
	p := newTestPKI(t)
	c := &gossipCluster{t: t, events: map[*running]*eventLog{}}
	for i, id := range []string{"g1", "g2", "g3"} {
		n := c.add(id, 3, func(cfg *Config) { cfg.TLS = p.conf(pki.RoleGrantor, id) })
		if i == 0 {
			c.seed = n.GossipAddr()
		}
	}
	l := c.leader()
	tr, hdr := raftAs(t, p, "g9")
	seedHost, seedPort, err := net.SplitHostPort(c.seed)
	if err != nil {
		t.Fatal(err)
	}
	mc := memberlist.DefaultLANConfig()
	tm := gossip.LoopbackTiming()
	mc.ProbeInterval, mc.ProbeTimeout, mc.SuspicionMult = tm.ProbeInterval, tm.ProbeTimeout, tm.SuspicionMult
	mc.GossipInterval, mc.PushPullInterval = tm.GossipInterval, tm.PushPullInterval
	free, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bindPort := free.LocalAddr().(*net.UDPAddr).Port
	free.Close()
	mc.Name, mc.BindAddr, mc.BindPort = "g9", "127.0.0.1", bindPort
	mc.AdvertiseAddr = seedHost
	mc.AdvertisePort, _ = strconv.Atoi(seedPort)
	mc.Label = "leaseside"
	mc.Logger = log.New(io.Discard, "", 0)
	mc.Delegate = spoofMeta{encodeSpoofMeta(gossip.RoleGrantor, "g9", "127.0.0.1:9", string(tr.LocalAddr()), "g9", "test")}
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ml.Shutdown() })
	if _, err := ml.Join([]string{l.GossipAddr()}); err != nil {
		t.Fatal(err)
	}

	j := c.add("g4", 0, func(cfg *Config) { cfg.TLS = p.conf(pki.RoleGrantor, "g4") })
	waitGossip(t, j, "the spoofed seed", func() bool { return gossipState(j, "g9") == gossip.StateAlive })
	if jp := j.joinPath(false); slices.Contains(jp.servers, "g9") || jp.leader == "g9" {
		t.Errorf("the joining grantor's join path names %+v: g9, at its seed's address, may speak raft to it", jp)
	}
	sendEvery(t, tr, hdr, j, 1<<40)
	if got := j.raft.CurrentTerm(); got >= 1<<40 {
		t.Fatalf("the joining grantor took the forged term %d", got)
	}
}
