// Package stranger speaks to grantors as an outsider would, for the tests
// of the trust boundary (grantor's and internal/integration's): a raft
// transport that dials with a TLS configuration of the test's choosing,
// or none, to send forged raft RPCs.
package stranger

import (
	"bytes"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// Raft returns a raft transport that dials with cfg (nil: plain TCP);
// t's cleanup closes it. Its own listener is bound on loopback and never
// served.
func Raft(t testing.TB, cfg *tls.Config) *raft.NetworkTransport {
	t.Helper()
	return raftFrom(t, cfg, "127.0.0.1", nil)
}

// RaftFrom is Raft from the loopback address ip (say 127.0.0.9): its
// listener is bound there and it dials from there, so that a grantor
// sees it as a host of its own. A grantor sums its refusals up per source
// address, a bounded number of reasons each (connlimit.Reporter): an
// attacker on an address of its own gets lines of its own, which the
// refusals of grantors starting beside it on 127.0.0.1 cannot crowd out.
func RaftFrom(t testing.TB, cfg *tls.Config, ip string) *raft.NetworkTransport {
	t.Helper()
	return raftFrom(t, cfg, ip, &net.TCPAddr{IP: net.ParseIP(ip)})
}

// raftFrom is a raft transport listening on ip and dialing from local
// (nil: where the kernel routes from).
func raftFrom(t testing.TB, cfg *tls.Config, ip string, local net.Addr) *raft.NetworkTransport {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: stream{ln, cfg, local}, Timeout: 5 * time.Second})
	t.Cleanup(func() { tr.Close() })
	return tr
}

// stream is the raft stream layer of RaftFrom.
type stream struct {
	net.Listener
	cfg   *tls.Config
	local net.Addr // where it dials from; nil: where the kernel routes from
}

// Dial implements raft.StreamLayer.
func (s stream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout, LocalAddr: s.local}
	if s.cfg == nil {
		return d.Dial("tcp", string(addr))
	}
	return tls.DialWithDialer(d, "tcp", string(addr), s.cfg)
}

// Forged is the data of the entries Attack writes: a command type no
// grantor knows.
var Forged = []byte{0xEE}

// Attack sends server id at addr, over tr and in the name hdr gives, one
// raft RPC of every kind as a grantor that is not a member would to take
// the cluster over (issue 21's attack) and returns the error of each, by
// RPC name (nil: it was answered):
//
//   - AppendEntries in term, from the start of the log (no previous
//     entry), carrying entries 1 to upTo of Forged data and a commit index
//     of upTo: a follower that took it would overwrite its committed
//     entries and apply one it cannot decode;
//   - RequestVote and RequestPreVote in term, with a log that looks
//     longer than anyone's;
//   - TimeoutNow, which makes a follower call an election at once;
//   - InstallSnapshot of an empty state at index upTo.
func Attack(tr *raft.NetworkTransport, id, addr string, hdr raft.RPCHeader, term, upTo uint64) map[string]error {
	sid, sa := raft.ServerID(id), raft.ServerAddress(addr)
	out := map[string]error{}
	entries := make([]*raft.Log, 0, upTo)
	for i := uint64(1); i <= upTo; i++ {
		entries = append(entries, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: Forged})
	}
	var ae raft.AppendEntriesResponse
	out["AppendEntries"] = tr.AppendEntries(sid, sa, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: term,
		Entries: entries, LeaderCommitIndex: upTo}, &ae)
	var rv raft.RequestVoteResponse
	out["RequestVote"] = tr.RequestVote(sid, sa, &raft.RequestVoteRequest{RPCHeader: hdr, Term: term,
		LastLogIndex: upTo, LastLogTerm: term}, &rv)
	var pv raft.RequestPreVoteResponse
	out["RequestPreVote"] = tr.RequestPreVote(sid, sa, &raft.RequestPreVoteRequest{RPCHeader: hdr, Term: term,
		LastLogIndex: upTo, LastLogTerm: term}, &pv)
	var tn raft.TimeoutNowResponse
	out["TimeoutNow"] = tr.TimeoutNow(sid, sa, &raft.TimeoutNowRequest{RPCHeader: hdr}, &tn)
	var is raft.InstallSnapshotResponse
	snap := []byte(`{"last_token":0,"leases":{},"sessions":{},"nodes":{}}`)
	out["InstallSnapshot"] = tr.InstallSnapshot(sid, sa, &raft.InstallSnapshotRequest{RPCHeader: hdr,
		SnapshotVersion: raft.SnapshotVersionMax, Term: term, LastLogIndex: upTo, LastLogTerm: term,
		Size: int64(len(snap))}, &is, bytes.NewReader(snap))
	return out
}
