package grantor

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// removal is what tells a node it was removed from the raft
// configuration: a majority of the voters of its latest configuration,
// which lacks it, showing it configurations that lack it too
// (watchLeaders), or refusing its votes (refusedAsNonMember). done is
// closed then, and Run stops the node.
type removal struct {
	// leaving is set when Leave starts: the node's removal is then its
	// own doing, and Leave decides what follows.
	leaving atomic.Bool
	// wasMember is set once a configuration listed this node, committed
	// (fsm.onConfig) or latest (watchLeaders).
	wasMember atomic.Bool
	// hadLeader is set once this node knew of a leader in this run.
	hadLeader atomic.Bool
	// refusedUnled is set when a voter refuses this node's vote request
	// as a non-member's while it has known of no leader in this run: it
	// may have been removed while it was down, and retired (retired.go).
	refusedUnled atomic.Bool
	// retired is set, before done is closed, when a round of asking
	// confirmed that this node was retired.
	retired atomic.Pointer[RetiredError]
	// configured wakes watchLeaders when a committed configuration is
	// applied (fsm.onConfig); it holds at most one wake-up.
	configured chan struct{}
	done       chan struct{}
	once       sync.Once
	// refusedBy holds the servers that refused this node's vote requests
	// as a non-member's, under mu.
	mu        sync.Mutex
	refusedBy map[raft.ServerID]bool
}

// newRemoval returns a removal nothing has happened to yet.
func newRemoval() removal {
	return removal{configured: make(chan struct{}, 1), done: make(chan struct{})}
}

// stop closes done, once.
func (r *removal) stop() { r.once.Do(func() { close(r.done) }) }

// wake wakes watchLeaders, without waiting.
func (r *removal) wake() {
	select {
	case r.configured <- struct{}{}:
	default:
	}
}

// removalAskEvery is how long a node whose latest configuration lacks it
// waits, after a round of asking that did not confirm its removal, before
// it asks again.
const removalAskEvery = 2 * time.Second

// removalRoundLine is logged (debug) after each round of asking.
const removalRoundLine = "grantor: asked the voters of this grantor's latest raft configuration, which does not list it"

// removalRound is what one round of asking the voters of a configuration
// that lacks this node found.
type removalRound struct {
	// voters is how many voters the configuration has.
	voters int
	// listedBy are the voters whose own configuration lists this node;
	// notListedBy those whose configuration does not; silent those that
	// gave no answer that counts (unreachable, another server at the
	// address, or no leader known to them).
	listedBy, notListedBy, silent []string
}

// confirmed reports whether the round shows the node removed: a majority
// of the voters answered with configurations that lack it, and none with
// one that lists it.
func (r removalRound) confirmed() bool {
	return len(r.listedBy) == 0 && len(r.notListedBy) > r.voters/2
}

