package grantor

import (
	"crypto/tls"
	"encoding/binary"
	"io"
	"log"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

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

// A removed member's certificate on the connection it opened while it was
// a member: the bound on what a non-member sends applies from its removal
// on, not only to connections opened after it. An AppendEntries larger
// than nonMemberBytes on the old connection ends it before it is decoded
// (before, it was decoded into memory and then refused).
func TestRemovedMembersOldConnectionIsBounded(t *testing.T) {
	p := newTestPKI(t)
	c, _ := tlsCluster(t, p)
	li := c.leader()
	l := c.nodes[li]
	f := c.nodes[(li+1)%len(c.nodes)]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{MaxPool: 1, Timeout: 5 * time.Second,
		Stream: pooledStream{ln, p.conf(pki.RoleGrantor, f.cfg.NodeID).ClientConfig(pki.ALPNRaft, pki.Peer{Roles: []string{pki.RoleGrantor}})}})
	t.Cleanup(func() { tr.Close() })
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(f.cfg.NodeID), Addr: []byte(tr.LocalAddr())}
	id, addr := raft.ServerID(l.cfg.NodeID), raft.ServerAddress(l.RaftAddr())
	var ae raft.AppendEntriesResponse
	if err := tr.AppendEntries(id, addr, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 0}, &ae); err != nil {
		t.Fatalf("a member's stale AppendEntries was refused: %v", err)
	}
	if err := l.raft.RemoveServer(raft.ServerID(f.cfg.NodeID), 0, 0).Error(); err != nil {
		t.Fatal(err)
	}
	err = tr.AppendEntries(id, addr, &raft.AppendEntriesRequest{
		RPCHeader: hdr, Term: 1 << 40,
		Entries: []*raft.Log{{Index: 1, Term: 1 << 40, Type: raft.LogCommand, Data: make([]byte, 2*nonMemberBytes)}},
	}, &ae)
	if err == nil || strings.Contains(err.Error(), notAMember) {
		t.Fatalf("an AppendEntries of %d bytes from the removed %s on its old connection: %v, want the connection ended before it was decoded",
			2*nonMemberBytes, f.cfg.NodeID, err)
	}
	sideCreds := p.conf(pki.RoleSidecar, "h1").ClientCredentials()
	if a := c.acquireAtLeader(sideCreds, acqReq("s1", 1, "jobs/after")); !a.Granted {
		t.Fatalf("acquire after the removed member's flood: %v", a)
	}
}

// pooledStream is a raft stream layer that dials TLS with cfg, for a
// transport that keeps its connections (stranger.Raft's does not).
type pooledStream struct {
	net.Listener
	cfg *tls.Config
}

// Dial implements raft.StreamLayer.
func (s pooledStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), s.cfg)
}
