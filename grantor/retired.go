package grantor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// A grantor removed while it was down (or started again after its
// removal), and retired.
//
// A grantor that was down while an operator removed it (`members
// remove`) starts again with a raft configuration that still lists it:
// it missed the entry that removed it, and hears from no leader, since
// no member sends raft messages to a non-member. It calls elections,
// and every member refuses its vote requests as a non-member's
// (raftGate). By design it waits: the leader adds it back once gossip
// shows the new run, if a join rule admits it (discovery.go). But an
// operator who retired it dropped its join rule (docs/operations.md), so
// no leader ever adds it back, and it would campaign for good.
//
// A grantor that learned of its removal (or left) and is started again
// begins with a configuration that lacks it: it calls no election, and
// waits the same way. So once a member refuses its vote request as a
// non-member's, or from the start when its configuration lacks it, while
// it has heard of no leader since it started, it asks, every
// retiredAskEvery until a leader is heard of, whether it was retired
// (askRetired): the voters of its own latest configuration, then the
// leader they name, then the voters of that leader's configuration, each
// for its Members over callPeer, which takes an answer only from the
// grantor certificate of the name asked (at the address an answer,
// gossip, the replicated state or, for a grantor started without a seed
// that reaches the others, the registrations in its own raft log give:
// loggedRPCAddrs). To a grantor certificate, a
// Members answer says whether the answering grantor's join rules admit it
// (CallerJoin). It stops with a RetiredError (exit status 78 from
// `leaseside grantor`) only when, in one round:
//
//   - the voters of its own configuration that answer name one leader,
//     and that leader answers as the leader, with a configuration that
//     does not list it and join rules that do not admit it;
//   - a majority of the voters of that configuration (the leader among
//     them) answer the same, each knowing a leader;
//   - no grantor asked answers with a configuration that lists it or join
//     rules that admit it.
//
// Whoever leads next is a voter of a configuration that a majority of
// the current one's voters agreed to, so it was among those asked or its
// rules were not, and an operator retiring a grantor drops its rule on
// every grantor: the stop is what the operator asked for. Only answers
// count, never gossip or a refusal (the refusals only start the asking),
// and only answers from voters of a configuration: a grantor certificate
// of another name gets no say. A member that is merely cut off never
// stops this way: the voters it reaches list it, and without a majority
// answering nothing is confirmed. A grantor whose rule is kept, or that
// runs without name rules (every grantor is admitted then), or without
// TLS (no answer states its rules), keeps waiting until it is added back.

// retiredAskEvery is how long a grantor refused as a non-member, that has
// heard of no leader since it started, waits after a round of asking
// whether it was retired that did not confirm it, before it asks again:
// each round costs every voter a Members answer (of the servers of its
// raft configuration; from a grantor older than wire version 18, of
// every gossip member).
const retiredAskEvery = 5 * time.Second

// retiredRoundLine is logged (debug) after each round of asking whether
// this grantor was retired.
const retiredRoundLine = "grantor: asked the voters whether this grantor, which no leader has added back since it started, was retired"

// The values of MembersResponse.CallerJoin.
const (
	callerJoinAdmitted    = "admitted"
	callerJoinNotAdmitted = "not admitted"
)

// callerJoin spells whether join rules admit a caller, for CallerJoin.
func callerJoin(admitted bool) string {
	if admitted {
		return callerJoinAdmitted
	}
	return callerJoinNotAdmitted
}

// ErrRetired is matched (errors.Is) by a RetiredError.
var ErrRetired = errors.New("grantor: retired")

// RetiredError is what Run returns for a grantor that started outside
// the raft configuration (removed while it was down, or started again
// after its removal) and that no leader will add back, since no join rule
// admits it any more (see the top of retired.go).
type RetiredError struct {
	// NodeID is this grantor's raft server ID.
	NodeID string
	// Leader is the leader that answered.
	Leader string
	// Voters are the voters of the leader's raft configuration.
	Voters []string
	// Confirmed are the voters that answered that their configuration
	// does not list this grantor and that no join rule of theirs admits
	// it; a majority of Voters, the leader among them.
	Confirmed []string
}

// Error implements error.
func (e *RetiredError) Error() string {
	return fmt.Sprintf("grantor: %s is not in the raft configuration, and no leader will add it back: "+
		"leader %s and voters %s (of %s) answered that their configuration does not list it and no join rule of their name rules admits it; "+
		"retired: remove its data dir, or add its join rule back and restart",
		e.NodeID, e.Leader, strings.Join(e.Confirmed, ", "), strings.Join(e.Voters, ", "))
}

// Is makes errors.Is(err, ErrRetired) hold.
func (e *RetiredError) Is(target error) bool { return target == ErrRetired }

// retiredRound is what one round of asking whether this node was retired
// found.
type retiredRound struct {
	// leader is the leader the voters asked first named and that answered
	// as the leader ("" when there is none).
	leader string
	// voters are the voters of the leader's configuration.
	voters []string
	// notAdmitted are the voters of the leader's configuration that
	// answered, knowing a leader, with a configuration that does not
	// list this node and join rules that do not admit it.
	notAdmitted []string
	// admittedBy are the grantors asked whose answer lists this node or
	// whose join rules admit it.
	admittedBy []string
	// silent are the voters of the leader's configuration (of this node's
	// own, without a leader) whose answer does not count.
	silent []string
}

// confirmed reports whether the round shows this node retired (see the
// top of this file).
func (r retiredRound) confirmed() bool {
	return r.leader != "" && len(r.admittedBy) == 0 && slices.Contains(r.notAdmitted, r.leader) &&
		len(r.notAdmitted) > len(r.voters)/2
}

