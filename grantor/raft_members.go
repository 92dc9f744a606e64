package grantor

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/leaseside/leaseside/grantor/gossip"
)

// Only members speak raft.
//
// With TLS, the transport already knows who sends each inbound raft RPC:
// the certificate's name, which must equal the RPC header's server ID
// (raft_tls.go). A certificate is not membership, though: the cluster CA
// may sign grantor certificates for names that are in no configuration
// (a spare, a retired host, a stolen key), and raft itself takes an
// AppendEntries from anyone who sends one. So, before raft sees it, every
// AppendEntries, RequestVote, RequestPreVote, InstallSnapshot and
// TimeoutNow passes raftGate.admit, which lets it through only when its
// sender is:
//
//   - a server (voter or not) of this node's latest raft configuration,
//     the one raft acts on, committed or not; or
//   - while this node has no configuration yet (a grantor waiting to be
//     added, or to bootstrap), a server its join path names: with gossip,
//     the grantors at its --join seed addresses and the leader those
//     seeds name (without seeds, every alive grantor in gossip and the
//     leader they agree on), and the voters of the configuration a proven
//     seed showed it (seed_voters.go: they are kept after the seed dies,
//     so that the voters that bootstrapped a configuration listing this
//     node can elect with it); without gossip, Config.JoinServers; or
//   - for AppendEntries and InstallSnapshot only, the leader that this
//     node's --join seeds agree on: a grantor that was down while a
//     server was added and then became leader is not in its old
//     configuration, and only that leader can bring it up to date.
//
// A removed server is thereby refused by every grantor that knows of its
// removal, and a grantor that is shown its own removal by a majority of
// the servers of its new configuration stops (watchLeaders,
// self_removal.go) unless it is leaving by itself (Leave).
//
// Gossip names the leader only to a node that cannot otherwise know it;
// the sender must still hold the grantor certificate of that name. Gossip
// takes the address a member advertises as said, so with TLS a member at
// a seed address counts as a seed only once this node has proven it at
// that address itself (seed_proof.go): a holder of the gossip key (every
// sidecar has it) and of a grantor certificate of a name in no
// configuration who claims a seed's address while the seed is down names
// no one, and a joining grantor whose seeds are all down follows no one
// (and logs it) until one answers. What stays open: such a holder can
// make a grantor that has no configuration yet and was started without
// --join follow it (gossip then has no seeds to trust); that grantor then
// serves no one, and the cluster is untouched. A grantor with a
// configuration refuses it.

// notAMember is in the refusal of an RPC whose sender is not a server of
// the receiver's configuration. Raft's transport carries only the text
// of a remote error back to its sender, so the sender recognises the
// refusal by it (refusedAsNonMember): the two ends of this file's rule.
const notAMember = "not a server of this grantor's raft configuration"

// What a grantor certificate that speaks for no member may cost a grantor
// (raft_tls.go): its RPCs are decoded before the gate refuses them.
const (
	// nonMemberConns bounds its inbound connections at once.
	nonMemberConns = 4
	// nonMemberBytes bounds what it sends on one connection; a vote
	// request is about a hundred bytes.
	nonMemberBytes = 1 << 20
)

// raftRPCKind names an inbound raft RPC, for refusals and metrics.
type raftRPCKind uint8

const (
	rpcAppendEntries raftRPCKind = iota
	rpcRequestVote
	rpcRequestPreVote
	rpcInstallSnapshot
	rpcTimeoutNow
	rpcKinds // the number of kinds
)

func (k raftRPCKind) String() string {
	switch k {
	case rpcAppendEntries:
		return "AppendEntries"
	case rpcRequestVote:
		return "RequestVote"
	case rpcRequestPreVote:
		return "RequestPreVote"
	case rpcInstallSnapshot:
		return "InstallSnapshot"
	case rpcTimeoutNow:
		return "TimeoutNow"
	}
	return "unknown"
}

// rpcKindOf returns the kind of an inbound raft RPC's command, false for
// one that is none of them.
func rpcKindOf(cmd any) (raftRPCKind, bool) {
	switch cmd.(type) {
	case *raft.AppendEntriesRequest:
		return rpcAppendEntries, true
	case *raft.RequestVoteRequest:
		return rpcRequestVote, true
	case *raft.RequestPreVoteRequest:
		return rpcRequestPreVote, true
	case *raft.InstallSnapshotRequest:
		return rpcInstallSnapshot, true
	case *raft.TimeoutNowRequest:
		return rpcTimeoutNow, true
	}
	return 0, false
}

