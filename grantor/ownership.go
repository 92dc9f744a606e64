package grantor

import "fmt"

// Session ownership and limits per identity (TEAM.md decision 3, issue 8
// items 1 and 6).
//
// A grantor session belongs to the identity that opened it: the FSM
// records the identity name of the first entry that names the session
// with one (sessionRecord.Owner), and refuses Acquires and Releases under
// that session from any other identity (*PermissionError, nothing
// changes). KeepAlive is leader-local and checks the same record
// (lessor.checkSession). A session recorded without an owner (opened by
// entries older than cmdAcquire4, during an upgrade) is taken by the
// first identity that names it. Without TLS every caller is the insecure
// identity, so every session has the same owner and nothing is refused.
//
// A refused Acquire names the holder's token and the identity name of the
// holder's session, never its session or owner ids: those are what a
// caller would need to act for the holder.
//
// The leader puts the lease limit of the caller's account (account.go)
// into each Acquire (acquireCmd.Limit), so that the FSM enforces it
// deterministically whatever the replicas' own configs say: a grant that
// would take the identity past it is refused (*LimitError), and nothing
// held changes.
//
// Mixed versions: cmdAcquire4 and cmdRelease3 carry the identity. Until
// every server applies them the leader writes the older types without it,
// and ownership and limits are not enforced (versions.go).

// checkOwner refuses identity the use of session s (nil: not opened yet).
// An empty identity (an older entry) and an unowned session pass.
func checkOwner(s *sessionRecord, session, identity string) error {
	if s == nil || identity == "" || s.Owner == "" || s.Owner == identity {
		return nil
	}
	return &PermissionError{Session: session, Identity: identity}
}

// adopt makes identity the owner of session s if it had none, moving the
// charges of the session and its leases to that identity (usage.go).
func (f *fsm) adopt(session string, s *sessionRecord, identity string) {
	if s.Owner != "" || identity == "" {
		return
	}
	f.moveOwner(session, s, identity)
}

func (f *fsm) ownerOf(session string) string {
	if s := f.st.Sessions[session]; s != nil {
		return s.Owner
	}
	return ""
}

// sessionOwner returns the identity name that owns session, "" when none
// (or no such session).
func (f *fsm) sessionOwner(session string) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.ownerOf(session)
}

// refusal answers an Acquire of lease when it has no room now (held, or a
// full semaphore): the oldest holder's token and identity name. ok is
// false when the lease has room.
func (f *fsm) refusal(lease string) (r *acquireResult, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.hasRoomLocked(lease) {
		return nil, false
	}
	return f.refusalLocked(lease), true
}

// PermissionError says that a request named a session another identity
// owns. It matches ErrPermissionDenied with errors.Is.
type PermissionError struct {
	Session  string
	Identity string
}

// Error says what was refused, without naming the session's owner.
func (e *PermissionError) Error() string {
	return fmt.Sprintf("grantor: permission denied: session %q belongs to another identity than %q", e.Session, e.Identity)
}

// Is makes errors.Is(err, ErrPermissionDenied) true.
func (e *PermissionError) Is(target error) bool { return target == ErrPermissionDenied }
