package grantor

import (
	"context"
	"fmt"
)

// Role is what a caller of the grantor's gRPC service is: a grantor peer, a
// sidecar, or an operator. It is read from the caller's certificate (URI SAN
// leaseside://ROLE/NAME) by the authorisation interceptor; the handlers and
// the FSM only see it through Identity.
type Role uint8

// The roles, in the order of what they may do. The zero Role is not a role:
// an Identity with it is refused everything.
const (
	// RoleNone is the zero Role; no caller has it.
	RoleNone Role = iota
	// RoleGrantor is a grantor peer: raft and every call.
	RoleGrantor
	// RoleSidecar is a sidecar (leaseside daemon): Acquire, Release,
	// KeepAlive and Members, for sessions it opened itself.
	RoleSidecar
	// RoleOperator is an operator (leaseside members, bench, an insecure
	// caller): what a sidecar may do and the admin calls.
	RoleOperator
)

// String returns the role as it is spelled in a certificate's URI SAN.
func (r Role) String() string {
	switch r {
	case RoleGrantor:
		return "grantor"
	case RoleSidecar:
		return "sidecar"
	case RoleOperator:
		return "operator"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// ParseRole reads a role as String spells it; anything else is an error.
func ParseRole(s string) (Role, error) {
	switch s {
	case "grantor":
		return RoleGrantor, nil
	case "sidecar":
		return RoleSidecar, nil
	case "operator":
		return RoleOperator, nil
	}
	return RoleNone, fmt.Errorf("grantor: unknown role %q (want grantor, sidecar or operator)", s)
}

// Identity is the verified caller of a gRPC call: its role and its name
// (the node ID of a grantor, the host name of a sidecar, an operator's
// name). A grantor session belongs to the Identity name that opened it.
type Identity struct {
	// Role says what the caller may do.
	Role Role
	// Name names the caller within its role.
	Name string
}

// InsecureIdentity is every caller's identity when TLS is off (loopback
// dev, --insecure): an operator named "insecure", so that the same code
// paths run with and without TLS (TEAM.md decision 3).
var InsecureIdentity = Identity{Role: RoleOperator, Name: "insecure"}

// String returns ROLE/NAME, as the certificate's URI SAN names it.
func (id Identity) String() string { return id.Role.String() + "/" + id.Name }

// owner is how the replicated state names id as a session's owner (and so
// a lease's holder, and whose limit a lease counts against): a sidecar by
// its name, the host name a refused Acquire shows; any other role as
// ROLE/NAME, which no sidecar name can be (a name has no '/'), so that an
// operator or grantor certificate named like a host does not act under
// that host's sessions or use up its limit (review R8-16). Without TLS
// every caller is InsecureIdentity, named "insecure" there as before.
func (id Identity) owner() string {
	if id.Role == RoleSidecar || id == InsecureIdentity {
		return id.Name
	}
	return id.String()
}

// identityKey is the context key of the Identity; unexported so only
// ContextWithIdentity can set it.
type identityKey struct{}

// ContextWithIdentity returns a copy of ctx that carries id. The
// authorisation interceptor calls it once per call, after verifying the
// caller's certificate; tests call it to act as a given caller.
func ContextWithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the Identity that ctx carries, or InsecureIdentity
// when it carries none (no interceptor set one: TLS is off).
func IdentityFrom(ctx context.Context) Identity {
	if id, ok := ctx.Value(identityKey{}).(Identity); ok {
		return id
	}
	return InsecureIdentity
}