// joinPath is what a node's join path says about the cluster it joins.
type joinPath struct {
	// servers may speak raft to a node without a configuration.
	servers []string
	// leader is the leader the seeds agree on ("" when none or they
	// disagree); it may also send AppendEntries and InstallSnapshot to a
	// node whose configuration lacks it.
	leader string
	// learned are the voters proven seeds showed a node without a
	// configuration (seed_voters.go); they may speak raft to it.
	learned []string
}

// raftGate admits an inbound raft RPC only from a member (see the top of
// this file). Safe for concurrent use.
type raftGate struct {
	// raft is set once raft runs; until then every RPC is refused.
	raft atomic.Pointer[raft.Raft]
	// join returns what the node's join path says now, to a node with a
	// configuration or without.
	join func(configured bool) joinPath
	// refused counts the RPCs refused, per kind.
	refused [rpcKinds]atomic.Uint64
}

// admit returns nil if server id may send an RPC of kind to this node,
// else why not (for the refusal and the audit trail; it names no address,
// so that refusals of one kind from one source add up to one line).
func (g *raftGate) admit(id string, kind raftRPCKind) error {
	err := g.check(id, kind)
	if err != nil {
		g.refused[kind].Add(1)
	}
	return err
}

func (g *raftGate) check(id string, kind raftRPCKind) error {
	r := g.raft.Load()
	if r == nil {
		return fmt.Errorf("%s from %q: raft is not running yet", kind, id)
	}
	servers := r.GetConfiguration().Configuration().Servers // never fails: raft v1.8 reads its latest configuration
	if slices.ContainsFunc(servers, func(s raft.Server) bool { return string(s.ID) == id }) {
		return nil
	}
	// The join path is read from gossip (a copy of its member list) only
	// when it can admit: a flood of refused votes costs no more than a
	// look at the configuration.
	if len(servers) > 0 && kind != rpcAppendEntries && kind != rpcInstallSnapshot {
		return fmt.Errorf("%s from %q: %s", kind, id, notAMember)
	}
	jp := g.join(len(servers) > 0)
	if len(servers) == 0 {
		if slices.Contains(jp.servers, id) || (id == jp.leader && id != "") || slices.Contains(jp.learned, id) {
			return nil
		}
		return fmt.Errorf("%s from %q: this grantor has no raft configuration yet, and its join path names %s",
			kind, id, describeJoin(jp))
	}
	if id == jp.leader && id != "" {
		return nil
	}
	return fmt.Errorf("%s from %q: %s", kind, id, notAMember)
}

// known reports whether server id may send this node some raft RPC now:
// entries are what the most senders may send.
func (g *raftGate) known(id string) bool { return g.check(id, rpcAppendEntries) == nil }

// cappedConn is a connection that reads at most left bytes while capped
// says so (its sender is no member), then fails (and calls over, once).
type cappedConn struct {
	net.Conn
	left   int64
	capped func() bool
	over   func()
}

// errReadCap is cappedConn's error past its bound.
var errReadCap = errors.New("grantor: raft: a non-member's connection sent more than it may")

