// The wire contract between a leaseside sidecar and the grantor cluster.
//
// Field numbers are append-only: a field once released is never renumbered
// or reused, because sidecars and grantors of different versions talk to
// each other during a rolling upgrade.
//
// Version history:
//   1: Acquire, Release, KeepAlive.
//   2: Members, RemoveServer; RequestID.also_received.
//   3: Leave, RegisterNode. AcquireResponse states the stored term and the
//      grantor's rho and epsilon; LeaseRef.ttl_ns carries a renewal's term
//      (request) and the term applied (reply); KeepAliveResponse states
//      rho and epsilon. A holder's re-acquire takes a new token.
//   4: A session belongs to the identity that opened it: requests under it
//      from another identity fail with PERMISSION_DENIED. A refused
//      Acquire names holder_name, no longer holder_session/holder_owner.
//      A sidecar over its limit of live leases gets RESOURCE_EXHAUSTED.
//   5: A keepalive renews whole sessions (KeepAliveRequest.sessions): a
//      session's leases live as long as it, whatever their number; the
//      reply lists a session's leases only when the holder's digest of
//      them (lease_set_version) differs. LeaseRef.owner. A release or an
//      expiry hands a lease to its first waiter in the same raft entry.
//   6: Semaphores and elections (issue 12): AcquireRequest.limit (up to
//      that many holders of one name, each with its own token) and
//      value (an election candidate's value), AcquireResponse.limit and
//      holders; Proclaim (a holder changes its grant's value, same
//      token); Watch (the holders of a set of names, then every change,
//      pushed by the leader from what it applies); CheckToken (is a
//      token the live grant of a name, answered by the leader after a
//      verify round, without a raft entry).
//   7: AcquireResponse.ended: a retried Acquire whose grant was made and
//      has ended is told so, not refused.
//   8: Lock-delay is the grantor's (Chubby): AcquireRequest.lock_delay_ns
//      is stored with the grant; a grant that expires, is revoked or is
//      released with ReleaseRequest.owner_ended leaves its name delayed
//      until the leader ends the delay; AcquireResponse.delayed.
//   9: Name rules per identity: an Acquire, Proclaim or CheckToken of a
//      name the caller's rules do not give it fails with
//      PERMISSION_DENIED and a NameNotAllowed detail; a Watch of such a
//      name gets one DENIED event for it instead of its SNAPSHOT.
//  10: Operator calls (issue 24): Leases lists the grants that stand in
//      the cluster, with their remaining terms and waiters; Revoke ends
//      grants of a name for an operator (a raft entry; the name stays
//      delayed for the grant's term and lock-delay).
//  11: SessionRenewal.untold and owner_ended: the sidecar names the grants
//      of a session it ends (nobody was told of them, or a release did not
//      get there); the leader ends each, untold ones without lock-delay.
//      A sidecar no longer gives back grants it does not know.
//  12: ReleaseRequest.lapsed: a sidecar's release of a grant whose
//      holder's deadline passed (a no_renew lease that lapsed, one lost
//      for failed renewals) is told to watchers as EXPIRED, not RELEASED.
//  13: Shared (read/write) locks (issue 24): AcquireShared asks for a
//      shared grant (any number stand together; an exclusive grant stands
//      alone); a grantor older than version 13 answers it UNIMPLEMENTED,
//      so none takes a shared request for an exclusive one.
//      AcquireResponse.shared, WatchEvent.shared, LeaseInfo.shared.
//  14: MembersResponse.caller_join: whether the answering grantor's join
//      rules admit the grantor certificate that asks (issue 21: a grantor
//      removed while it was down stops once it learns it is retired).
//  15: MembersRequest.leader_only: the answer lists only the leader and
//      the answering grantor, whatever the number of gossip members (a
//      full answer grows by about 77 bytes a sidecar; issue 21). An older
//      grantor ignores the field and answers the full list, which a
//      caller reads the same way.
//  16: SessionRenewed.refused: a session another identity owns is
//      answered refused (renewed=false, which an older sidecar takes for a
//      session that ended) and the other sessions of the request are
//      renewed; before, the whole call failed with PERMISSION_DENIED.
//  17: SessionRenewed.withheld: the listing of a session whose digest
//      differs is charged to the caller's queued_bytes until it is
//      written; when it would take the caller past that limit it is left
//      out and the session is answered withheld, with renewed=false, which
//      an older sidecar takes for a session that ended (its leases there
//      are lost: never believed longer than the grantors hold them).
//  18: MembersRequest.servers_only: the answer lists only the servers of
//      the answering grantor's raft configuration (what grantors ask each
//      other: retirement, self-removal, seed voters, bootstrap-expect).
//      Older grantors ignore it and answer the full list.