// watchLeaders looks at every leader change raft observes, and at every
// committed configuration. It notes the leader of the current term
// (termLeaders, for a HaltError), and it stops the node (removal) once it
// has been removed from the raft configuration, unless it is leaving by
// itself (Leave).
//
// Raft's latest configuration is not evidence enough of a removal: a
// node that catches up (after a restart, or through a snapshot) passes
// through historical configurations, and one of them may lack it although
// the leader has since added it back. So a latest configuration without
// this node, after one with it in this run, only makes it a candidate for
// removal: it then asks every voter of that configuration for its Members
// (gRPC, at the address gossip or the replicated state gives), and stops
// only when a majority of them answer, each knowing a leader, with a
// configuration that does not list it, and none with one that does. An
// answer that lists it, or a later local configuration that lists it,
// ends the round without a stop; while the candidacy lasts (a partition:
// nobody answers, or a minority) it asks again every removalAskEvery on
// the node's clock. A committed configuration that lacks it has a
// majority of its voters knowing it, and a configuration that adds it
// back is, once committed, known to at least one voter of every majority
// of the one before (membership changes one server at a time), so a node
// truly removed stops once it reaches a majority, and a node added back
// does not stop.
//
// A removed follower hears from no leader after its removal, so its
// heartbeat timeout forgets the leader and wakes this loop; a removed
// leader steps down. A node that starts with a configuration that lacks
// it (removed while it was down) waits instead: the leader adds it back
// once gossip sees the new run (discovery.go). A removed node that did
// not learn of its removal (it was down) calls elections that every
// member refuses (raftGate); one that followed a leader in this run stops
// once a majority did (refusedAsNonMember). One that has known of no
// leader since it started asks, on the first refusal and every
// retiredAskEvery until a leader is known, whether it was retired, and
// stops with a RetiredError when it was (askRetired, retired.go).
func (n *Node) watchLeaders() {
	defer n.watchers.Done()
	ch, stop := n.leaderChanges()
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		results   = make(chan removalRound, 1)
		retiredC  = make(chan retiredRound, 1)
		candidate bool // the latest configuration lacks this node, which was a member
		retiring  bool // refused as a non-member, it has known of no leader in this run
		asking    bool // a round is out
		due       bool // a round may start
		retry     clockwatch.Timer
		retryC    <-chan struct{}
	)
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		if _, id := n.raft.LeaderWithID(); id != "" {
			n.termLeaders.note(n.raft.CurrentTerm(), string(id))
			n.removal.hadLeader.Store(true)
		}
		c := n.raft.GetConfiguration().Configuration()
		was := candidate
		switch {
		case n.listed(c):
			n.removal.wasMember.Store(true)
			candidate = false
		case n.removal.wasMember.Load() && !n.removal.leaving.Load():
			candidate = true
		default:
			candidate = false
		}
		wasRetiring := retiring
		// Refused as a non-member, or started with a configuration that
		// lacks it (it learned of its removal, or left, before it
		// stopped), and no leader since it started: perhaps retired.
		retiring = !candidate && (n.removal.refusedUnled.Load() || len(c.Servers) > 0 && !n.listed(c)) &&
			!n.removal.hadLeader.Load() && !n.removal.leaving.Load()
		switch {
		case candidate && !was:
			n.log.Info("grantor: this grantor's latest raft configuration does not list it; asking that configuration's voters whether it was removed",
				"servers", serverIDs(c))
			due = true
		case !candidate && was:
			n.log.Info("grantor: this grantor's latest raft configuration lists it again; not removed")
			due = false
		case retiring && !wasRetiring:
			n.log.Warn("grantor: this grantor is not in the raft configuration (the voters refuse its vote requests, or its own configuration lacks it), and no leader has added it back since it started. Waiting for the leader to add it back; asking the voters every "+
				retiredAskEvery.String()+" whether it was retired (no join rule admits it any more), which stops it",
				"servers", serverIDs(c))
			due = true
		case !retiring && wasRetiring && !candidate:
			n.log.Info("grantor: a leader is known; not retired")
			due = false
		}
		if (candidate || retiring) && due && !asking {
			due, asking = false, true
			n.watchers.Add(1)
			if candidate {
				go func() {
					defer n.watchers.Done()
					results <- n.askRemoval(ctx, c)
				}()
			} else {
				go func() {
					defer n.watchers.Done()
					retiredC <- n.askRetired(ctx, c)
				}()
			}
		}
		rearm := func(d time.Duration) {
			if retry == nil {
				retry = n.cfg.Clock.NewTimer(d)
			} else {
				retry.Reset(d)
			}
			retryC = retry.C()
		}
		select {
		case <-ch: // dropped observations are fine: each one re-reads
		case <-n.removal.configured:
		case <-retryC:
			retryC, due = nil, true
		case r := <-results:
			asking = false
			removed := r.confirmed() && !n.listed(n.raft.GetConfiguration().Configuration()) && !n.removal.leaving.Load()
			if !removed { // armed before the log line, which tells a test the round is over
				rearm(removalAskEvery)
			}
			n.log.Debug(removalRoundLine, "voters", r.voters, "listed_by", r.listedBy, "not_listed_by", r.notListedBy,
				"silent", r.silent, "confirmed", r.confirmed())
			if removed {
				n.removal.stop()
				return
			}
		case r := <-retiredC:
			asking = false
			_, lid := n.raft.LeaderWithID()
			retired := r.confirmed() && lid == "" && !n.removal.hadLeader.Load() && !n.removal.leaving.Load()
			if !retired {
				rearm(retiredAskEvery)
			}
			n.log.Debug(retiredRoundLine, "leader", r.leader, "voters", r.voters, "not_admitted_by", r.notAdmitted,
				"admitted_by", r.admittedBy, "silent", r.silent, "confirmed", r.confirmed())
			if retired {
				n.removal.retired.Store(r.err(n.cfg.NodeID))
				n.removal.stop()
				return
			}
		case <-n.done:
			return
		}
	}
}

// askRemoval asks every voter of c, a configuration that lacks this node,
// whether its own configuration lists this node.
func (n *Node) askRemoval(ctx context.Context, c raft.Configuration) removalRound {
	type answer struct {
		id     string
		listed bool
		counts bool
	}
	var voters []string
	for _, s := range c.Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != n.cfg.NodeID {
			voters = append(voters, string(s.ID))
		}
	}
	answers := make(chan answer, len(voters))
	for _, id := range voters {
		go func() {
			resp, err := n.membersOf(ctx, id, n.peerRPCAddr(id))
			// Only the server asked counts, and only one that knows a
			// leader: it may otherwise be behind itself, and its answer
			// cannot tell a non-voter from a grantor gossip lists.
			if err != nil || resp.GetAnsweredBy() != id || resp.GetLeaderId() == "" {
				answers <- answer{id: id}
				return
			}
			answers <- answer{id: id, listed: membersList(resp, n.cfg.NodeID), counts: true}
		}()
	}
	r := removalRound{voters: len(voters)}
	for range voters {
		switch a := <-answers; {
		case !a.counts:
			r.silent = append(r.silent, a.id)
		case a.listed:
			r.listedBy = append(r.listedBy, a.id)
		default:
			r.notListedBy = append(r.notListedBy, a.id)
		}
	}
	slices.Sort(r.silent)
	slices.Sort(r.listedBy)
	slices.Sort(r.notListedBy)
	return r
}

