package grantor

import (
	"context"
	"slices"
	"sync"

	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// The voters a proven seed shows a joining grantor.
//
// A grantor without a raft configuration takes raft RPCs only from what
// its join path names (raft_members.go): its proven --join seeds and the
// leader they agree on. That alone left a liveness gap: with
// --bootstrap-expect, the other grantors may bootstrap a configuration
// that lists this one as a voter before it has one itself (it found a
// cluster already there and waits for the leader's entries); if its only
// seed dies before those entries reach it, it refused every remaining
// voter, and two of three could not elect. So while it has no
// configuration, a grantor also asks each seed it has just proven
// (seed_proof.go) for its Members, over callPeer (mutual TLS that takes
// only the grantor certificate of the seed's name), and keeps the voters
// of the configuration the seed answers with: they may speak raft to it
// until it has a configuration of its own, when only that configuration's
// servers may, as before. It keeps them after the seed dies, which is the
// point, and across a restart (in the data dir, seed_voters_file.go): a
// grantor restarted after its only seed died must still take the
// remaining voters' raft RPCs, or they cannot elect with it. A later
// answer from the same seed replaces them; a committed configuration
// that lists the node ends them. The answer of
// bootstrap-expect's own Members call (tryBootstrap) counts the same way
// when it comes from a proven seed.
//
// Why a grantor certificate of a name in no configuration, with the
// gossip key, is still admitted by no one: to be kept here, its name must
// be a voter in the raft configuration of a grantor that proved itself,
// with the certificate of the seed's name, at a --join address the
// operator chose, and that said so over a connection on which it showed
// that certificate again. Gossip claims at a seed's address count only
// once proven there, and the answer of a grantor of any other name is not
// taken (callPeer, AnsweredBy). What the rule admits is what a grantor
// holding the seed's configuration admits anyway: a voter removed since
// is admitted as a lagging member admits it, and such a voter cannot win
// an election among the members, who refuse it.

// maxSeedVoters bounds the voters kept from one seed's answer (raft
// clusters have a handful).
const maxSeedVoters = 64

// seedVoters holds, per proven seed, the voters of the raft configuration
// it last showed this node, and keeps them in a file of the data dir
// (seed_voters_file.go). Safe for concurrent use.
type seedVoters struct {
	mu sync.Mutex
	by map[string][]string
	// path is the file they are kept in ("" keeps them in memory only).
	path string
}

// set records the voters seed showed, and writes them to the file; it
// reports whether they changed, and the error of writing them.
func (s *seedVoters) set(seed string, voters []string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Equal(s.by[seed], voters) {
		return false, nil
	}
	if s.by == nil {
		s.by = map[string][]string{}
	}
	if _, known := s.by[seed]; !known && len(s.by) >= maxSeeds {
		return false, nil
	}
	s.by[seed] = voters
	return true, s.save()
}

// all returns every voter a seed showed, sorted, once each.
func (s *seedVoters) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, vs := range s.by {
		out = append(out, vs...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// answerVoters returns the voters of the raft configuration in a Members
// answer from grantor seed, and false when the answer does not count: it
// is signed by another name, or shows no configuration.
func answerVoters(seed string, resp *grantorpb.MembersResponse) ([]string, bool) {
	if resp.GetAnsweredBy() != seed {
		return nil, false
	}
	var voters []string
	for _, m := range resp.GetMembers() {
		if m.GetVoter() && m.GetNodeId() != "" && len(voters) < maxSeedVoters {
			voters = append(voters, m.GetNodeId())
		}
	}
	slices.Sort(voters)
	voters = slices.Compact(voters)
	return voters, len(voters) > 0
}

// learnSeedVoters keeps the voters in a Members answer from seed, a
// grantor this node proved at a --join seed address, while this node has
// no raft configuration, and logs a change.
func (n *Node) learnSeedVoters(seed string, resp *grantorpb.MembersResponse) {
	if n.configured() {
		return
	}
	voters, ok := answerVoters(seed, resp)
	if !ok {
		return
	}
	changed, err := n.seedVoters.set(seed, voters)
	if err != nil {
		n.log.Warn("grantor: keeping the voters a --join seed showed in the data dir failed; they are kept until this grantor stops", "err", err)
	}
	if !changed {
		return
	}
	n.log.Info("grantor: a --join seed showed the voters of its raft configuration; until this grantor has a configuration of its own, they may speak raft to it",
		"seed", seed, "voters", voters)
}

// askSeedVoters asks each proven claim's grantor for its Members, while
// this node has no raft configuration, and keeps the voters it shows.
func (n *Node) askSeedVoters(ctx context.Context, claims []seedClaim) {
	if n.configured() {
		return
	}
	ms := n.gossip.Members()
	var wg sync.WaitGroup
	for _, c := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, err := n.membersOf(ctx, c.id, claimRPCAddr(ms, c, n.cfg.NodeID)); err == nil {
				n.learnSeedVoters(c.id, resp)
			}
		}()
	}
	wg.Wait()
}

// claimRPCAddr returns the gRPC address gossiped by the member that makes
// claim c ("" if gossip lists it no more). Whoever answers there must
// show the grantor certificate of c's name (callPeer).
func claimRPCAddr(ms []gossip.MemberInfo, c seedClaim, self string) string {
	for _, in := range ms {
		if aliveOther(in, self) && in.Addr == c.addr && in.Meta.NodeID == c.id && in.Meta.LeaderID == c.leader {
			return in.Meta.RPCAddr
		}
	}
	return ""
}

// configured reports whether raft has a configuration with servers.
func (n *Node) configured() bool {
	f := n.raft.GetConfiguration()
	return f.Error() == nil && len(f.Configuration().Servers) > 0
}