// err is the RetiredError of a confirmed round.
func (r retiredRound) err(self string) *RetiredError {
	return &RetiredError{NodeID: self, Leader: r.leader, Voters: r.voters, Confirmed: r.notAdmitted}
}

// askRetired asks the voters of c, this node's latest configuration, the
// leader they name and the voters of its configuration, whether this
// node was retired (see the top of this file).
func (n *Node) askRetired(ctx context.Context, c raft.Configuration) retiredRound {
	self := n.cfg.NodeID
	answers := map[string]*grantorpb.MembersResponse{} // nil: no answer that counts
	var logged map[string]string                       // loggedRPCAddrs, read once a round needs it
	addr := func(id string) string {
		// An address a counted answer gives, else gossip's or the
		// replicated state's, else this node's raft log's: whoever
		// answers there must show id's certificate (callPeer), so an
		// address is only a hint.
		for _, resp := range answers {
			for _, m := range resp.GetMembers() {
				if m.GetNodeId() == id && m.GetRpcAddr() != "" {
					return m.GetRpcAddr()
				}
			}
		}
		if a := n.peerRPCAddr(id); a != "" {
			return a
		}
		if logged == nil {
			logged = n.loggedRPCAddrs()
		}
		return logged[id]
	}
	askedAt := map[string]string{} // the address each was last asked at
	ask := func(ids []string) {
		type answer struct {
			id   string
			resp *grantorpb.MembersResponse
		}
		ch := make(chan answer, len(ids))
		var wg sync.WaitGroup
		for _, id := range ids {
			askedAt[id] = addr(id)
			wg.Add(1)
			go func(id, rpcAddr string) {
				defer wg.Done()
				resp, err := n.membersOf(ctx, id, rpcAddr)
				// Only the server asked counts, and only one that knows
				// a leader (as askRemoval).
				if err != nil || resp.GetAnsweredBy() != id || resp.GetLeaderId() == "" {
					resp = nil
				}
				ch <- answer{id, resp}
			}(id, askedAt[id])
		}
		wg.Wait()
		close(ch)
		for a := range ch {
			answers[a.id] = a.resp
		}
	}
	var own []string
	for _, s := range c.Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != self {
			own = append(own, string(s.ID))
		}
	}
	ask(own)

	r := retiredRound{}
	leader, agree := "", true
	for _, id := range own {
		switch l := answers[id].GetLeaderId(); {
		case l == "":
		case leader == "":
			leader = l
		case leader != l:
			agree = false
		}
	}
	// again: whether id is to be asked (again) now: never asked, or asked
	// without an answer that counts at another address than a counted
	// answer now gives (a voter whose address this node's log or state
	// had wrong or lacked: review rev2 of db42730).
	again := func(id string) bool {
		resp, asked := answers[id]
		return id != self && (!asked || resp == nil && addr(id) != askedAt[id])
	}
	if leader != "" && agree && leader != self {
		if again(leader) {
			ask([]string{leader})
		}
		if lr := answers[leader]; lr != nil && lr.GetLeaderId() == leader {
			r.leader = leader
			r.voters, _ = answerVoters(leader, lr)
			var rest []string
			for _, id := range r.voters {
				if again(id) {
					rest = append(rest, id)
				}
			}
			ask(rest)
		}
	}
	for id, resp := range answers {
		if resp != nil && (membersList(resp, self) || resp.GetCallerJoin() == callerJoinAdmitted) {
			r.admittedBy = append(r.admittedBy, id)
		}
	}
	counted := r.voters
	if r.leader == "" {
		counted = own
	}
	for _, id := range counted {
		switch resp := answers[id]; {
		case resp == nil || id == self:
			r.silent = append(r.silent, id)
		case slices.Contains(r.admittedBy, id):
		case resp.GetCallerJoin() == callerJoinNotAdmitted:
			r.notAdmitted = append(r.notAdmitted, id)
		default: // an older grantor, or one that does not know the caller as a grantor
			r.silent = append(r.silent, id)
		}
	}
	slices.Sort(r.admittedBy)
	slices.Sort(r.notAdmitted)
	slices.Sort(r.silent)
	return r
}

// loggedRPCAddrs returns the gRPC address of each grantor that the latest
// registration of it in this node's raft log names. A grantor started
// again applies none of its log's entries until a leader says which are
// committed, and a retired one hears from no leader: when it started
// without a --join seed that reaches the others (gossip lists none of
// them) and no snapshot restored their registrations, its log is where it
// learns where the voters it asks are. An entry there may never have been
// committed, which does not matter for a hint (see askRetired). It reads
// the whole log (at most SnapshotThreshold plus raft's trailing 10,240
// entries), once in a round of asking that needs it.
func (n *Node) loggedRPCAddrs() map[string]string {
	out := map[string]string{}
	first, err := n.wal.FirstIndex()
	if err != nil {
		return out
	}
	last, err := n.wal.LastIndex()
	if err != nil {
		return out
	}
	for i := max(first, 1); i <= last; i++ {
		var l raft.Log
		if n.wal.GetLog(i, &l) != nil || l.Type != raft.LogCommand || len(l.Data) == 0 || cmdType(l.Data[0]) != cmdRegisterNode {
			continue
		}
		if _, body, err := decodeCmd(l.Data); err == nil {
			if c, ok := body.(*registerNodeCmd); ok && c.NodeID != "" && c.RPCAddr != "" {
				out[c.NodeID] = c.RPCAddr
			}
		}
	}
	return out
}
