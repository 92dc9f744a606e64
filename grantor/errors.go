package grantor

import (
	"errors"
	"fmt"
)

var (
	// ErrNotLeader is returned by a node that is not the raft leader, or is
	// leader but has not yet taken office; see NotLeaderError.
	ErrNotLeader = errors.New("grantor: not the leader")
	// ErrInvalidArgument is returned for peer input that fails validation;
	// see InvalidArgumentError.
	ErrInvalidArgument = errors.New("grantor: invalid argument")
	// ErrStaleRequest is returned for a request whose sequence number is
	// below its session's pruned floor or was listed in also_received: its
	// outcome has been forgotten because the session said it had received
	// it. See StaleRequestError.
	ErrStaleRequest = errors.New("grantor: stale request")
	// ErrSeqReused is returned when a session sends a different request
	// under a sequence number it already used.
	ErrSeqReused = errors.New("grantor: sequence number reused for a different request")
	// ErrTooManyOutstanding is returned when a session has too many
	// remembered outcomes that it has not acknowledged with first_unacked.
	ErrTooManyOutstanding = errors.New("grantor: too many unacknowledged requests in session")
	// ErrShutdown is returned by a node that has been shut down.
	ErrShutdown = errors.New("grantor: node is shut down")
	// ErrInvalidConfig is returned by Config.Validate.
	ErrInvalidConfig = errors.New("grantor: invalid config")
	// ErrUnknownServer is returned by RemoveServer for a node ID that is
	// not in the raft configuration.
	ErrUnknownServer = errors.New("grantor: no such server in the raft configuration")
	// ErrLastVoter is returned by RemoveServer for the only voter left.
	ErrLastVoter = errors.New("grantor: cannot remove the last voter")
	// ErrPermissionDenied is returned for a request under a session that
	// another identity opened; see PermissionError.
	ErrPermissionDenied = errors.New("grantor: permission denied")
	// ErrHalted is returned by Run when the node met a raft log entry it
	// cannot apply and stopped; see HaltError. Restarting the same binary
	// halts at the same entry: upgrade it.
	ErrHalted = errors.New("grantor: halted at a raft log entry it cannot apply")
)

// HaltError says at which raft log entry the node halted and why. Nothing
// after that entry was applied, and no snapshot is written from the
// halted state, so the data dir still holds the state from before it. It
// matches ErrHalted with errors.Is.
type HaltError struct {
	// Index and Term are the raft log entry's.
	Index uint64
	Term  uint64
	// Leader is the raft server ID of the leader of Term, that wrote the
	// entry, as this node saw it while it ran; "" when it does not know
	// (an entry of a term before its start).
	Leader string
	// Type is the entry's command type (its first byte), 0 when empty.
	Type uint8
	// Unknown is set when this binary does not know Type at all.
	Unknown bool
	// RegisteredBy is, for an unknown Type, a raft server that
	// registered applying it (versions.go): the version marker a newer
	// leaseside leaves in the replicated state before its leader writes a
	// type. "" when no server did: then no leaseside wrote the entry.
	RegisteredBy string
	// Err is the decoding error.
	Err error
}

// Error names the entry, where it came from, what it is and what to do.
func (e *HaltError) Error() string {
	origin := fmt.Sprintf("raft log entry %d (term %d, leader unknown)", e.Index, e.Term)
	if e.Leader != "" {
		origin = fmt.Sprintf("raft log entry %d (term %d, written by leader %s)", e.Index, e.Term, e.Leader)
	}
	const kept = "nothing after the entry was applied; the data dir is kept as it is"
	skip := fmt.Sprintf("to go on without it, stop every grantor and run `leaseside grantor recover --data-dir DIR --skip-index %d` on each (docs/operations-recovery.md)", e.Index)
	switch {
	case e.Unknown && e.RegisteredBy != "":
		return fmt.Sprintf("grantor: halted at %s: command type %d is unknown to this grantor (it applies types up to %d), and grantor %s registered applying it: written by a newer leaseside: upgrade this grantor (%s)",
			origin, e.Type, newestCmd, e.RegisteredBy, kept)
	case e.Unknown:
		return fmt.Sprintf("grantor: halted at %s: command type %d is unknown, and no grantor of this cluster registered applying it, so no leaseside wrote it: the entry is forged or corrupt (%s; %s)",
			origin, e.Type, kept, skip)
	}
	return fmt.Sprintf("grantor: halted at %s: command type %d (%v) cannot be decoded: %v: the entry is forged or corrupt (%s; %s)",
		origin, e.Type, cmdType(e.Type), e.Err, kept, skip)
}

// Unwrap returns the decoding error.
func (e *HaltError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrHalted) true.
func (e *HaltError) Is(target error) bool { return target == ErrHalted }

// NotLeaderError says that this node cannot answer and who can, if known.
// It matches ErrNotLeader with errors.Is.
type NotLeaderError struct {
	// LeaderID is the raft server ID of the leader, empty when unknown.
	LeaderID string
	// LeaderRPCAddr is the leader's gRPC address, empty when unknown.
	LeaderRPCAddr string
}

// Error names the leader when it is known.
func (e *NotLeaderError) Error() string {
	if e.LeaderRPCAddr == "" {
		return "grantor: not the leader (leader unknown)"
	}
	return fmt.Sprintf("grantor: not the leader; leader is %s at %s", e.LeaderID, e.LeaderRPCAddr)
}

// Is makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// InvalidArgumentError names the field of a request that failed validation
// and why. It matches ErrInvalidArgument with errors.Is.
type InvalidArgumentError struct {
	Field  string
	Reason string
}

// Error says which field is wrong and why.
func (e *InvalidArgumentError) Error() string {
	return fmt.Sprintf("grantor: invalid %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidArgument) true.
func (e *InvalidArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

// StaleRequestError says that a request came in below its session's floor.
// It matches ErrStaleRequest with errors.Is.
type StaleRequestError struct {
	Session string
	Seq     uint64
	// Floor is the session's lowest sequence number still remembered.
	Floor uint64
	// Received is set when Seq is above the floor but the session listed
	// it in also_received earlier.
	Received bool
}

// Error says which request is below which floor, or was listed received.
func (e *StaleRequestError) Error() string {
	if e.Received {
		return fmt.Sprintf("grantor: stale request: session %q already listed seq %d in also_received", e.Session, e.Seq)
	}
	return fmt.Sprintf("grantor: stale request: session %q seq %d is below first_unacked %d the session already sent",
		e.Session, e.Seq, e.Floor)
}

// Is makes errors.Is(err, ErrStaleRequest) true.
func (e *StaleRequestError) Is(target error) bool { return target == ErrStaleRequest }

func invalid(field, format string, args ...any) error {
	return &InvalidArgumentError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