// Read implements net.Conn.
func (c *cappedConn) Read(p []byte) (int, error) {
	if !c.capped() {
		return c.Conn.Read(p)
	}
	if c.left <= 0 {
		return 0, errReadCap
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.Conn.Read(p)
	if c.left -= int64(n); c.left <= 0 {
		c.over()
	}
	return n, err
}

// describeJoin says whom a join path names, for a refusal.
func describeJoin(jp joinPath) string {
	var s string
	switch {
	case len(jp.servers) == 0 && jp.leader == "" && len(jp.learned) == 0:
		return "no server"
	case len(jp.servers) == 0 && jp.leader == "":
		s = "no seed"
	case jp.leader == "":
		s = fmt.Sprintf("only %q", jp.servers)
	default:
		s = fmt.Sprintf("only %q and the leader %q", jp.servers, jp.leader)
	}
	if len(jp.learned) > 0 {
		s += fmt.Sprintf(", and the voters %q its seeds showed", jp.learned)
	}
	return s
}

// refusedCount returns the RPCs of kind the gate refused.
func (g *raftGate) refusedCount(kind raftRPCKind) uint64 { return g.refused[kind].Load() }

// joinPath returns what this node's join path says now (see the top of
// this file) to a node that has a configuration (configured) or not.
func (n *Node) joinPath(configured bool) joinPath {
	if n.gossip == nil {
		return joinPath{servers: n.cfg.JoinServers}
	}
	if configured && len(n.seeds) == 0 {
		return joinPath{} // without seeds, gossip names nothing to a node with a configuration
	}
	jp := seedsSay(n.gossip.Members(), n.seeds, n.cfg.NodeID, n.seedProven())
	if !configured {
		jp.learned = n.seedVoters.all()
	}
	return jp
}

// seedsSay reads a join path from the gossip members ms: the alive
// grantors at the seed addresses (all alive grantors when there are no
// seeds) and the leader they name, if they agree (none naming one counts
// as no agreement). Only with seeds does the agreed leader count for a
// node that has a configuration: without them, anyone with the gossip key
// could take part in the agreement.
//
// A member's gossip address is the one it advertises, which memberlist
// takes as said: a holder of the gossip key can gossip a grantor of
// another name at a seed's address. With proven set (TLS and seeds), a
// member at a seed address counts only if proven(addr, id, leader) says
// this node proved it there, and proved the leader it gossips with it
// (seed_proof.go); an unproven claim names nobody, nor the leader it
// gossips. Without TLS no certificate names anyone, so
// there is nothing to prove: a seed address that more than one alive
// grantor claims then names none of them, and the node waits until only
// one claims it.
func seedsSay(ms []gossip.MemberInfo, seeds map[string]bool, self string, proven func(addr, id, leader string) bool) joinPath {
	var jp joinPath
	claims := map[string]int{}
	for _, in := range ms {
		if aliveOther(in, self) {
			claims[in.Addr]++
		}
	}
	agreed, disagree := "", false
	for _, in := range ms {
		if !aliveOther(in, self) {
			continue
		}
		switch {
		case len(seeds) == 0:
		case !seeds[in.Addr]:
			continue
		case proven != nil && !proven(in.Addr, in.Meta.NodeID, in.Meta.LeaderID):
			continue
		case proven == nil && claims[in.Addr] > 1:
			continue
		}
		jp.servers = append(jp.servers, in.Meta.NodeID)
		switch l := in.Meta.LeaderID; {
		case l == "":
		case agreed == "":
			agreed = l
		case agreed != l:
			disagree = true
		}
	}
	if !disagree && agreed != self {
		jp.leader = agreed
	}
	slices.Sort(jp.servers)
	if len(seeds) == 0 && jp.leader != "" {
		// Good enough for a node without a configuration only: admit
		// refuses a non-member leader to a node with one, since
		// servers is then not the operator's choice.
		jp.servers = append(jp.servers, jp.leader)
		jp.leader = ""
	}
	return jp
}

// aliveOther reports whether in is an alive grantor other than self,
// with metadata this build reads.
func aliveOther(in gossip.MemberInfo, self string) bool {
	return in.State == gossip.StateAlive && in.MetaErr == nil && in.Meta.Role == gossip.RoleGrantor &&
		in.Meta.NodeID != "" && in.Meta.NodeID != self
}

// resolveSeeds returns the gossip addresses (IP:port, as gossip lists its
// members) of the seeds: an IP is taken as it is, a host name is looked
// up once, now. A seed that does not resolve is left out and logged:
// gossip cannot reach it either.
func (n *Node) resolveSeeds(join []string) map[string]bool {
	out := map[string]bool{}
	for _, s := range join {
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			n.log.Warn("grantor: a gossip seed is not host:port; it names no raft server", "seed", s, "err", err)
			continue
		}
		if ip := net.ParseIP(host); ip != nil {
			out[net.JoinHostPort(ip.String(), port)] = true
			continue
		}
		ips, err := net.LookupIP(host)
		if err != nil {
			n.log.Warn("grantor: a gossip seed does not resolve; it names no raft server", "seed", s, "err", err)
			continue
		}
		for _, ip := range ips {
			out[net.JoinHostPort(ip.String(), port)] = true
		}
	}
	return out
}
