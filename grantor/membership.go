package grantor

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// membershipTimeout bounds how long a membership change waits to enter raft.
const membershipTimeout = 10 * time.Second

// leaveRetry is the pause between the attempts of Leave to hand over
// leadership or to have the leader remove this node, when nothing else
// wakes it.
const leaveRetry = 200 * time.Millisecond

// AddVoter adds the node with raft server ID id, reachable at raftAddr, to
// the cluster as a voter (or updates its address). It must be called on the
// leader and returns when the new configuration is committed, or a
// *NotLeaderError. With gossip, the leader does this by itself for every
// alive grantor (discovery.go).
func (n *Node) AddVoter(ctx context.Context, id, raftAddr string) error {
	return n.await(ctx, n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, membershipTimeout))
}

// RemoveServer removes the node with raft server ID id from the cluster:
// for a grantor that died and will not come back (one that is alive
// leaves by itself, see Leave). It must be called on the leader
// (else a *NotLeaderError), fails with ErrUnknownServer when id is not in
// the configuration and with ErrLastVoter for the only voter. It sticks:
// reconciliation does not add the grantor back while gossip still lists
// the same run of it alive (one killed a moment ago is, for seconds), only
// once gossip has seen it leave or die and come back, or it restarts
// (removed.go). A grantor that is alive and well leaves by itself instead
// (Leave).
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if n.raft.State() != raft.Leader {
		return raftProposer{n}.notLeader()
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raftProposer{n}.raftErr(err)
	}
	var found bool
	voters := 0
	for _, s := range f.Configuration().Servers {
		if s.ID == raft.ServerID(id) {
			found = true
		} else if s.Suffrage == raft.Voter {
			voters++
		}
	}
	switch {
	case !found:
		return fmt.Errorf("%w: %q", ErrUnknownServer, id)
	case voters == 0:
		return fmt.Errorf("%w: %q", ErrLastVoter, id)
	}
	n.log.Info("grantor: removing a server from the raft configuration", "node_id", id)
	n.removed.noteRemoval(id, n.gossipMembers())
	return n.await(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, membershipTimeout))
}

// Leader returns the raft server ID and gRPC address of the leader this
// node knows of; both are empty when it knows none, and the address is
// empty while the leader has not registered it.
func (n *Node) Leader() (id, rpcAddr string) {
	e := raftProposer{n}.notLeader()
	return e.LeaderID, e.LeaderRPCAddr
}