// Code generated by protoc-gen-go-grpc. DO NOT EDIT.
// versions:
// - protoc-gen-go-grpc v1.6.2
// - protoc             v3.21.12
// source: grantor.proto

package grantorpb

import (
	context "context"
	grpc "google.golang.org/grpc"
	codes "google.golang.org/grpc/codes"
	status "google.golang.org/grpc/status"
)

// This is a compile-time assertion to ensure that this generated file
// is compatible with the grpc package it is being compiled against.
// Requires gRPC-Go v1.64.0 or later.
const _ = grpc.SupportPackageIsVersion9

const (
	Grantor_Acquire_FullMethodName       = "/leaseside.grantor.v1.Grantor/Acquire"
	Grantor_AcquireShared_FullMethodName = "/leaseside.grantor.v1.Grantor/AcquireShared"
	Grantor_Release_FullMethodName       = "/leaseside.grantor.v1.Grantor/Release"
	Grantor_KeepAlive_FullMethodName     = "/leaseside.grantor.v1.Grantor/KeepAlive"
	Grantor_Members_FullMethodName       = "/leaseside.grantor.v1.Grantor/Members"
	Grantor_RemoveServer_FullMethodName  = "/leaseside.grantor.v1.Grantor/RemoveServer"
	Grantor_Leave_FullMethodName         = "/leaseside.grantor.v1.Grantor/Leave"
	Grantor_RegisterNode_FullMethodName  = "/leaseside.grantor.v1.Grantor/RegisterNode"
	Grantor_Proclaim_FullMethodName      = "/leaseside.grantor.v1.Grantor/Proclaim"
	Grantor_Watch_FullMethodName         = "/leaseside.grantor.v1.Grantor/Watch"
	Grantor_CheckToken_FullMethodName    = "/leaseside.grantor.v1.Grantor/CheckToken"
	Grantor_Leases_FullMethodName        = "/leaseside.grantor.v1.Grantor/Leases"
	Grantor_Revoke_FullMethodName        = "/leaseside.grantor.v1.Grantor/Revoke"
)

