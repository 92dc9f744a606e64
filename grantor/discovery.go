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
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
)

// Discovery: how a grantor uses gossip.
//
//   - It gossips a grantor Meta: its raft node ID, gRPC and raft
//     addresses, that it is a voter, and the leader it knows of
//     (gossipLeader keeps LeaderID current on every leader change).
//   - With BootstrapExpect N and no raft state, it bootstraps a cluster
//     once N voter grantors see each other and none of them has raft
//     state (bootstrapExpect).
//   - While it leads raft, it reconciles gossip with the raft
//     configuration (reconcile): an alive grantor that is not in it is
//     added, as a non-voter first and promoted to voter once it answers
//     over raft (a new or replaced node joins a running cluster; a changed
//     raft address is updated); without TLS, one that left gracefully is
//     removed; one that is dead, leaving, or no longer listed stays. With
//     TLS a gossip claim that a grantor left removes nothing: any member
//     with the gossip key (every sidecar) can make it under any node ID
//     while the real one is down (review R8-4), so a grantor leaves raft
//     only through its own Leave (authenticated by its certificate) or an
//     operator's RemoveServer. Removing a dead grantor
//     is an operator's decision (RemoveServer, `leaseside members
//     remove`), because a dead-looking grantor may only be partitioned;
//     a removed grantor is not added back while gossip still lists the
//     run of it that was alive at the removal (removed.go).
//
// Gossip is never a safety input: it can change who is in the raft
// configuration only through raft itself, and nothing it reports
// shortens, ends or extends a lease.

const (
	// peerTimeout bounds one gRPC call to another grantor.
	peerTimeout = 5 * time.Second
	// maxConcurrentProbes bounds the raft addresses one reconcile pass
	// probes at once.
	maxConcurrentProbes = 32
	// joinRetry is how often a grantor whose seeds did not answer at the
	// start tries them again.
	joinRetry = 2 * time.Second
	// gossipLeaveTimeout bounds the announcements of Leave.
	gossipLeaveTimeout = 5 * time.Second
	// promoteContact is how recent the leader's last answer from a staged
	// non-voter must be to promote it (besides answering a request sent
	// after the staging); heartbeats come every tenth of HeartbeatTimeout.
	promoteContact = 2 * time.Second
	// promoteCheck is how often reconciliation looks again while a staged
	// grantor waits for promotion.
	promoteCheck = 250 * time.Millisecond
	// leaderHintWait is the grantor's default gossip BroadcastTimeout: how
	// long gossipLeader waits for a new leader hint to spread (it spreads
	// all the same). Shutdown waits for gossipLeader, and with a dead
	// member the default 5s wait held up every stop.
	leaderHintWait = 200 * time.Millisecond
)

// startGossip joins the gossip cluster with this node's grantor Meta.
func (n *Node) startGossip(gc gossip.Config) (*gossip.Member, error) {
	gc.Meta = gossip.Meta{
		Role:     gossip.RoleGrantor,
		NodeID:   n.cfg.NodeID,
		RPCAddr:  n.rpcAddr,
		RaftAddr: string(n.trans.LocalAddr()),
		Voter:    true,
		Version:  gc.Meta.Version,
	}
	if gc.Name == "" {
		gc.Name = n.cfg.NodeID
	}
	if gc.BroadcastTimeout == 0 {
		gc.BroadcastTimeout = leaderHintWait
	}
	if gc.Logger == nil {
		gc.Logger = n.log.With("part", "gossip")
	}
	if n.cfg.TLS != nil {
		gc.Prove = n.proveSeed
	}
	m, err := gossip.Start(context.Background(), gc)
	if err == nil {
		return m, nil
	}
	var je *gossip.JoinError
	if !errors.As(err, &je) || errors.Is(err, gossip.ErrGossipKey) {
		// A wrong or missing key is a configuration error: fail the start.
		return nil, fmt.Errorf("grantor: joining the gossip cluster: %w", err)
	}
	// No seed answers (yet): after a full outage the grantors come back
	// in any order, and one that gave up would wait for another that gave
	// up too. Gossip alone and keep trying the seeds (retryJoin), as
	// Consul's retry_join does.
	n.log.Warn("grantor: no gossip seed answers yet; gossiping alone and retrying the join", "seeds", gc.Join, "err", err)
	n.rejoin = gc.Join
	gc.Join = nil
	if m, err = gossip.Start(context.Background(), gc); err != nil {
		return nil, fmt.Errorf("grantor: starting gossip: %w", err)
	}
	return m, nil
}

