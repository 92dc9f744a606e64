package grantor

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// Mixed versions of grantors in one cluster (TEAM.md decision 4).
//
// A raft log outlives binaries, and during a rolling upgrade old and new
// grantors apply the same log. A grantor that meets a command type it does
// not know halts (fsm.go) rather than skip it, so a leader must never
// propose a type some server cannot apply. Every grantor therefore
// registers, in the replicated state, the newest type it applies
// (registerNodeCmd.MaxCmd): the leader for itself when it takes office, a
// follower through the leader's RegisterNode RPC whenever the state does
// not show its current registration. The leader proposes a type only when
// every server in the raft configuration, voters and non-voters, has
// registered it; a server that registered nothing counts as baselineCmd.
// Until then it writes the older form of the same request, with the older
// meaning:
//
//   - cmdAcquire3 (a holder's re-acquire takes the next token) falls back
//     to cmdAcquire2 or cmdAcquire, where the holder keeps its token.
//   - cmdAcquire2 and cmdRelease2 (also_received) fall back to cmdAcquire
//     and cmdRelease without the list: the session's outcomes are then
//     remembered until first_unacked passes them.
//
// Once a type is in the log, a server added later with an older binary
// halts at it with "upgrade this grantor"; downgrading a cluster past a
// type it has written is not possible.

// registerRetry bounds the pause between a follower's registration
// attempts while the leader's state does not show it.
const registerRetry = 2 * time.Second

// allowed returns the newest command type every server in the raft
// configuration has registered that it applies.
func (p raftProposer) allowed() cmdType {
	return allowedCmd(p.n.raft.GetConfiguration(), p.n.fsm)
}

func allowedCmd(f raft.ConfigurationFuture, st *fsm) cmdType {
	if f.Error() != nil {
		return baselineCmd
	}
	allowed := newestCmd
	for _, s := range f.Configuration().Servers {
		allowed = min(allowed, st.nodeCmd(string(s.ID)))
	}
	return allowed
}

// registered reports whether the replicated state shows this node's
// current gRPC address and newest command type.
func (n *Node) registered() bool {
	return n.fsm.nodeAddr(n.cfg.NodeID) == n.RPCAddr() && n.fsm.nodeCmd(n.cfg.NodeID) == newestCmd
}

// registerSelf records this node's registration through its own raft; the
// leader calls it when it takes office.
func (n *Node) registerSelf(ctx context.Context) {
	if n.registered() || ctx.Err() != nil {
		return
	}
	cmd := encodeCmd(cmdRegisterNode, registerNodeCmd{NodeID: n.cfg.NodeID, RPCAddr: n.RPCAddr(), MaxCmd: newestCmd})
	if _, err := (raftProposer{n}).apply(cmd); err != nil {
		n.log.Warn("grantor: registering this node failed", "err", err)
	}
}

// registerLoop runs while the node runs: whenever this node follows and
// the state does not show its registration, it asks the leader to record
// it, retrying until the state shows it. Leadership changes and applied
// registrations wake it.
func (n *Node) registerLoop() {
	defer n.watchers.Done()
	ch, stop := n.leaderChanges()
	defer stop()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ch:
		case <-n.registeredCh:
		case <-t.C:
		case <-n.done:
			return
		}
		if n.registered() || n.raft.State() == raft.Leader {
			continue // the leader registers itself when it takes office
		}
		if err := n.registerWithLeader(); err != nil {
			n.log.Debug("grantor: registering with the leader failed; retrying", "err", err)
		}
		if !n.registered() {
			t.Reset(registerRetry)
		}
	}
}

// registerWithLeader calls RegisterNode on the leader.
func (n *Node) registerWithLeader() error {
	id, addr := n.Leader()
	if addr == "" && id != "" {
		addr = n.rpcAddrOf(id)
	}
	if id == "" || addr == "" {
		return errors.New("no leader known")
	}
	ctx, cancel := n.untilStopped()
	defer cancel()
	return n.callPeer(ctx, id, addr, func(ctx context.Context, c grantorpb.GrantorClient) error {
		_, err := c.RegisterNode(ctx, &grantorpb.RegisterNodeRequest{
			NodeId: n.cfg.NodeID, RpcAddr: n.RPCAddr(), MaxCommand: uint32(newestCmd),
		})
		return err
	})
}

// RegisterNode implements grantorpb.GrantorServer: the leader records a
// server's registration. Only servers of the raft configuration register;
// with TLS, a grantor certificate registers only its own node ID.
func (s *service) RegisterNode(ctx context.Context, req *grantorpb.RegisterNodeRequest) (*grantorpb.RegisterNodeResponse, error) {
	id := IdentityFrom(ctx)
	switch {
	case s.n.cfg.TLS != nil && id.Role != RoleGrantor: // authorize refuses it first
		return nil, status.Errorf(codes.PermissionDenied, "grantor: %v may not register grantors", id)
	case id.Role == RoleGrantor && id.Name != req.GetNodeId():
		return nil, status.Errorf(codes.PermissionDenied, "grantor: %v may not register node %q", id, req.GetNodeId())
	}
	c, err := validRegisterNode(req)
	if err != nil {
		return nil, toStatus(err)
	}
	if _, err := s.n.lessor.await(ctx); err != nil {
		return nil, toStatus(err)
	}
	f := s.n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, toStatus(raftProposer{s.n}.raftErr(err))
	}
	member := false
	for _, srv := range f.Configuration().Servers {
		member = member || string(srv.ID) == c.NodeID
	}
	if !member {
		return nil, status.Errorf(codes.NotFound, "grantor: %q is not in the raft configuration", c.NodeID)
	}
	if _, err := (raftProposer{s.n}).apply(encodeCmd(cmdRegisterNode, c)); err != nil {
		return nil, toStatus(err)
	}
	return &grantorpb.RegisterNodeResponse{}, nil
}