// GrantorClient is the client API for Grantor service.
//
// For semantics around ctx use and closing/ending streaming RPCs, please refer to https://pkg.go.dev/google.golang.org/grpc/?tab=doc#ClientConn.NewStream.
//
// Grantor is served by every grantor node; only the raft leader answers.
// Other nodes fail with gRPC code FAILED_PRECONDITION and a NotLeader detail
// that names the leader they know of.
type GrantorClient interface {
	// Acquire grants a lease to (session, owner), or, when it is held and
	// wait_ns > 0, queues the caller first come first served until the lease
	// frees or the wait runs out. Retrying with the same (session, seq)
	// returns the first outcome and never grants twice.
	Acquire(ctx context.Context, in *AcquireRequest, opts ...grpc.CallOption) (*AcquireResponse, error)
	// AcquireShared is Acquire for a shared grant of the lease (a reader of
	// a read/write lock, version 13): it is granted while the lease is
	// free or held by shared grants only and no Acquire waits ahead of it
	// (a waiting exclusive Acquire keeps new shared ones out, so writers do
	// not starve); an exclusive Acquire is granted only while no grant, shared
	// or exclusive, stands. Limit must be 0 or 1 (INVALID_ARGUMENT
	// otherwise); a name held as a semaphore, or a semaphore's Acquire of a
	// name held shared, fails with INVALID_ARGUMENT. Every other field and
	// rule is Acquire's.
	AcquireShared(ctx context.Context, in *AcquireRequest, opts ...grpc.CallOption) (*AcquireResponse, error)
	// Release frees a lease held by (session, owner) with the given token.
	Release(ctx context.Context, in *ReleaseRequest, opts ...grpc.CallOption) (*ReleaseResponse, error)
	// KeepAlive is the one stream a sidecar keeps open to the leader. Each
	// request renews the sessions it names, each as a whole (version 5),
	// or, from older sidecars, one session and the leases it lists.
	KeepAlive(ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[KeepAliveRequest, KeepAliveResponse], error)
	// Members lists the grantors (raft configuration and state) and every
	// member of the gossip cluster, as the answering grantor sees them. Any
	// grantor answers, leader or not.
	Members(ctx context.Context, in *MembersRequest, opts ...grpc.CallOption) (*MembersResponse, error)
	// RemoveServer removes a grantor from the raft configuration (for a
	// dead one that cannot leave by itself). Only the leader answers.
	RemoveServer(ctx context.Context, in *RemoveServerRequest, opts ...grpc.CallOption) (*RemoveServerResponse, error)
	// Leave makes the answering grantor leave the cluster and then stop
	// (`leaseside grantor leave`): it hands leadership over if it leads, has
	// the leader remove it from the raft configuration and leaves gossip.
	// It answers once it has left, then its process exits 0. An operator's
	// call: a stopped grantor (SIGTERM) stays in the configuration.
	Leave(ctx context.Context, in *LeaveRequest, opts ...grpc.CallOption) (*LeaveResponse, error)
	// RegisterNode is called by a grantor on the leader to record, in the
	// replicated state, its gRPC address and the newest log command type it
	// can apply. The leader proposes a command type only when every server
	// in the raft configuration has registered that it knows it. Grantors
	// only; only the leader answers.
	RegisterNode(ctx context.Context, in *RegisterNodeRequest, opts ...grpc.CallOption) (*RegisterNodeResponse, error)
	// Proclaim changes the value of a grant its holder (session, owner)
	// holds with the given token: an elected leader publishes a new value
	// without a new token. Retrying with the same (session, seq) returns
	// the first outcome. Only the leader answers.
	Proclaim(ctx context.Context, in *ProclaimRequest, opts ...grpc.CallOption) (*ProclaimResponse, error)
	// Watch is the one stream a sidecar keeps open to the leader for the
	// holders of the names its local subscribers watch. Each request adds
	// or removes names; for every name added the leader first sends its
	// holders now (kind SNAPSHOT), then every change it applies, in log
	// order. The stream ends with FAILED_PRECONDITION (NotLeader) when the
	// leader leaves office, and with RESOURCE_EXHAUSTED when the sidecar
	// reads too slowly: it then opens a new one, which starts again from
	// the holders at that moment. Only the leader answers.
	Watch(ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[WatchRequest, WatchEvent], error)
	// CheckToken says whether token is a live grant of lease: the lease is
	// held with it and its holder's session has not expired at the leader
	// (Chubby's CheckSequencer). The leader answers from its lease table
	// after a quorum round that started after the question arrived, one
	// round for every check that arrived meanwhile; no raft entry is
	// written. Only the leader answers.
	CheckToken(ctx context.Context, in *CheckTokenRequest, opts ...grpc.CallOption) (*CheckTokenResponse, error)
	// Leases lists the names that have grants or lock-delays, in name
	// order, a page at a time: each grant's token, holder identity and
	// remaining term at the leader, the name's waiters and its delays.
	// Operators; a sidecar (relaying for root on its host) sees only the
	// names its name rules let it read. Only the leader answers.
	Leases(ctx context.Context, in *LeasesRequest, opts ...grpc.CallOption) (*LeasesResponse, error)
	// Revoke ends the grants of a name (or only the one with the token
	// given) for an operator: one raft entry per grant. The holder's
	// sidecar learns it at its next keepalive and reports the lease lost
	// (reason revoked); since the holder may still act until its deadline,
	// the name stays delayed for the grant's term plus its lock-delay.
	// NOT_FOUND: nothing holds the name; FAILED_PRECONDITION without a
	// NotLeader detail: the name is not held with that token. Only the
	// leader answers.
	Revoke(ctx context.Context, in *RevokeRequest, opts ...grpc.CallOption) (*RevokeResponse, error)
}

type grantorClient struct {
	cc grpc.ClientConnInterface
}

func NewGrantorClient(cc grpc.ClientConnInterface) GrantorClient {
	return &grantorClient{cc}
}

