package ipc

import (
	"fmt"
	"time"
)

// Error codes: stable strings clients match on. ONLY APPEND: a code, once
// released, keeps its meaning.
const (
	// CodeBadJSON: the line is not a JSON object of the request shape.
	CodeBadJSON = "bad_json"
	// CodeLineTooLong: the line is over MaxLineBytes.
	CodeLineTooLong = "line_too_long"
	// CodeUnknownOp: op names no operation.
	CodeUnknownOp = "unknown_op"
	// CodeBadRequest: a field is missing, out of range or not allowed
	// for this op.
	CodeBadRequest = "bad_request"
	// CodeInvalidName: the lease name breaks the naming rules.
	CodeInvalidName = "invalid_name"
	// CodeInvalidTTL: the term is outside the range the daemon accepts.
	CodeInvalidTTL = "invalid_ttl"
	// CodeLeaseHeld: the lease is held by another owner.
	CodeLeaseHeld = "lease_held"
	// CodeNotHeld: this host does not hold the lease.
	CodeNotHeld = "not_held"
	// CodeUnavailable: the grantor cluster could not be reached in time.
	CodeUnavailable = "unavailable"
	// CodeLost: the lease was lost before the reply could be written.
	CodeLost = "lost"
	// CodeShuttingDown: the daemon is stopping.
	CodeShuttingDown = "shutting_down"
	// CodeInternal: a bug; the message says more.
	CodeInternal = "internal"
	// CodeTokenMismatch: the lease is held here, but under another token.
	CodeTokenMismatch = "token_mismatch"
	// CodePermissionDenied: the caller may not use this lease name.
	CodePermissionDenied = "permission_denied"
	// CodeResourceExhausted: a limit was reached (the grantor's live
	// leases per sidecar); nothing held changed.
	CodeResourceExhausted = "resource_exhausted"
	// CodeNameNotAllowed: the grantors' name rules do not let this
	// sidecar's identity use the lease name (acquire, elect, proclaim,
	// check_token; a watch of holders gets a watch_refused event).
	CodeNameNotAllowed = "name_not_allowed"
)

// Error is the error object of a failed response. It implements error, and
// errors.Is matches two Errors with the same Code.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// HolderToken is the current holder's token, for CodeLeaseHeld.
	HolderToken string `json:"holder_token,omitempty"`
	// Holder is the current holder's sidecar (host) name, for
	// CodeLeaseHeld, when the grantor reports it.
	Holder string `json:"holder,omitempty"`
	// MinTTLMs and MaxTTLMs are the terms the daemon accepts, for
	// CodeInvalidTTL.
	MinTTLMs int64 `json:"min_ttl_ms,omitempty"`
	MaxTTLMs int64 `json:"max_ttl_ms,omitempty"`
}

// TTLError is the one CodeInvalidTTL error, wherever the term is checked:
// gotMs is outside [min, max].
func TTLError(gotMs int64, min, max time.Duration) *Error {
	e := Errorf(CodeInvalidTTL, "ttl_ms must be from %d to %d (%v to %v), got %d",
		min.Milliseconds(), max.Milliseconds(), min, max, gotMs)
	e.MinTTLMs, e.MaxTTLMs = min.Milliseconds(), max.Milliseconds()
	return e
}

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is, one per code a caller typically branches on.
var (
	// ErrLeaseHeld matches CodeLeaseHeld.
	ErrLeaseHeld = &Error{Code: CodeLeaseHeld}
	// ErrNotHeld matches CodeNotHeld.
	ErrNotHeld = &Error{Code: CodeNotHeld}
	// ErrUnavailable matches CodeUnavailable.
	ErrUnavailable = &Error{Code: CodeUnavailable}
	// ErrPermissionDenied matches CodePermissionDenied.
	ErrPermissionDenied = &Error{Code: CodePermissionDenied}
)
