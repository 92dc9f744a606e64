package grantor

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// membershipTimeout bounds how long a membership change waits to enter raft.
const membershipTimeout = 10 * time.Second

// AddVoter adds the node with raft server ID id, reachable at raftAddr, to
// the cluster as a voter (or updates its address). It must be called on the
// leader and returns when the new configuration is committed, or a
// *NotLeaderError. The discovery layer will call this; until then tests and
// operators do.
func (n *Node) AddVoter(ctx context.Context, id, raftAddr string) error {
	return n.await(ctx, n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, membershipTimeout))
}

// RemoveServer removes the node with raft server ID id from the cluster.
// It must be called on the leader.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
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
