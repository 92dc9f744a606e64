package ipc

import (
	"unicode/utf8"
)

// The coordination primitives of protocol 3 (issue 12): semaphores
// (acquire's limit), leader election (elect, proclaim, resign, observe),
// cluster-wide holder watches (watch with holders), token checks at the
// grantor (check_token), and the jeopardy and safe events.

// Operations of protocol 3.
const (
	// OpElect is an acquire that carries a value (an election
	// candidate's address, say), shown to observers while it leads.
	OpElect = "elect"
	// OpProclaim changes the value of a grant this host holds, keeping
	// its token.
	OpProclaim = "proclaim"
	// OpResign gives up an election (a release).
	OpResign = "resign"
	// OpObserve follows a lease's leader, cluster-wide: leader and
	// no_leader events.
	OpObserve = "observe"
	// OpCheckToken asks the grantor cluster whether a token is the live
	// grant of a lease.
	OpCheckToken = "check_token"
)

// Bounds of the primitives' values. The grantor checks the same ones.
const (
	// MaxLimit is the largest semaphore limit.
	MaxLimit = 256
	// MaxValueBytes is the longest value of a grant.
	MaxValueBytes = 1024
)

// Holder is one grant of a lease as a cluster-wide watch sees it.
type Holder struct {
	// Token is the grant's fencing token, decimal.
	Token string `json:"token"`
	// Holder is the name of the holder's sidecar (its certificate's
	// name; "insecure" without TLS).
	Holder string `json:"holder"`
	// Value is the grant's value, if it has one.
	Value string `json:"value,omitempty"`
}

// Events of protocol 3.
const (
	// EventHolder: the holders of a watched lease changed, cluster-wide
	// (watch with holders); Change says how.
	EventHolder = "holder"
	// EventLeader: an observed lease has a leader (a new one, or a new
	// value): token, holder, value.
	EventLeader = "leader"
	// EventNoLeader: an observed lease has no holder.
	EventNoLeader = "no_leader"
	// EventJeopardy: renewals of the lease have failed for a third of
	// its term; valid_ms is what is left. It is still held: finish or
	// pause what cannot be cut off at the deadline.
	EventJeopardy = "jeopardy"
	// EventSafe: a renewal succeeded again after jeopardy.
	EventSafe = "safe"
	// EventWatchRefused: the grantors refused to watch a lease's holders
	// for this host (reason name_not_allowed: their name rules); the
	// subscription ended.
	EventWatchRefused = "watch_refused"
)

// Changes a holder event describes.
const (
	// ChangeSync: the holders as they are now: the first event of a
	// watch, and after the daemon re-synchronised with the grantor
	// leader (changes in between may not have been told one by one).
	ChangeSync = "sync"
	// ChangeAcquired: token was granted.
	ChangeAcquired = "acquired"
	// ChangeReleased: token was released by its holder.
	ChangeReleased = "released"
	// ChangeExpired: token ended because its holder stopped renewing.
	ChangeExpired = "expired"
	// ChangeProclaimed: token has a new value.
	ChangeProclaimed = "proclaimed"
)

// CodeNotSupported: the grantor cluster does not support the request
// yet (a grantor is older than the daemon); upgrade every grantor.
const CodeNotSupported = "not_supported"

// validateValue checks a grant's value: at most MaxValueBytes of UTF-8
// without control characters (the grantor's rule too).
func validateValue(v string) *Error {
	if len(v) > MaxValueBytes {
		return Errorf(CodeBadRequest, "value is %d bytes, more than %d", len(v), MaxValueBytes)
	}
	if !utf8.ValidString(v) {
		return Errorf(CodeBadRequest, "value is not valid UTF-8")
	}
	for i, r := range v {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return Errorf(CodeBadRequest, "value has control character %U at byte %d", r, i)
		}
	}
	return nil
}

// validatePrims checks the fields of protocol 3.
func (r *Request) validatePrims(seen fieldSet) *Error {
	if seen&fieldLimit != 0 && (r.Limit < 1 || r.Limit > MaxLimit) {
		return Errorf(CodeBadRequest, "limit must be 1 to %d, got %d", MaxLimit, r.Limit)
	}
	if r.Value != nil {
		if err := validateValue(*r.Value); err != nil {
			return err
		}
	}
	if r.Holders && r.Lease == "" {
		return Errorf(CodeBadRequest, "watch with holders needs a lease")
	}
	if r.Limit > 1 && r.NoRenew {
		return Errorf(CodeBadRequest, "no_renew is not for semaphores")
	}
	if r.Shared && r.Limit > 1 {
		return Errorf(CodeBadRequest, "shared and limit %d do not mix: a shared lock has any number of shared holders and no limit; a semaphore (limit) is another kind of lock", r.Limit)
	}
	return nil
}

// LimitValue returns the semaphore limit asked for: 1 (exclusive) unless
// limit says more.
func (r *Request) LimitValue() int { return max(r.Limit, 1) }

// ValueString returns the value asked for, "" when none.
func (r *Request) ValueString() string {
	if r.Value == nil {
		return ""
	}
	return *r.Value
}
