package grantor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// Bootstrap-expect (Config.BootstrapExpect): a new cluster bootstraps
// itself from gossip once the expected voter grantors see each other,
// none of them with raft state (discovery.go says how a grantor uses
// gossip otherwise).

// bootstrapRetry is how often bootstrapExpect looks again without a
// gossip change (a peer whose gRPC server is not up yet).
const bootstrapRetry = time.Second

// bootstrapExpect bootstraps a new cluster, Consul style: once
// BootstrapExpect alive voter grantors see each other in gossip, and every
// one of them answers Members with no raft configuration and no leader,
// each bootstraps with the same configuration (all of them, as voters),
// which raft treats as one cluster. If any has raft state, a cluster
// exists: this node waits for its leader to add it (reconcile). If more
// fresh grantors than expected are visible, it refuses to guess which of
// them form the cluster. It ends once this node has raft state.
func (n *Node) bootstrapExpect() {
	defer n.watchers.Done()
	ctx, cancel := n.untilStopped()
	defer cancel()
	t := time.NewTimer(bootstrapRetry)
	defer t.Stop()
	said := ""
	say := func(msg string, args ...any) {
		if s := fmt.Sprint(msg, args); s != said {
			said = s
			n.log.Info(msg, args...)
		}
	}
	for {
		changed := n.gossip.Changes()
		if n.hasRaftState() {
			n.log.Info("grantor: raft state present; bootstrap-expect done")
			return
		}
		if n.tryBootstrap(ctx, say) {
			return
		}
		t.Reset(bootstrapRetry)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// hasRaftState reports whether raft has a configuration or a log.
func (n *Node) hasRaftState() bool {
	if n.raft.LastIndex() > 0 {
		return true
	}
	f := n.raft.GetConfiguration()
	return f.Error() == nil && len(f.Configuration().Servers) > 0
}

// tryBootstrap is one attempt of bootstrapExpect; true means done.
func (n *Node) tryBootstrap(ctx context.Context, say func(string, ...any)) bool {
	want := n.cfg.BootstrapExpect
	var voters []gossip.MemberInfo
	for _, in := range n.gossip.Members() {
		if in.State == gossip.StateAlive && in.MetaErr == nil && in.Meta.Role == gossip.RoleGrantor && in.Meta.Voter &&
			n.joinAllowed(in.Meta.NodeID, in.Meta.RaftAddr) {
			voters = append(voters, in)
		}
	}
	if len(voters) < want {
		say("grantor: bootstrap-expect: waiting for grantors", "expect", want, "see", len(voters))
		return false
	}
	for _, v := range voters {
		if v.Meta.NodeID == n.cfg.NodeID {
			continue
		}
		resp, err := n.membersOf(ctx, v.Meta.NodeID, v.Meta.RPCAddr)
		if err != nil {
			say("grantor: bootstrap-expect: a grantor does not answer yet", "node_id", v.Meta.NodeID, "rpc", v.Meta.RPCAddr, "err", err)
			return false
		}
		if clusterExists(resp) {
			if n.seedProofs.provesID(v.Meta.NodeID) {
				n.learnSeedVoters(v.Meta.NodeID, resp)
			}
			say("grantor: bootstrap-expect: a cluster exists; waiting to join it (its leader adds this node)",
				"asked", v.Meta.NodeID, "leader_id", resp.GetLeaderId())
			return false
		}
	}
	if len(voters) > want {
		say("grantor: bootstrap-expect: more grantors without raft state than expected; not guessing which form the cluster (check bootstrap_expect on every grantor)",
			"expect", want, "see", len(voters))
		return false
	}
	conf := raft.Configuration{}
	var ids []string
	for _, v := range voters {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(v.Meta.NodeID), Address: raft.ServerAddress(v.Meta.RaftAddr)})
		ids = append(ids, v.Meta.NodeID)
	}
	slices.SortFunc(conf.Servers, func(a, b raft.Server) int { return cmp.Compare(a.ID, b.ID) })
	slices.Sort(ids)
	switch err := n.raft.BootstrapCluster(conf).Error(); {
	case err == nil:
		n.log.Info("grantor: bootstrapped the cluster", "voters", ids)
		return true
	case errors.Is(err, raft.ErrCantBootstrap):
		n.log.Info("grantor: bootstrap-expect: raft state appeared (added by a leader); not bootstrapping")
		return true
	default:
		n.log.Warn("grantor: bootstrap-expect: bootstrapping failed; will retry", "err", err)
		return false
	}
}

// clusterExists reports whether a Members answer shows a raft cluster:
// a leader, or any server in the configuration.
func clusterExists(resp *grantorpb.MembersResponse) bool {
	if resp.GetLeaderId() != "" {
		return true
	}
	for _, m := range resp.GetMembers() {
		if m.GetVoter() || m.GetRaftState() != "" {
			return true
		}
	}
	return false
}