func (c *grantorClient) Acquire(ctx context.Context, in *AcquireRequest, opts ...grpc.CallOption) (*AcquireResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(AcquireResponse)
	err := c.cc.Invoke(ctx, Grantor_Acquire_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *grantorClient) AcquireShared(ctx context.Context, in *AcquireRequest, opts ...grpc.CallOption) (*AcquireResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(AcquireResponse)
	err := c.cc.Invoke(ctx, Grantor_AcquireShared_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *grantorClient) Release(ctx context.Context, in *ReleaseRequest, opts ...grpc.CallOption) (*ReleaseResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(ReleaseResponse)
	err := c.cc.Invoke(ctx, Grantor_Release_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *grantorClient) KeepAlive(ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[KeepAliveRequest, KeepAliveResponse], error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	stream, err := c.cc.NewStream(ctx, &Grantor_ServiceDesc.Streams[0], Grantor_KeepAlive_FullMethodName, cOpts...)
	if err != nil {
		return nil, err
	}
	x := &grpc.GenericClientStream[KeepAliveRequest, KeepAliveResponse]{ClientStream: stream}
	return x, nil
}

// This type alias is provided for backwards compatibility with existing code that references the prior non-generic stream type by name.
type Grantor_KeepAliveClient = grpc.BidiStreamingClient[KeepAliveRequest, KeepAliveResponse]

func (c *grantorClient) Members(ctx context.Context, in *MembersRequest, opts ...grpc.CallOption) (*MembersResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(MembersResponse)
	err := c.cc.Invoke(ctx, Grantor_Members_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *grantorClient) RemoveServer(ctx context.Context, in *RemoveServerRequest, opts ...grpc.CallOption) (*RemoveServerResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(RemoveServerResponse)
	err := c.cc.Invoke(ctx, Grantor_RemoveServer_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *grantorClient) Leave(ctx context.Context, in *LeaveRequest, opts ...grpc.CallOption) (*LeaveResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(LeaveResponse)
	err := c.cc.Invoke(ctx, Grantor_Leave_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *grantorClient) RegisterNode(ctx context.Context, in *RegisterNodeRequest, opts ...grpc.CallOption) (*RegisterNodeResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(RegisterNodeResponse)
	err := c.cc.Invoke(ctx, Grantor_RegisterNode_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *grantorClient) Proclaim(ctx context.Context, in *ProclaimRequest, opts ...grpc.CallOption) (*ProclaimResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(ProclaimResponse)
	err := c.cc.Invoke(ctx, Grantor_Proclaim_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *grantorClient) Watch(ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[WatchRequest, WatchEvent], error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	stream, err := c.cc.NewStream(ctx, &Grantor_ServiceDesc.Streams[1], Grantor_Watch_FullMethodName, cOpts...)
	if err != nil {
		return nil, err
	}
	x := &grpc.GenericClientStream[WatchRequest, WatchEvent]{ClientStream: stream}
	return x, nil
}

// This type alias is provided for backwards compatibility with existing code that references the prior non-generic stream type by name.
type Grantor_WatchClient = grpc.BidiStreamingClient[WatchRequest, WatchEvent]

func (c *grantorClient) CheckToken(ctx context.Context, in *CheckTokenRequest, opts ...grpc.CallOption) (*CheckTokenResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(CheckTokenResponse)
	err := c.cc.Invoke(ctx, Grantor_CheckToken_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *grantorClient) Leases(ctx context.Context, in *LeasesRequest, opts ...grpc.CallOption) (*LeasesResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(LeasesResponse)
	err := c.cc.Invoke(ctx, Grantor_Leases_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *grantorClient) Revoke(ctx context.Context, in *RevokeRequest, opts ...grpc.CallOption) (*RevokeResponse, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(RevokeResponse)
	err := c.cc.Invoke(ctx, Grantor_Revoke_FullMethodName, in, out, cOpts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GrantorServer is the server API for Grantor service.
// All implementations must embed UnimplementedGrantorServer
// for forward compatibility.
//
// Grantor is served by every grantor node; only the raft leader answers.
// Other nodes fail with gRPC code FAILED_PRECONDITION and a NotLeader detail
// that names the leader they know of.
type GrantorServer interface {
	// Acquire grants a lease to (session, owner), or, when it is held and
	// wait_ns > 0, queues the caller first come first served until the lease
	// frees or the wait runs out. Retrying with the same (session, seq)
	// returns the first outcome and never grants twice.
	Acquire(context.Context, *AcquireRequest) (*AcquireResponse, error)
	// AcquireShared is Acquire for a shared grant of the lease (a reader of
	// a read/write lock, version 13): it is granted while the lease is
	// free or held by shared grants only and no Acquire waits ahead of it
	// (a waiting exclusive Acquire keeps new shared ones out, so writers do
	// not starve); an exclusive Acquire is granted only while no grant, shared
	// or exclusive, stands. Limit must be 0 or 1 (INVALID_ARGUMENT
	// otherwise); a name held as a semaphore, or a semaphore's Acquire of a
	// name held shared, fails with INVALID_ARGUMENT. Every other field and
	// rule is Acquire's.
	AcquireShared(context.Context, *AcquireRequest) (*AcquireResponse, error)
	// Release frees a lease held by (session, owner) with the given token.
	Release(context.Context, *ReleaseRequest) (*ReleaseResponse, error)
	// KeepAlive is the one stream a sidecar keeps open to the leader. Each
	// request renews the sessions it names, each as a whole (version 5),
	// or, from older sidecars, one session and the leases it lists.
	KeepAlive(grpc.BidiStreamingServer[KeepAliveRequest, KeepAliveResponse]) error
	// Members lists the grantors (raft configuration and state) and every
	// member of the gossip cluster, as the answering grantor sees them. Any
	// grantor answers, leader or not.
	Members(context.Context, *MembersRequest) (*MembersResponse, error)
	// RemoveServer removes a grantor from the raft configuration (for a
	// dead one that cannot leave by itself). Only the leader answers.
	RemoveServer(context.Context, *RemoveServerRequest) (*RemoveServerResponse, error)
	// Leave makes the answering grantor leave the cluster and then stop
	// (`leaseside grantor leave`): it hands leadership over if it leads, has
	// the leader remove it from the raft configuration and leaves gossip.
	// It answers once it has left, then its process exits 0. An operator's
	// call: a stopped grantor (SIGTERM) stays in the configuration.
	Leave(context.Context, *LeaveRequest) (*LeaveResponse, error)
	// RegisterNode is called by a grantor on the leader to record, in the
	// replicated state, its gRPC address and the newest log command type it
	// can apply. The leader proposes a command type only when every server
	// in the raft configuration has registered that it knows it. Grantors
	// only; only the leader answers.
	RegisterNode(context.Context, *RegisterNodeRequest) (*RegisterNodeResponse, error)
	// Proclaim changes the value of a grant its holder (session, owner)
	// holds with the given token: an elected leader publishes a new value
	// without a new token. Retrying with the same (session, seq) returns
	// the first outcome. Only the leader answers.
	Proclaim(context.Context, *ProclaimRequest) (*ProclaimResponse, error)
	// Watch is the one stream a sidecar keeps open to the leader for the
	// holders of the names its local subscribers watch. Each request adds
	// or removes names; for every name added the leader first sends its
	// holders now (kind SNAPSHOT), then every change it applies, in log
	// order. The stream ends with FAILED_PRECONDITION (NotLeader) when the
	// leader leaves office, and with RESOURCE_EXHAUSTED when the sidecar
	// reads too slowly: it then opens a new one, which starts again from
	// the holders at that moment. Only the leader answers.
	Watch(grpc.BidiStreamingServer[WatchRequest, WatchEvent]) error
	// CheckToken says whether token is a live grant of lease: the lease is
	// held with it and its holder's session has not expired at the leader
	// (Chubby's CheckSequencer). The leader answers from its lease table
	// after a quorum round that started after the question arrived, one
	// round for every check that arrived meanwhile; no raft entry is
	// written. Only the leader answers.
	CheckToken(context.Context, *CheckTokenRequest) (*CheckTokenResponse, error)
	// Leases lists the names that have grants or lock-delays, in name
	// order, a page at a time: each grant's token, holder identity and
	// remaining term at the leader, the name's waiters and its delays.
	// Operators; a sidecar (relaying for root on its host) sees only the
	// names its name rules let it read. Only the leader answers.
	Leases(context.Context, *LeasesRequest) (*LeasesResponse, error)
	// Revoke ends the grants of a name (or only the one with the token
	// given) for an operator: one raft entry per grant. The holder's
	// sidecar learns it at its next keepalive and reports the lease lost
	// (reason revoked); since the holder may still act until its deadline,
	// the name stays delayed for the grant's term plus its lock-delay.
	// NOT_FOUND: nothing holds the name; FAILED_PRECONDITION without a
	// NotLeader detail: the name is not held with that token. Only the
	// leader answers.
	Revoke(context.Context, *RevokeRequest) (*RevokeResponse, error)
	mustEmbedUnimplementedGrantorServer()
}

// UnimplementedGrantorServer must be embedded to have
// forward compatible implementations.
//
// NOTE: this should be embedded by value instead of pointer to avoid a nil
// pointer dereference when methods are called.
type UnimplementedGrantorServer struct{}

func (UnimplementedGrantorServer) Acquire(context.Context, *AcquireRequest) (*AcquireResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Acquire not implemented")
}
func (UnimplementedGrantorServer) AcquireShared(context.Context, *AcquireRequest) (*AcquireResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method AcquireShared not implemented")
}
func (UnimplementedGrantorServer) Release(context.Context, *ReleaseRequest) (*ReleaseResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Release not implemented")
}
func (UnimplementedGrantorServer) KeepAlive(grpc.BidiStreamingServer[KeepAliveRequest, KeepAliveResponse]) error {
	return status.Error(codes.Unimplemented, "method KeepAlive not implemented")
}
func (UnimplementedGrantorServer) Members(context.Context, *MembersRequest) (*MembersResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Members not implemented")
}
func (UnimplementedGrantorServer) RemoveServer(context.Context, *RemoveServerRequest) (*RemoveServerResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method RemoveServer not implemented")
}
func (UnimplementedGrantorServer) Leave(context.Context, *LeaveRequest) (*LeaveResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Leave not implemented")
}
func (UnimplementedGrantorServer) RegisterNode(context.Context, *RegisterNodeRequest) (*RegisterNodeResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method RegisterNode not implemented")
}
func (UnimplementedGrantorServer) Proclaim(context.Context, *ProclaimRequest) (*ProclaimResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Proclaim not implemented")
}
func (UnimplementedGrantorServer) Watch(grpc.BidiStreamingServer[WatchRequest, WatchEvent]) error {
	return status.Error(codes.Unimplemented, "method Watch not implemented")
}
func (UnimplementedGrantorServer) CheckToken(context.Context, *CheckTokenRequest) (*CheckTokenResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method CheckToken not implemented")
}
func (UnimplementedGrantorServer) Leases(context.Context, *LeasesRequest) (*LeasesResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Leases not implemented")
}
func (UnimplementedGrantorServer) Revoke(context.Context, *RevokeRequest) (*RevokeResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method Revoke not implemented")
}
func (UnimplementedGrantorServer) mustEmbedUnimplementedGrantorServer() {}
func (UnimplementedGrantorServer) testEmbeddedByValue()                 {}

// UnsafeGrantorServer may be embedded to opt out of forward compatibility for this service.
// Use of this interface is not recommended, as added methods to GrantorServer will
// result in compilation errors.
type UnsafeGrantorServer interface {
	mustEmbedUnimplementedGrantorServer()
}

func RegisterGrantorServer(s grpc.ServiceRegistrar, srv GrantorServer) {
	// If the following call panics, it indicates UnimplementedGrantorServer was
	// embedded by pointer and is nil.  This will cause panics if an
	// unimplemented method is ever invoked, so we test this at initialization
	// time to prevent it from happening at runtime later due to I/O.
	if t, ok := srv.(interface{ testEmbeddedByValue() }); ok {
		t.testEmbeddedByValue()
	}
	s.RegisterService(&Grantor_ServiceDesc, srv)
}

func _Grantor_Acquire_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(AcquireRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(GrantorServer).Acquire(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: Grantor_Acquire_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(GrantorServer).Acquire(ctx, req.(*AcquireRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _Grantor_AcquireShared_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(AcquireRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(GrantorServer).AcquireShared(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: Grantor_AcquireShared_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(GrantorServer).AcquireShared(ctx, req.(*AcquireRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _Grantor_Release_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(ReleaseRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(GrantorServer).Release(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: Grantor_Release_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(GrantorServer).Release(ctx, req.(*ReleaseRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _Grantor_KeepAlive_Handler(srv interface{}, stream grpc.ServerStream) error {
	return srv.(GrantorServer).KeepAlive(&grpc.GenericServerStream[KeepAliveRequest, KeepAliveResponse]{ServerStream: stream})
}

// This type alias is provided for backwards compatibility with existing code that references the prior non-generic stream type by name.
type Grantor_KeepAliveServer = grpc.BidiStreamingServer[KeepAliveRequest, KeepAliveResponse]

func _Grantor_Members_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(MembersRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(GrantorServer).Members(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: Grantor_Members_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(GrantorServer).Members(ctx, req.(*MembersRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _Grantor_RemoveServer_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(RemoveServerRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(GrantorServer).RemoveServer(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: Grantor_RemoveServer_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(GrantorServer).RemoveServer(ctx, req.(*RemoveServerRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _Grantor_Leave_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(LeaveRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(GrantorServer).Leave(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: Grantor_Leave_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(GrantorServer).Leave(ctx, req.(*LeaveRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _Grantor_RegisterNode_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(RegisterNodeRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(GrantorServer).RegisterNode(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: Grantor_RegisterNode_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(GrantorServer).RegisterNode(ctx, req.(*RegisterNodeRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _Grantor_Proclaim_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(ProclaimRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(GrantorServer).Proclaim(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: Grantor_Proclaim_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(GrantorServer).Proclaim(ctx, req.(*ProclaimRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _Grantor_Watch_Handler(srv interface{}, stream grpc.ServerStream) error {
	return srv.(GrantorServer).Watch(&grpc.GenericServerStream[WatchRequest, WatchEvent]{ServerStream: stream})
}

// This type alias is provided for backwards compatibility with existing code that references the prior non-generic stream type by name.
type Grantor_WatchServer = grpc.BidiStreamingServer[WatchRequest, WatchEvent]

func _Grantor_CheckToken_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(CheckTokenRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(GrantorServer).CheckToken(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: Grantor_CheckToken_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(GrantorServer).CheckToken(ctx, req.(*CheckTokenRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _Grantor_Leases_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(LeasesRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(GrantorServer).Leases(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: Grantor_Leases_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(GrantorServer).Leases(ctx, req.(*LeasesRequest))
	}
	return interceptor(ctx, in, info, handler)
}

func _Grantor_Revoke_Handler(srv interface{}, ctx context.Context, dec func(interface{}) error, interceptor grpc.UnaryServerInterceptor) (interface{}, error) {
	in := new(RevokeRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(GrantorServer).Revoke(ctx, in)
	}
	info := &grpc.UnaryServerInfo{
		Server:     srv,
		FullMethod: Grantor_Revoke_FullMethodName,
	}
	handler := func(ctx context.Context, req interface{}) (interface{}, error) {
		return srv.(GrantorServer).Revoke(ctx, req.(*RevokeRequest))
	}
	return interceptor(ctx, in, info, handler)
}

// Grantor_ServiceDesc is the grpc.ServiceDesc for Grantor service.
// It's only intended for direct use with grpc.RegisterService,
// and not to be introspected or modified (even as a copy)
var Grantor_ServiceDesc = grpc.ServiceDesc{
	ServiceName: "leaseside.grantor.v1.Grantor",
	HandlerType: (*GrantorServer)(nil),
	Methods: []grpc.MethodDesc{
		{
			MethodName: "Acquire",
			Handler:    _Grantor_Acquire_Handler,
		},
		{
			MethodName: "AcquireShared",
			Handler:    _Grantor_AcquireShared_Handler,
		},
		{
			MethodName: "Release",
			Handler:    _Grantor_Release_Handler,
		},
		{
			MethodName: "Members",
			Handler:    _Grantor_Members_Handler,
		},
		{
			MethodName: "RemoveServer",
			Handler:    _Grantor_RemoveServer_Handler,
		},
		{
			MethodName: "Leave",
			Handler:    _Grantor_Leave_Handler,
		},
		{
			MethodName: "RegisterNode",
			Handler:    _Grantor_RegisterNode_Handler,
		},
		{
			MethodName: "Proclaim",
			Handler:    _Grantor_Proclaim_Handler,
		},
		{
			MethodName: "CheckToken",
			Handler:    _Grantor_CheckToken_Handler,
		},
		{
			MethodName: "Leases",
			Handler:    _Grantor_Leases_Handler,
		},
		{
			MethodName: "Revoke",
			Handler:    _Grantor_Revoke_Handler,
		},
	},
	Streams: []grpc.StreamDesc{
		{
			StreamName:    "KeepAlive",
			Handler:       _Grantor_KeepAlive_Handler,
			ServerStreams: true,
			ClientStreams: true,
		},
		{
			StreamName:    "Watch",
			Handler:       _Grantor_Watch_Handler,
			ServerStreams: true,
			ClientStreams: true,
		},
	},
	Metadata: "grantor.proto",
}