// membersOf asks grantor id at rpcAddr for its Members, requiring (with
// TLS) that it present the grantor certificate of id (callPeer): the
// answer names its own sender (AnsweredBy) as it pleases, so without the
// name check a grantor certificate of any name could answer for a voter
// and stop a member that is catching up. It asks for the servers of the
// raft configuration only (servers_only), all its callers read: a full
// answer lists every sidecar too, and past about 54,000 of them it is
// larger than queued_bytes and refused. An older grantor lists everyone.
func (n *Node) membersOf(ctx context.Context, id, rpcAddr string) (*grantorpb.MembersResponse, error) {
	var resp *grantorpb.MembersResponse
	err := n.callPeer(ctx, id, rpcAddr, func(ctx context.Context, c grantorpb.GrantorClient) (err error) {
		resp, err = c.Members(ctx, &grantorpb.MembersRequest{ServersOnly: true})
		return err
	})
	return resp, err
}

// membersList reports whether a Members answer from a grantor that knows a
// leader lists id as a server of its raft configuration: such a grantor
// gives every server of its configuration a raft state (members).
func membersList(resp *grantorpb.MembersResponse, id string) bool {
	return slices.ContainsFunc(resp.GetMembers(), func(m *grantorpb.Member) bool {
		return m.GetNodeId() == id && (m.GetVoter() || m.GetRaftState() != "")
	})
}

// peerRPCAddr returns the gRPC address of grantor id: the one an alive
// gossip member of that ID advertises, else the one the replicated state
// registered ("" if neither knows it). Gossip comes first, unlike
// rpcAddrOf: the state of a node that asks whether it was removed may be
// historical (it is catching up, or missed what followed its removal).
func (n *Node) peerRPCAddr(id string) string {
	for _, in := range n.gossipMembers() {
		if in.State == gossip.StateAlive && in.MetaErr == nil && in.Meta.Role == gossip.RoleGrantor && in.Meta.NodeID == id {
			return in.Meta.RPCAddr
		}
	}
	return n.fsm.nodeAddr(id)
}

// serverIDs returns the IDs of c's servers, for the log.
func serverIDs(c raft.Configuration) []string {
	ids := make([]string, 0, len(c.Servers))
	for _, s := range c.Servers {
		ids = append(ids, string(s.ID))
	}
	return ids
}

// refusedAsNonMember is told, by the transport, that server id refused
// this node's vote request as a non-member's. A node that followed a
// leader in this run and missed the entry that removed it never learns
// of its removal from the log, and calls elections every member
// refuses; once a majority of the voters of its latest configuration have
// refused it, it was removed (a configuration that lists it and was
// committed would have a majority of them knowing it), and it stops like
// a removed node that learned it (watchLeaders). A node that has heard
// of no leader since it started (one removed while it was down) waits
// instead, refused, until the leader adds it back (discovery.go); the
// refusal only makes watchLeaders ask whether it was retired, which no
// refusal proves (retired.go).
func (n *Node) refusedAsNonMember(id raft.ServerID) {
	c := n.raft.GetConfiguration().Configuration()
	n.removal.mu.Lock()
	defer n.removal.mu.Unlock()
	if n.removal.refusedBy == nil {
		n.removal.refusedBy = map[raft.ServerID]bool{}
	}
	n.removal.refusedBy[id] = true
	voters, refused := 0, 0
	for _, s := range c.Servers {
		if s.Suffrage == raft.Voter {
			voters++
			if n.removal.refusedBy[s.ID] {
				refused++
			}
		}
	}
	switch {
	case n.removal.leaving.Load():
	case !n.removal.hadLeader.Load():
		// Removed while it was down, perhaps retired: watchLeaders asks.
		if n.removal.refusedUnled.CompareAndSwap(false, true) {
			n.removal.wake()
		}
	case refused > voters/2:
		n.removal.stop()
	}
}

// listed reports whether c lists this node.
func (n *Node) listed(c raft.Configuration) bool {
	return slices.ContainsFunc(c.Servers, func(s raft.Server) bool { return string(s.ID) == n.cfg.NodeID })
}