// retryJoin tries the seeds that did not answer at the start every
// joinRetry until one does.
func (n *Node) retryJoin() {
	defer n.watchers.Done()
	ctx, cancel := n.untilStopped()
	defer cancel()
	t := time.NewTimer(joinRetry)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		k, err := n.gossip.Join(ctx, n.rejoin)
		switch {
		case err == nil:
			n.log.Info("grantor: joined the gossip cluster", "seeds_reached", k)
			return
		case errors.Is(err, gossip.ErrGossipKey):
			n.log.Error("grantor: joining the gossip cluster", "err", err)
		case ctx.Err() != nil:
			return
		default:
			n.log.Debug("grantor: no gossip seed answers yet", "err", err)
		}
		t.Reset(joinRetry)
	}
}

// gossipLeader keeps the LeaderID this node gossips equal to the leader
// raft knows of, re-reading it at every leader observation.
func (n *Node) gossipLeader() {
	defer n.watchers.Done()
	ch := make(chan raft.Observation, 16)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	gossiped := "\x00" // nothing yet
	for {
		_, id := n.raft.LeaderWithID()
		if string(id) != gossiped {
			if string(id) == "" {
				n.log.Info("grantor: no leader known")
			} else {
				n.log.Info("grantor: leader is "+string(id), "leader_id", string(id), "self", string(id) == n.cfg.NodeID)
			}
			meta := n.gossip.Meta()
			meta.LeaderID = string(id)
			switch err := n.gossip.SetMeta(meta); {
			case err == nil:
				gossiped = string(id)
			case errors.Is(err, gossip.ErrLeft), errors.Is(err, gossip.ErrShutdown):
				return
			default:
				n.log.Warn("grantor: gossiping the leader failed", "err", err)
			}
		}
		select {
		case <-ch: // dropped observations are fine: each one re-reads
		case <-n.done:
			return
		}
	}
}

// rpcAddrOf returns the gRPC address of grantor id: registered in the
// FSM, else what gossip says, else "".
func (n *Node) rpcAddrOf(id string) string {
	if a := n.fsm.nodeAddr(id); a != "" {
		return a
	}
	for _, in := range n.gossipMembers() {
		if in.MetaErr == nil && in.Meta.Role == gossip.RoleGrantor && in.Meta.NodeID == id && in.State == gossip.StateAlive {
			return in.Meta.RPCAddr
		}
	}
	return ""
}

