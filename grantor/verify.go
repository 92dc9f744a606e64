package grantor

import (
	"errors"

	"github.com/hashicorp/raft"
)

// Verify rounds that count only answers to messages sent after they
// began (issue 22 item 4).
//
// hashicorp/raft's VerifyLeader counts a follower's answer to any
// heartbeat that arrives while the round is open, also the answer to one
// sent before the round began. Such an answer proves nothing about the
// present: a leader process paused with it in its socket buffer, resumed
// after a successor took office, would count it and acknowledge a renewal
// whose t0 is after the successor's tE. The transport numbers every
// AppendEntries and InstallSnapshot as it is sent (transport.go); a round
// takes the number of the last one sent before it begins (the mark) and
// is confirmed only when a quorum of the voters, this node counted, has
// answered one numbered above the mark with success. VerifyLeader does the
// asking: the heartbeats it triggers are sent after the mark. A round
// whose raft quorum rested on older answers runs VerifyLeader again, at
// most verifyRounds times in all, and then confirms nothing.

// verifyRounds bounds the VerifyLeader calls of one verify round. The
// second normally suffices: it counts the answers to the heartbeats the
// first triggered, all sent after the mark.
const verifyRounds = 3

// errStaleQuorum says that a verify round found no quorum of fresh
// answers within verifyRounds VerifyLeader calls.
var errStaleQuorum = errors.New("no quorum of the voters answered a heartbeat sent after the verify round began")

// raftVerifier is what a freshVerifier asks of raft (*raft.Raft).
type raftVerifier interface {
	VerifyLeader() raft.Future
	GetConfiguration() raft.ConfigurationFuture
}

// freshVerifier runs verify rounds over r, counting the answers trans
// saw; self is this server's ID; await waits for a raft future.
type freshVerifier struct {
	r     raftVerifier
	trans *contactTransport
	self  raft.ServerID
	await func(raft.Future) error
}

// verify runs one round, begun now: nil when a quorum of the voters of the
// latest configuration (this server counted) answered a message sent
// after the call began.
func (v freshVerifier) verify() error {
	mark := v.trans.requests()
	for range verifyRounds {
		if err := v.await(v.r.VerifyLeader()); err != nil {
			return err
		}
		f := v.r.GetConfiguration()
		if err := f.Error(); err != nil {
			return err
		}
		if freshQuorum(f.Configuration(), v.self, func(id raft.ServerID) bool { return v.trans.confirmedAfter(id, mark) }) {
			return nil
		}
	}
	return errStaleQuorum
}

// freshQuorum reports whether more than half of cfg's voters are self or
// answered (fresh).
func freshQuorum(cfg raft.Configuration, self raft.ServerID, fresh func(raft.ServerID) bool) bool {
	voters, yes := 0, 0
	for _, s := range cfg.Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		if s.ID == self || fresh(s.ID) {
			yes++
		}
	}
	return yes > voters/2
}
