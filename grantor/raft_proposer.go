package grantor

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// raftProposer is the lessor's proposer backed by the node's raft.
type raftProposer struct{ n *Node }

func (p raftProposer) apply(cmd []byte) (any, error) {
	began := time.Now()
	f := p.n.raft.Apply(cmd, applyEnqueueTimeout)
	if err := p.await(f); err != nil {
		return nil, p.raftErr(err)
	}
	p.n.metrics.applyTime.Observe(time.Since(began).Seconds())
	return f.Response(), nil
}

func (p raftProposer) barrier() error {
	return p.raftErr(p.await(p.n.raft.Barrier(0)))
}

func (p raftProposer) verifyLeader() error {
	began := time.Now()
	v := freshVerifier{r: p.n.raft, trans: p.n.trans, self: raft.ServerID(p.n.cfg.NodeID), await: p.await}
	err := p.raftErr(v.verify())
	if err == nil {
		p.n.metrics.verifyTime.Observe(time.Since(began).Seconds())
	}
	return err
}

// await waits for a raft future, or gives up with ErrRaftShutdown when
// the node shuts down: after raft.Shutdown, a future in flight may never
// answer (hashicorp/raft issue 498), and a handler waiting on it would
// hold up the node's stop for good. The goroutine left waiting on such a
// future ends with the process.
func (p raftProposer) await(f raft.Future) error {
	errc := make(chan error, 1)
	go func() { errc <- f.Error() }()
	select {
	case err := <-errc:
		return err
	case <-p.n.done:
		select {
		case err := <-errc: // answered after all
			return err
		default:
			return raft.ErrRaftShutdown
		}
	}
}

func (p raftProposer) isLeader() bool { return p.n.raft.State() == raft.Leader }

func (p raftProposer) term() uint64 { return p.n.raft.CurrentTerm() }

func (p raftProposer) notLeader() *NotLeaderError {
	_, id := p.n.raft.LeaderWithID()
	e := &NotLeaderError{LeaderID: string(id)}
	switch {
	case id == "":
	case string(id) == p.n.cfg.NodeID && p.n.lessor.isRetired.Load():
		// Still raft leader while it hands over (Leave): naming itself
		// would send sidecars straight back.
		e.LeaderID = ""
	case string(id) == p.n.cfg.NodeID:
		e.LeaderRPCAddr = p.n.RPCAddr()
	default:
		e.LeaderRPCAddr = p.n.rpcAddrOf(string(id))
	}
	return e
}

// raftErr turns raft's leadership errors into a *NotLeaderError and
// shutdown into ErrShutdown; other errors are wrapped as they are.
func (p raftProposer) raftErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrAbortedByRestore):
		return p.notLeader()
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrShutdown
	}
	return fmt.Errorf("grantor: raft: %w", err)
}