// startReconcile runs the reconciliation loop until the returned func is
// called, which waits for the loop to end.
func (n *Node) startReconcile() (stop func()) {
	n.reconcileMu.Lock()
	clear(n.staged) // stagings of an earlier term prove nothing now
	n.reconcileMu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.reconcileLoop(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// reconcileLoop runs reconcile at every gossip change, every
// ReconcileInterval, and every promoteCheck while a grantor waits for
// promotion. It starts once this node has taken office, after the
// lessor's raft barrier: every entry of earlier terms is applied then, and
// the configurations among them have told n.removed which grantors were
// removed.
func (n *Node) reconcileLoop(ctx context.Context) {
	if n.lessor.waitReady(ctx) != nil {
		return
	}
	t := time.NewTimer(n.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		changed := n.gossip.Changes()
		wait := n.cfg.ReconcileInterval
		if n.reconcile(ctx) {
			wait = min(wait, promoteCheck)
		}
		t.Reset(wait)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			return
		case <-n.done:
			return
		}
	}
}

// gossipGrantor is what reconciliation knows of one grantor in gossip.
type gossipGrantor struct {
	alive *gossip.MemberInfo // an alive member with this node ID, if any
	left  bool               // some member with this node ID left gracefully
}

// gossipGrantors groups the grantors in gossip by node ID. A node ID with
// an alive member counts as alive whatever other members with it say.
func gossipGrantors(ms []gossip.MemberInfo) map[string]*gossipGrantor {
	out := map[string]*gossipGrantor{}
	for i := range ms {
		in := &ms[i]
		if in.MetaErr != nil || in.Meta.Role != gossip.RoleGrantor || in.Meta.NodeID == "" {
			continue
		}
		g := out[in.Meta.NodeID]
		if g == nil {
			g = &gossipGrantor{}
			out[in.Meta.NodeID] = g
		}
		switch in.State {
		case gossip.StateAlive:
			g.alive = in
		case gossip.StateLeft:
			g.left = true
		}
	}
	return out
}

// reconcile is one pass of the leader's reconciliation (see the top of
// this file). Failures are logged; the next pass tries again. It reports
// whether a staged grantor waits for promotion.
//
// A grantor joins in two steps, like Consul's autopilot stabilisation: it
// is added as a non-voter, and promoted to voter once it has answered,
// within promoteContact, a raft request this leader sent after staging it
// (promotable). A grantor that gossips but whose raft address is
// unreachable (a firewall, a wrong --raft-addr), or one that died while
// gossip still lists it alive, so never becomes a voter that counts
// towards the quorum without answering: an answer it gave before the
// staging does not count.
func (n *Node) reconcile(ctx context.Context) (pending bool) {
	if n.raft.State() != raft.Leader {
		return false
	}
	n.reconcileMu.Lock()
	defer n.reconcileMu.Unlock()
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		n.log.Warn("grantor: reconcile: reading the raft configuration", "err", err)
		return false
	}
	servers := map[string]raft.Server{}
	for _, s := range f.Configuration().Servers {
		servers[string(s.ID)] = s
	}
	for sid := range n.staged {
		if s, ok := servers[string(sid)]; !ok || s.Suffrage == raft.Voter {
			delete(n.staged, sid) // promoted or gone
		}
	}
	gs := gossipGrantors(n.gossip.Members())
	n.removed.forget(func(id string) bool { return gs[id] != nil && gs[id].alive != nil })
	// Grantors of the configuration first: a gossip member's claim to be
	// a new grantor (anyone with the gossip key can make one) must not
	// hold up their additions, promotions and address updates (review
	// R8-12).
	ids := make([]string, 0, len(gs))
	for id := range gs {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		_, inA := servers[a]
		_, inB := servers[b]
		if inA != inB {
			if inA {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var admitted map[string]bool // probed at the first need, all at once
	for _, id := range ids {
		if id == n.cfg.NodeID || ctx.Err() != nil {
			continue
		}
		g := gs[id]
		s, in := servers[id]
		switch {
		case g.alive != nil:
			meta := g.alive.Meta
			sid, addr := raft.ServerID(id), raft.ServerAddress(meta.RaftAddr)
			var fut raft.IndexFuture
			voter := false
			if !in {
				if out, tell := n.removed.keepsOut(id, *g.alive); out {
					if tell {
						n.log.Info("grantor: not adding back a grantor removed from the raft configuration while gossip still lists it alive; it is added once gossip sees it leave or die and come back, or it restarts",
							"node_id", id)
					}
					continue
				}
				if !n.joinAllowed(id, meta.RaftAddr) {
					continue
				}
			}
			if !in || s.Address != addr {
				if admitted == nil {
					admitted = n.probeClaims(ctx, gs, servers)
				}
				if !admitted[id] {
					continue
				}
			}
			switch {
			case !in:
				n.log.Info("grantor: adding a grantor alive in gossip to the raft configuration, as a non-voter until it answers",
					"node_id", id, "raft_addr", meta.RaftAddr, "voter", meta.Voter)
				n.staged[sid] = n.trans.requests()
				fut = n.raft.AddNonvoter(sid, addr, 0, membershipTimeout)
				pending = pending || meta.Voter
			case s.Address != addr:
				n.log.Info("grantor: updating a grantor's raft address from gossip",
					"node_id", id, "raft_addr", meta.RaftAddr, "old_addr", string(s.Address))
				if s.Suffrage == raft.Voter {
					fut, voter = n.raft.AddVoter(sid, addr, 0, membershipTimeout), true
				} else {
					n.staged[sid] = n.trans.requests()
					fut = n.raft.AddNonvoter(sid, addr, 0, membershipTimeout)
					pending = pending || meta.Voter
				}
			case meta.Voter && s.Suffrage != raft.Voter:
				if !n.promotable(sid) {
					pending = true
					continue
				}
				n.log.Info("grantor: promoting a grantor that answers to voter", "node_id", id)
				fut, voter = n.raft.AddVoter(sid, addr, 0, membershipTimeout), true
			default:
				continue
			}
			if err := n.await(ctx, fut); err != nil {
				n.log.Warn("grantor: changing a grantor's membership failed; will retry", "node_id", id, "err", err)
			} else {
				n.audit.memberAdd(n.audit.self, id, meta.RaftAddr, voter)
			}
		case g.left && in && n.cfg.TLS == nil:
			n.log.Info("grantor: removing a grantor that left gracefully from the raft configuration", "node_id", id)
			if err := n.await(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, membershipTimeout)); err != nil {
				n.log.Warn("grantor: removing a grantor that left failed; will retry", "node_id", id, "err", err)
			} else {
				n.audit.memberRemove(n.audit.self, id)
			}
		}
	}
	return pending
}

// probeClaims checks, all at once, the raft address of every alive
// gossip grantor that the configuration lacks or lists at another
// address (admissible): a pass then waits for one probe timeout at most,
// not one per member that claims to be a grantor and never answers
// (review R8-12). A claim of a new grantor that no join rule admits is
// not probed: reconcile refuses it anyway (joinAllowed). Called with
// reconcileMu held.
func (n *Node) probeClaims(ctx context.Context, gs map[string]*gossipGrantor, servers map[string]raft.Server) map[string]bool {
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		out = map[string]bool{}
		sem = make(chan struct{}, maxConcurrentProbes)
	)
	for id, g := range gs {
		if id == n.cfg.NodeID || g.alive == nil {
			continue
		}
		addr := g.alive.Meta.RaftAddr
		s, in := servers[id]
		if in && string(s.Address) == addr || !in && !n.nameRules.Load().admitsGrantor(id) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			ok := n.admissible(ctx, id, addr)
			<-sem
			mu.Lock()
			out[id] = ok
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// promotable reports whether the staged non-voter sid may become a voter:
// it has answered a raft request this leader sent after staging it, last
// within promoteContact. A non-voter this leader did not stage (an earlier
// leader did, or it was staged before this term) counts as staged now.
// Called with reconcileMu held.
func (n *Node) promotable(sid raft.ServerID) bool {
	mark, ok := n.staged[sid]
	if !ok {
		n.staged[sid] = n.trans.requests()
		return false
	}
	d, ok := n.trans.answeredAfter(sid, mark)
	return ok && d <= promoteContact
}

// callPeer calls grantor id at rpcAddr over gRPC, within peerTimeout.
// With TLS the server there must present the grantor certificate of id:
// the address may come from gossip, which anyone with the gossip key can
// write, and without the name check any grantor certificate (of a name in
// no configuration too) could answer for id: take a Leave's
// RemoveServer, a registration, or a bootstrap's question.
func (n *Node) callPeer(ctx context.Context, id, rpcAddr string, call func(context.Context, grantorpb.GrantorClient) error) error {
	if rpcAddr == "" {
		return errors.New("no gRPC address known")
	}
	creds := n.dialCredentials()
	if n.cfg.TLS != nil {
		creds = credentials.NewTLS(n.cfg.TLS.ClientConfig(pki.ALPNgRPC, pki.Peer{Roles: []string{pki.RoleGrantor}, Name: id}))
	}
	conn, err := grpc.NewClient(rpcAddr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	return call(ctx, grantorpb.NewGrantorClient(conn))
}

// SetGossipKeys replaces the node's gossip keyring (see
// gossip.Member.SetKeys): the first key encrypts, all decrypt. A grantor
// reloads its key file with it on SIGHUP.
func (n *Node) SetGossipKeys(keys [][]byte) error {
	if n.gossip == nil {
		return errors.New("grantor: this node does not gossip")
	}
	return n.gossip.SetKeys(keys)
}