// await waits for a raft future or ctx. The change may still happen after
// ctx ends.
func (n *Node) await(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return raftProposer{n}.raftErr(err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// handoverTimeout bounds how long Stop waits for another voter to take
// leadership over; past it the node stops anyway and the others elect a
// leader once they miss its heartbeats. A variable only so that a test on
// a starved machine can wait longer.
var handoverTimeout = time.Second

// Stop stops the node and keeps its place in the cluster: it stays a voter
// in the raft configuration and takes it up again when it starts with the
// same data dir. This is what SIGTERM does, so that `systemctl restart`, a
// package upgrade or a rolling restart of the grantors never shrinks the
// configuration (Consul's servers do the same on terminate; Leave is the
// explicit way out). In order:
//
//  1. It stops answering as leader for good (lessor.retire): no renewal is
//     acknowledged from here on, and sidecars get NotLeader.
//  2. If it leads and has another voter, it hands leadership over (raft
//     leadership transfer, at most handoverTimeout or until ctx ends), so
//     that the sidecars renew at the new leader after a round trip instead
//     of an election timeout. Step 1 is what makes that safe (see Leave).
//  3. It shuts down (Shutdown) without leaving gossip: the others see it
//     fail, not leave, and the leader keeps it in the configuration.
//
// Stop returns Shutdown's error; it does not wait for a quorum, so a node
// that has lost its quorum stops as fast as one that has not.
func (n *Node) Stop(ctx context.Context) error {
	n.log.Info("grantor: stopping; staying in the raft configuration", "id", n.cfg.NodeID)
	n.lessor.retire()
	if n.raft.State() == raft.Leader && n.otherVoters() > 0 {
		hctx, cancel := context.WithTimeout(ctx, handoverTimeout)
		err := n.await(hctx, n.raft.LeadershipTransfer())
		cancel()
		if err != nil {
			n.log.Warn("grantor: leadership not handed over; the others elect a leader", "err", err)
		} else {
			_, id := n.raft.LeaderWithID()
			n.log.Info("grantor: leadership handed over", "to", string(id))
		}
	}
	return n.Shutdown()
}

// otherVoters counts the voters of the raft configuration other than this
// node (0 when the configuration cannot be read).
func (n *Node) otherVoters() int {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	others := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != n.cfg.NodeID {
			others++
		}
	}
	return others
}

// Leave takes this node out of the cluster gracefully, in this order:
//
//  1. It stops answering as leader for good (lessor.retire): no renewal
//     is acknowledged from here on, and sidecars get NotLeader.
//  2. It gossips that it is leaving, so that no leader adds it back while
//     it goes and sidecars stop dialing it.
//  3. If it leads, it hands leadership to another voter (raft leadership
//     transfer), so that the cluster does not wait out an election
//     timeout. Step 1 is what makes that safe: raft still answers
//     VerifyLeader while a transfer is under way.
//  4. It asks the leader, over gRPC, to remove it from the raft
//     configuration (RemoveServer), until that is done or ctx ends.
//  5. It leaves gossip, so the others list it as left.
//
// The last voter of a cluster does not remove itself: its raft state is
// the cluster. Leave keeps the node running (as a follower outside the
// configuration); call Shutdown, or end Run's ctx, afterwards (the Leave
// RPC, `leaseside grantor leave`, makes Run return). It returns
// the error of step 4, if any: the node is then still in the
// configuration (without TLS the leader removes it anyway once gossip
// lists it as left; with TLS it stays until an operator removes it), and
// the later steps are done regardless.
func (n *Node) Leave(ctx context.Context) error {
	_, err := n.leave(ctx)
	return err
}

// leave is Leave, also returning what became of this node's place in the
// raft configuration.
func (n *Node) leave(ctx context.Context) (outcome string, err error) {
	n.log.Info("grantor: leaving the cluster", "id", n.cfg.NodeID)
	n.removal.leaving.Store(true)
	n.lessor.retire()
	if n.gossip != nil {
		if err := n.gossip.AnnounceLeaving(gossipLeaveTimeout); err != nil {
			n.log.Warn("grantor: announcing the leave in gossip", "err", err)
		}
	}
	outcome, err = n.leaveRaft(ctx)
	if err != nil {
		outcome = "not removed"
		n.log.Warn("grantor: not removed from the raft configuration", "err", err)
	}
	if n.gossip != nil {
		timeout := gossipLeaveTimeout
		if d, ok := ctx.Deadline(); ok {
			timeout = max(min(timeout, time.Until(d)), 100*time.Millisecond)
		}
		if err := n.gossip.Leave(timeout); err != nil {
			n.log.Warn("grantor: leaving gossip", "err", err)
		}
	}
	n.log.Info("grantor: left the cluster", "id", n.cfg.NodeID, "raft", outcome)
	return outcome, err
}

// leaveRaft is steps 3 and 4 of Leave. The outcome says, for the log,
// what became of this node's place in the configuration.
func (n *Node) leaveRaft(ctx context.Context) (outcome string, err error) {
	self := raft.ServerID(n.cfg.NodeID)
	ch := make(chan raft.Observation, 16)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.RaftState:
			return true
		}
		return false
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	t := time.NewTimer(leaveRetry)
	defer t.Stop()
	wait := func() error {
		t.Reset(leaveRetry)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
		case <-n.done:
			return ErrShutdown
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("grantor: leaving raft: %w", err)
		}
		return nil
	}
	said := ""
	say := func(msg string, args ...any) {
		if s := fmt.Sprint(msg, args); s != said {
			said = s
			n.log.Info(msg, args...)
		}
	}
	for {
		f := n.raft.GetConfiguration()
		if err := f.Error(); err != nil {
			return "", raftProposer{n}.raftErr(err)
		}
		in, others := false, 0
		for _, s := range f.Configuration().Servers {
			switch {
			case s.ID == self:
				in = true
			case s.Suffrage == raft.Voter:
				others++
			}
		}
		switch {
		case !in:
			return "not in the configuration", nil
		case others == 0:
			n.log.Info("grantor: the only voter stays in its configuration; its raft state is the cluster's")
			return "kept: the last voter", nil
		}
		if n.raft.State() == raft.Leader {
			say("grantor: handing leadership over before leaving")
			if err := n.await(ctx, n.raft.LeadershipTransfer()); err != nil {
				say("grantor: leadership transfer failed; retrying", "err", err)
			}
			if err := wait(); err != nil {
				return "", err
			}
			continue
		}
		leaderID, addr := n.Leader()
		if addr == "" && leaderID != "" {
			addr = n.rpcAddrOf(leaderID)
		}
		if leaderID == "" || addr == "" {
			say("grantor: waiting for a leader to remove this node")
			if err := wait(); err != nil {
				return "", err
			}
			continue
		}
		err := n.callPeer(ctx, leaderID, addr, func(ctx context.Context, c grantorpb.GrantorClient) error {
			_, err := c.RemoveServer(ctx, &grantorpb.RemoveServerRequest{NodeId: n.cfg.NodeID})
			return err
		})
		switch status.Code(err) {
		case codes.OK:
			n.log.Info("grantor: removed from the raft configuration", "by", leaderID)
			return "removed", nil
		case codes.NotFound:
			return "not in the configuration", nil
		}
		say("grantor: the leader did not remove this node yet; retrying", "leader", leaderID, "err", err)
		if err := wait(); err != nil {
			return "", err
		}
	}
}

// membersScope says which entries a Members answer holds.
type membersScope uint8

const (
	// scopeAll: every gossip member, sidecars included, and every raft
	// server; about 77 bytes a sidecar.
	scopeAll membersScope = iota
	// scopeLeader: the entries that stand for the leader and for the
	// answering grantor (MembersRequest.leader_only).
	scopeLeader
	// scopeServers: the entries that stand for the servers of the
	// answering grantor's raft configuration
	// (MembersRequest.servers_only).
	scopeServers
)

