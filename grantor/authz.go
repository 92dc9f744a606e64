package grantor

import (
	"context"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
)

// callRoles lists, for each RPC of the Grantor service, the roles that
// may make it (docs/design.md section 6). An RPC missing here is refused to
// every role, and TestEveryRPCHasRoles fails until it is added.
//
// A sidecar's calls are further limited to its own sessions: the FSM
// refuses a request under a session another identity opened.
var callRoles = map[string][]Role{
	grantorpb.Grantor_Acquire_FullMethodName:       {RoleGrantor, RoleSidecar, RoleOperator},
	grantorpb.Grantor_AcquireShared_FullMethodName: {RoleGrantor, RoleSidecar, RoleOperator},
	grantorpb.Grantor_Release_FullMethodName:       {RoleGrantor, RoleSidecar, RoleOperator},
	grantorpb.Grantor_KeepAlive_FullMethodName:     {RoleGrantor, RoleSidecar, RoleOperator},
	grantorpb.Grantor_Members_FullMethodName:       {RoleGrantor, RoleSidecar, RoleOperator},
	grantorpb.Grantor_RemoveServer_FullMethodName:  {RoleGrantor, RoleOperator},
	grantorpb.Grantor_Leave_FullMethodName:         {RoleGrantor, RoleOperator},
	// A grantor registers itself (the handler refuses another node ID).
	// Not an operator: it could forge any grantor's address or newest
	// command type (review R8-8). Without TLS, where grantors call as
	// the one insecure identity, authorize lets every listed call through.
	grantorpb.Grantor_RegisterNode_FullMethodName: {RoleGrantor},
	// The coordination primitives (issue 12): Proclaim acts on the
	// caller's own session like Release; Watch and CheckToken only read.
	grantorpb.Grantor_Proclaim_FullMethodName:   {RoleGrantor, RoleSidecar, RoleOperator},
	grantorpb.Grantor_Watch_FullMethodName:      {RoleGrantor, RoleSidecar, RoleOperator},
	grantorpb.Grantor_CheckToken_FullMethodName: {RoleGrantor, RoleSidecar, RoleOperator},
	// The operator calls (issue 24): Leases only reads, and lists only
	// the names the caller's name rules let it read (a sidecar relays it
	// for root on its host); Revoke ends other identities' grants, which
	// is an operator's alone.
	grantorpb.Grantor_Leases_FullMethodName: {RoleGrantor, RoleSidecar, RoleOperator},
	grantorpb.Grantor_Revoke_FullMethodName: {RoleOperator},
}

// authorize establishes the caller of a call: with TLS, the identity in
// its verified certificate (read once per connection by
// pki.ServerCredentials); without, InsecureIdentity. It refuses a call the
// role may not make (with TLS; without, any call callRoles lists is
// made) with PermissionDenied, and logs and audits it.
func (n *Node) authorize(ctx context.Context, method string) (context.Context, error) {
	id := InsecureIdentity
	if n.cfg.TLS != nil {
		p, ok := peer.FromContext(ctx)
		var ai pki.AuthInfo
		if ok {
			ai, ok = p.AuthInfo.(pki.AuthInfo)
		}
		if !ok { // the credentials always set it; not reached
			return nil, status.Error(codes.Unauthenticated, "grantor: no verified certificate")
		}
		role, err := ParseRole(ai.Identity.Role)
		if err != nil { // pki validated the role; not reached
			return nil, status.Error(codes.Unauthenticated, err.Error())
		}
		id = Identity{Role: role, Name: ai.Identity.Name}
	}
	allowed := slices.Contains(callRoles[method], id.Role)
	if n.cfg.TLS == nil {
		// Nobody is told apart: every caller is InsecureIdentity and may
		// make every call the service has.
		allowed = len(callRoles[method]) > 0
	}
	if !allowed {
		call := method[strings.LastIndexByte(method, '/')+1:]
		n.metrics.refusedCall(id.Role)
		n.audit.refused(id, call, "the role may not make this call")
		return nil, status.Errorf(codes.PermissionDenied, "grantor: a %s certificate may not call %s (caller %s)", id.Role, call, id)
	}
	return ContextWithIdentity(ctx, id), nil
}

// unaryAuth is the unary half of the authorisation interceptor: the
// caller's role, then the name rules (namerules.go), then the handler.
func (n *Node) unaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, err := n.authorize(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	var resp any
	if err = n.checkNames(ctx, info.FullMethod, req); err == nil {
		resp, err = handler(ctx, req)
	}
	n.auditRefusal(ctx, info.FullMethod, req, err)
	return resp, err
}

// streamAuth is the streaming half of the authorisation interceptor.
func (n *Node) streamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, err := n.authorize(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	err = handler(srv, identityStream{ss, ctx})
	n.auditRefusal(ctx, info.FullMethod, nil, err)
	return err
}

// auditRefusal audits a call the handler refused to its caller: under
// another identity's session (PERMISSION_DENIED) or over a limit
// (RESOURCE_EXHAUSTED), naming the lease when the request has one.
func (n *Node) auditRefusal(ctx context.Context, method string, req any, err error) {
	st, _ := status.FromError(err)
	if c := st.Code(); c != codes.PermissionDenied && c != codes.ResourceExhausted {
		return
	}
	var attrs []any
	if r, ok := req.(interface{ GetLease() string }); ok {
		attrs = append(attrs, "lease", r.GetLease())
	}
	n.audit.refused(IdentityFrom(ctx), method[strings.LastIndexByte(method, '/')+1:], st.Message(), attrs...)
}

// identityStream is a server stream whose context carries the caller's
// identity.
type identityStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s identityStream) Context() context.Context { return s.ctx }