// scopeOf is the scope a Members request asks for.
func scopeOf(req *grantorpb.MembersRequest) membersScope {
	switch {
	case req.GetLeaderOnly():
		return scopeLeader
	case req.GetServersOnly():
		return scopeServers
	}
	return scopeAll
}

// members answers the Members RPC: the raft configuration as this node
// knows it, merged with the gossip member list, as much of it as scope
// asks.
func (n *Node) members(scope membersScope) *grantorpb.MembersResponse {
	return n.membersFrom(n.gossipMembers(), scope)
}

// membersFrom is members with ms as the gossip member list. With a scope
// other than scopeAll, the answer holds one entry for each server or
// grantor the scope names, whatever the length of ms: the gossip member
// that stands for it, else one from the raft configuration.
func (n *Node) membersFrom(ms []gossip.MemberInfo, scope membersScope) *grantorpb.MembersResponse {
	_, lid := n.raft.LeaderWithID()
	leaderID := string(lid)
	resp := &grantorpb.MembersResponse{LeaderId: leaderID, AnsweredBy: n.cfg.NodeID}
	isLeader := n.raft.State() == raft.Leader
	var servers []raft.Server
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		servers = f.Configuration().Servers
	}
	raftState := func(id raft.ServerID) string {
		switch {
		case string(id) == n.cfg.NodeID:
			return strings.ToLower(n.raft.State().String())
		case string(id) == leaderID:
			return "leader"
		case leaderID != "":
			return "follower"
		}
		return ""
	}
	lastContact := func(id raft.ServerID) int64 {
		if !isLeader || string(id) == n.cfg.NodeID {
			return -1
		}
		d, ok := n.trans.lastContact(id)
		if !ok {
			return -1
		}
		return d.Milliseconds()
	}
	inRaft := map[string]raft.Server{}
	isServer := map[string]bool{}
	for _, s := range servers {
		inRaft[string(s.ID)] = s
		isServer[string(s.ID)] = true
	}
	wanted := func(id string) bool {
		switch scope {
		case scopeLeader:
			return id == leaderID || id == n.cfg.NodeID
		case scopeServers:
			return isServer[id]
		}
		return true
	}

	// The gossip member that stands for each raft server: alive first.
	stand := map[string]int{}
	for i, in := range ms {
		if in.MetaErr != nil || in.Meta.Role != gossip.RoleGrantor {
			continue
		}
		if j, ok := stand[in.Meta.NodeID]; !ok || ms[j].State != gossip.StateAlive && in.State == gossip.StateAlive {
			stand[in.Meta.NodeID] = i
		}
	}
	for i, in := range ms {
		if scope != scopeAll && (in.MetaErr != nil || in.Meta.Role != gossip.RoleGrantor || !wanted(in.Meta.NodeID) || stand[in.Meta.NodeID] != i) {
			continue
		}
		m := &grantorpb.Member{
			Name:          in.Name,
			Role:          in.Meta.Role,
			GossipAddr:    in.Addr,
			GossipState:   in.State,
			Version:       in.Meta.Version,
			LastContactMs: -1,
		}
		if in.MetaErr != nil {
			m.Role = "unknown"
		}
		if in.MetaErr == nil && in.Meta.Role == gossip.RoleGrantor {
			m.NodeId, m.RpcAddr, m.RaftAddr = in.Meta.NodeID, in.Meta.RPCAddr, in.Meta.RaftAddr
			if s, ok := inRaft[in.Meta.NodeID]; ok && stand[in.Meta.NodeID] == i {
				m.RaftAddr = string(s.Address)
				m.Voter = s.Suffrage == raft.Voter
				m.RaftState = raftState(s.ID)
				m.LastContactMs = lastContact(s.ID)
				delete(inRaft, in.Meta.NodeID)
			}
		}
		resp.Members = append(resp.Members, m)
	}
	// Raft servers that gossip does not list (or no gossip at all).
	for _, s := range servers {
		if _, left := inRaft[string(s.ID)]; !left || !wanted(string(s.ID)) {
			continue
		}
		rpc := n.fsm.nodeAddr(string(s.ID))
		if string(s.ID) == n.cfg.NodeID {
			rpc = n.RPCAddr()
		}
		resp.Members = append(resp.Members, &grantorpb.Member{
			Role:          gossip.RoleGrantor,
			NodeId:        string(s.ID),
			RpcAddr:       rpc,
			RaftAddr:      string(s.Address),
			Voter:         s.Suffrage == raft.Voter,
			RaftState:     raftState(s.ID),
			LastContactMs: lastContact(s.ID),
		})
	}
	rank := func(role string) int {
		switch role {
		case gossip.RoleGrantor:
			return 0
		case gossip.RoleSidecar:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(resp.Members, func(a, b *grantorpb.Member) int {
		return cmp.Or(cmp.Compare(rank(a.Role), rank(b.Role)), cmp.Compare(a.NodeId, b.NodeId), cmp.Compare(a.Name, b.Name))
	})
	return resp
}
