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

// Code generated by protoc-gen-go. DO NOT EDIT.
// versions:
// 	protoc-gen-go v1.36.12
// 	protoc        v3.21.12
// source: grantor.proto

package grantorpb

import (
	protoreflect "google.golang.org/protobuf/reflect/protoreflect"
	protoimpl "google.golang.org/protobuf/runtime/protoimpl"
	reflect "reflect"
	sync "sync"
	unsafe "unsafe"
)

const (
	// Verify that this generated code is sufficiently up-to-date.
	_ = protoimpl.EnforceVersion(20 - protoimpl.MinVersion)
	// Verify that runtime/protoimpl is sufficiently up-to-date.
	_ = protoimpl.EnforceVersion(protoimpl.MaxVersion - 20)
)

type WatchEvent_Kind int32

const (
	WatchEvent_KIND_UNSPECIFIED WatchEvent_Kind = 0
	// SNAPSHOT: the holders when the name was added to the stream.
	WatchEvent_SNAPSHOT WatchEvent_Kind = 1
	// ACQUIRED: token was granted (replaced, when not 0, is the grant of
	// the same holder that this one ended).
	WatchEvent_ACQUIRED WatchEvent_Kind = 2
	// RELEASED: the grant token was released by its holder.
	WatchEvent_RELEASED WatchEvent_Kind = 3
	// EXPIRED: the grant token ended because its holder's session expired.
	WatchEvent_EXPIRED WatchEvent_Kind = 4
	// PROCLAIMED: the grant token has a new value.
	WatchEvent_PROCLAIMED WatchEvent_Kind = 5
	// DENIED: the grantors' name rules do not let the caller watch the
	// name: it is not watched (sent instead of its SNAPSHOT).
	WatchEvent_DENIED WatchEvent_Kind = 6
)

// Enum value maps for WatchEvent_Kind.
var (
	WatchEvent_Kind_name = map[int32]string{
		0: "KIND_UNSPECIFIED",
		1: "SNAPSHOT",
		2: "ACQUIRED",
		3: "RELEASED",
		4: "EXPIRED",
		5: "PROCLAIMED",
		6: "DENIED",
	}
	WatchEvent_Kind_value = map[string]int32{
		"KIND_UNSPECIFIED": 0,
		"SNAPSHOT":         1,
		"ACQUIRED":         2,
		"RELEASED":         3,
		"EXPIRED":          4,
		"PROCLAIMED":       5,
		"DENIED":           6,
	}
)

func (x WatchEvent_Kind) Enum() *WatchEvent_Kind {
	p := new(WatchEvent_Kind)
	*p = x
	return p
}

func (x WatchEvent_Kind) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (WatchEvent_Kind) Descriptor() protoreflect.EnumDescriptor {
	return file_grantor_proto_enumTypes[0].Descriptor()
}

func (WatchEvent_Kind) Type() protoreflect.EnumType {
	return &file_grantor_proto_enumTypes[0]
}

func (x WatchEvent_Kind) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use WatchEvent_Kind.Descriptor instead.
func (WatchEvent_Kind) EnumDescriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{25, 0}
}

// RequestID makes a mutating request idempotent.
type RequestID struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Session identifies the sidecar (one per daemon start); random, 1..64 bytes.
	Session string `protobuf:"bytes,1,opt,name=session,proto3" json:"session,omitempty"`
	// Seq numbers the session's requests from 1 upwards.
	Seq uint64 `protobuf:"varint,2,opt,name=seq,proto3" json:"seq,omitempty"`
	// FirstUnacked is the lowest seq for which the session has not yet
	// received a reply; the grantor may forget the outcomes of lower seqs.
	FirstUnacked uint64 `protobuf:"varint,3,opt,name=first_unacked,json=firstUnacked,proto3" json:"first_unacked,omitempty"`
	// AlsoReceived lists seqs above first_unacked whose replies the session
	// has received since its previous request (a long waiting acquire keeps
	// first_unacked low); the grantor may forget their outcomes too.
	AlsoReceived  []uint64 `protobuf:"varint,4,rep,packed,name=also_received,json=alsoReceived,proto3" json:"also_received,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *RequestID) Reset() {
	*x = RequestID{}
	mi := &file_grantor_proto_msgTypes[0]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *RequestID) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*RequestID) ProtoMessage() {}

func (x *RequestID) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[0]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use RequestID.ProtoReflect.Descriptor instead.
func (*RequestID) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{0}
}

func (x *RequestID) GetSession() string {
	if x != nil {
		return x.Session
	}
	return ""
}

func (x *RequestID) GetSeq() uint64 {
	if x != nil {
		return x.Seq
	}
	return 0
}

func (x *RequestID) GetFirstUnacked() uint64 {
	if x != nil {
		return x.FirstUnacked
	}
	return 0
}

func (x *RequestID) GetAlsoReceived() []uint64 {
	if x != nil {
		return x.AlsoReceived
	}
	return nil
}

type AcquireRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	Id    *RequestID             `protobuf:"bytes,1,opt,name=id,proto3" json:"id,omitempty"`
	// Lease is the lease name.
	Lease string `protobuf:"bytes,2,opt,name=lease,proto3" json:"lease,omitempty"`
	// Owner identifies the local owner inside the session (opaque to the grantor).
	Owner string `protobuf:"bytes,3,opt,name=owner,proto3" json:"owner,omitempty"`
	// TtlNs is the term d the holder asks for. The grantor stores it with
	// the grant and states it in the reply (AcquireResponse.ttl_ns).
	TtlNs int64 `protobuf:"varint,4,opt,name=ttl_ns,json=ttlNs,proto3" json:"ttl_ns,omitempty"`
	// WaitNs is how long to queue for the lease when it is held; 0 fails at once.
	WaitNs int64 `protobuf:"varint,5,opt,name=wait_ns,json=waitNs,proto3" json:"wait_ns,omitempty"`
	// Limit, above 1, makes the lease a semaphore: up to limit holders at
	// once, each with its own token, waiters served first come first
	// served. 0 and 1 mean exclusive. A limit other than the one in force
	// (the one its holders were granted with) fails with INVALID_ARGUMENT.
	// At most 256.
	Limit uint32 `protobuf:"varint,6,opt,name=limit,proto3" json:"limit,omitempty"`
	// Value is stored with the grant and shown to watchers (an election
	// candidate's address, say): at most 1024 bytes of UTF-8 without
	// control characters.
	Value string `protobuf:"bytes,7,opt,name=value,proto3" json:"value,omitempty"`
	// LockDelayNs is how long the name (a semaphore: this grant's slot)
	// stays delayed after this grant ends without its holder releasing it
	// (it expires, is revoked, or is released with owner_ended): nobody is
	// granted it before the leader ends the delay, which it counts on its
	// own clock as it counts a term, from the entry that ended the grant (a
	// new leader: from its taking office). 0: none. At most the grantor's
	// maximum (INVALID_ARGUMENT above it).
	LockDelayNs   int64 `protobuf:"varint,8,opt,name=lock_delay_ns,json=lockDelayNs,proto3" json:"lock_delay_ns,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *AcquireRequest) Reset() {
	*x = AcquireRequest{}
	mi := &file_grantor_proto_msgTypes[1]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *AcquireRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*AcquireRequest) ProtoMessage() {}

func (x *AcquireRequest) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[1]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use AcquireRequest.ProtoReflect.Descriptor instead.
func (*AcquireRequest) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{1}
}

func (x *AcquireRequest) GetId() *RequestID {
	if x != nil {
		return x.Id
	}
	return nil
}

func (x *AcquireRequest) GetLease() string {
	if x != nil {
		return x.Lease
	}
	return ""
}

func (x *AcquireRequest) GetOwner() string {
	if x != nil {
		return x.Owner
	}
	return ""
}

func (x *AcquireRequest) GetTtlNs() int64 {
	if x != nil {
		return x.TtlNs
	}
	return 0
}

func (x *AcquireRequest) GetWaitNs() int64 {
	if x != nil {
		return x.WaitNs
	}
	return 0
}

func (x *AcquireRequest) GetLimit() uint32 {
	if x != nil {
		return x.Limit
	}
	return 0
}

func (x *AcquireRequest) GetValue() string {
	if x != nil {
		return x.Value
	}
	return ""
}

func (x *AcquireRequest) GetLockDelayNs() int64 {
	if x != nil {
		return x.LockDelayNs
	}
	return 0
}

type AcquireResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Granted is true when the caller now holds the lease.
	Granted bool `protobuf:"varint,1,opt,name=granted,proto3" json:"granted,omitempty"`
	// Token is the fencing token of the grant, or, when not granted, the
	// token of the current holder.
	Token uint64 `protobuf:"varint,2,opt,name=token,proto3" json:"token,omitempty"`
	// GrantorTimeNs is the leader's CLOCK_BOOTTIME when it answered.
	GrantorTimeNs int64 `protobuf:"varint,5,opt,name=grantor_time_ns,json=grantorTimeNs,proto3" json:"grantor_time_ns,omitempty"`
	// TtlNs is the term the grantor stored with the grant: the holder
	// computes its deadline with this term, not the one it asked for.
	// 0 from grantors older than version 3.
	TtlNs int64 `protobuf:"varint,6,opt,name=ttl_ns,json=ttlNs,proto3" json:"ttl_ns,omitempty"`
	// Rho and EpsilonNs are the grantor's timing model (drift bound and
	// safety margin). The holder computes with the larger of its own and
	// these. 0 from grantors older than version 3.
	Rho       float64 `protobuf:"fixed64,7,opt,name=rho,proto3" json:"rho,omitempty"`
	EpsilonNs int64   `protobuf:"varint,8,opt,name=epsilon_ns,json=epsilonNs,proto3" json:"epsilon_ns,omitempty"`
	// HolderName, when not granted, is the identity name of the sidecar that
	// holds the lease (its certificate's name; "insecure" without TLS; ""
	// for a session opened before grantors recorded owners).
	HolderName string `protobuf:"bytes,9,opt,name=holder_name,json=holderName,proto3" json:"holder_name,omitempty"`
	// Limit is the limit in force for the name (1: exclusive); Holders how
	// many grants of it stand after this answer.
	Limit   uint32 `protobuf:"varint,10,opt,name=limit,proto3" json:"limit,omitempty"`
	Holders uint32 `protobuf:"varint,11,opt,name=holders,proto3" json:"holders,omitempty"`
	// Ended, with granted false, answers a retry (same session and seq) of
	// an Acquire that was granted token Token while its first reply was
	// lost, and whose grant has ended since: the Acquire took effect, this
	// is not a refusal, and the caller holds nothing. Never set by
	// grantors older than version 7, which answered such a retry as a
	// refusal naming the current holder.
	Ended bool `protobuf:"varint,12,opt,name=ended,proto3" json:"ended,omitempty"`
	// Delayed, with granted false, says that nobody holds the name but it
	// is in the lock-delay of its grant Token, which ended without a
	// release (version 8).
	Delayed bool `protobuf:"varint,13,opt,name=delayed,proto3" json:"delayed,omitempty"`
	// Shared says the name is held shared (version 13): granted, this grant
	// is shared; not granted, the holders (or the lock-delays) are shared
	// grants'. Limit is then 0: shared grants have none.
	Shared        bool `protobuf:"varint,14,opt,name=shared,proto3" json:"shared,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *AcquireResponse) Reset() {
	*x = AcquireResponse{}
	mi := &file_grantor_proto_msgTypes[2]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *AcquireResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*AcquireResponse) ProtoMessage() {}

func (x *AcquireResponse) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[2]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use AcquireResponse.ProtoReflect.Descriptor instead.
func (*AcquireResponse) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{2}
}

func (x *AcquireResponse) GetGranted() bool {
	if x != nil {
		return x.Granted
	}
	return false
}

func (x *AcquireResponse) GetToken() uint64 {
	if x != nil {
		return x.Token
	}
	return 0
}

func (x *AcquireResponse) GetGrantorTimeNs() int64 {
	if x != nil {
		return x.GrantorTimeNs
	}
	return 0
}

func (x *AcquireResponse) GetTtlNs() int64 {
	if x != nil {
		return x.TtlNs
	}
	return 0
}

func (x *AcquireResponse) GetRho() float64 {
	if x != nil {
		return x.Rho
	}
	return 0
}

func (x *AcquireResponse) GetEpsilonNs() int64 {
	if x != nil {
		return x.EpsilonNs
	}
	return 0
}

func (x *AcquireResponse) GetHolderName() string {
	if x != nil {
		return x.HolderName
	}
	return ""
}

func (x *AcquireResponse) GetLimit() uint32 {
	if x != nil {
		return x.Limit
	}
	return 0
}

func (x *AcquireResponse) GetHolders() uint32 {
	if x != nil {
		return x.Holders
	}
	return 0
}

func (x *AcquireResponse) GetEnded() bool {
	if x != nil {
		return x.Ended
	}
	return false
}

func (x *AcquireResponse) GetDelayed() bool {
	if x != nil {
		return x.Delayed
	}
	return false
}

func (x *AcquireResponse) GetShared() bool {
	if x != nil {
		return x.Shared
	}
	return false
}

type ReleaseRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	Id    *RequestID             `protobuf:"bytes,1,opt,name=id,proto3" json:"id,omitempty"`
	Lease string                 `protobuf:"bytes,2,opt,name=lease,proto3" json:"lease,omitempty"`
	Owner string                 `protobuf:"bytes,3,opt,name=owner,proto3" json:"owner,omitempty"`
	Token uint64                 `protobuf:"varint,4,opt,name=token,proto3" json:"token,omitempty"`
	// OwnerEnded says the grant's owner ended, or its sidecar gave it up
	// as lost, without releasing it: the owner may still have writes in
	// flight, so the name stays delayed for the grant's lock_delay_ns
	// (version 8). False: an explicit release, which frees the name at
	// once.
	OwnerEnded bool `protobuf:"varint,5,opt,name=owner_ended,json=ownerEnded,proto3" json:"owner_ended,omitempty"`
	// Lapsed, with owner_ended, says the grant was not released at all:
	// its holder's deadline passed (a no_renew lease that lapsed, or one
	// lost for failed renewals), and the sidecar ends it at the grantor
	// sooner than its session would. Watchers are told EXPIRED, not
	// RELEASED (version 12). It changes nothing else.
	Lapsed        bool `protobuf:"varint,6,opt,name=lapsed,proto3" json:"lapsed,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ReleaseRequest) Reset() {
	*x = ReleaseRequest{}
	mi := &file_grantor_proto_msgTypes[3]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ReleaseRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ReleaseRequest) ProtoMessage() {}

func (x *ReleaseRequest) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[3]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ReleaseRequest.ProtoReflect.Descriptor instead.
func (*ReleaseRequest) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{3}
}

func (x *ReleaseRequest) GetId() *RequestID {
	if x != nil {
		return x.Id
	}
	return nil
}

func (x *ReleaseRequest) GetLease() string {
	if x != nil {
		return x.Lease
	}
	return ""
}

func (x *ReleaseRequest) GetOwner() string {
	if x != nil {
		return x.Owner
	}
	return ""
}

func (x *ReleaseRequest) GetToken() uint64 {
	if x != nil {
		return x.Token
	}
	return 0
}

func (x *ReleaseRequest) GetOwnerEnded() bool {
	if x != nil {
		return x.OwnerEnded
	}
	return false
}

func (x *ReleaseRequest) GetLapsed() bool {
	if x != nil {
		return x.Lapsed
	}
	return false
}

type ReleaseResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Released is false when the caller did not hold the lease with that
	// token (already expired, revoked or released).
	Released      bool `protobuf:"varint,1,opt,name=released,proto3" json:"released,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ReleaseResponse) Reset() {
	*x = ReleaseResponse{}
	mi := &file_grantor_proto_msgTypes[4]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ReleaseResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ReleaseResponse) ProtoMessage() {}

func (x *ReleaseResponse) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[4]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ReleaseResponse.ProtoReflect.Descriptor instead.
func (*ReleaseResponse) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{4}
}

func (x *ReleaseResponse) GetReleased() bool {
	if x != nil {
		return x.Released
	}
	return false
}

type LeaseRef struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	Lease string                 `protobuf:"bytes,1,opt,name=lease,proto3" json:"lease,omitempty"`
	Token uint64                 `protobuf:"varint,2,opt,name=token,proto3" json:"token,omitempty"`
	// TtlNs is, in a KeepAliveRequest, the term the holder computes with;
	// in a KeepAliveResponse's renewed list, the term the grantor applied
	// (the one stored with the grant), which the holder then uses. 0 means
	// not stated (older peers).
	TtlNs int64 `protobuf:"varint,3,opt,name=ttl_ns,json=ttlNs,proto3" json:"ttl_ns,omitempty"`
	// Owner is the grant's owner within its session, in a SessionRenewed's
	// list (so that the sidecar can release a grant it did not know of).
	Owner         string `protobuf:"bytes,4,opt,name=owner,proto3" json:"owner,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *LeaseRef) Reset() {
	*x = LeaseRef{}
	mi := &file_grantor_proto_msgTypes[5]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *LeaseRef) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*LeaseRef) ProtoMessage() {}

func (x *LeaseRef) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[5]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use LeaseRef.ProtoReflect.Descriptor instead.
func (*LeaseRef) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{5}
}

func (x *LeaseRef) GetLease() string {
	if x != nil {
		return x.Lease
	}
	return ""
}

func (x *LeaseRef) GetToken() uint64 {
	if x != nil {
		return x.Token
	}
	return 0
}

func (x *LeaseRef) GetTtlNs() int64 {
	if x != nil {
		return x.TtlNs
	}
	return 0
}

func (x *LeaseRef) GetOwner() string {
	if x != nil {
		return x.Owner
	}
	return ""
}

type KeepAliveRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Session, with leases, is an older sidecar's request: one session and
	// the leases to renew. A current sidecar names its first session here
	// too (an older grantor then answers harmlessly: no sessions renewed).
	Session string `protobuf:"bytes,1,opt,name=session,proto3" json:"session,omitempty"`
	// Batch numbers the keepalives of the stream; the reply echoes it.
	Batch uint64 `protobuf:"varint,2,opt,name=batch,proto3" json:"batch,omitempty"`
	// Leases to renew, each with the token the sidecar holds it under
	// (older sidecars).
	Leases []*LeaseRef `protobuf:"bytes,3,rep,name=leases,proto3" json:"leases,omitempty"`
	// Sessions to renew, each as a whole (version 5). At most 1024.
	Sessions      []*SessionRenewal `protobuf:"bytes,4,rep,name=sessions,proto3" json:"sessions,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *KeepAliveRequest) Reset() {
	*x = KeepAliveRequest{}
	mi := &file_grantor_proto_msgTypes[6]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *KeepAliveRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*KeepAliveRequest) ProtoMessage() {}

func (x *KeepAliveRequest) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[6]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use KeepAliveRequest.ProtoReflect.Descriptor instead.
func (*KeepAliveRequest) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{6}
}

func (x *KeepAliveRequest) GetSession() string {
	if x != nil {
		return x.Session
	}
	return ""
}

func (x *KeepAliveRequest) GetBatch() uint64 {
	if x != nil {
		return x.Batch
	}
	return 0
}

func (x *KeepAliveRequest) GetLeases() []*LeaseRef {
	if x != nil {
		return x.Leases
	}
	return nil
}

func (x *KeepAliveRequest) GetSessions() []*SessionRenewal {
	if x != nil {
		return x.Sessions
	}
	return nil
}

// SessionRenewal renews one session and all its leases.
type SessionRenewal struct {
	state   protoimpl.MessageState `protogen:"open.v1"`
	Session string                 `protobuf:"bytes,1,opt,name=session,proto3" json:"session,omitempty"`
	// TtlNs is the term the holder computes the session's leases with.
	TtlNs int64 `protobuf:"varint,2,opt,name=ttl_ns,json=ttlNs,proto3" json:"ttl_ns,omitempty"`
	// LeaseSetVersion is the holder's digest of the grants it knows in the
	// session: the sum, modulo 2^64, of splitmix64(token) over them (0 for
	// none; see grantor.LeaseSetDigest).
	LeaseSetVersion uint64 `protobuf:"fixed64,3,opt,name=lease_set_version,json=leaseSetVersion,proto3" json:"lease_set_version,omitempty"`
	// Untold are grants of the session (lease and token) that nobody was
	// told of: an acquire's answer that came after its owner or requester
	// was gone, one not confirmed in time, one that only a retry after the
	// call gave up learned; or grants their owner released while the
	// release did not get there. The leader ends each that the session
	// still holds, without lock-delay (version 11). At most 1024.
	Untold []*LeaseRef `protobuf:"bytes,4,rep,name=untold,proto3" json:"untold,omitempty"`
	// OwnerEnded are grants whose owner ended, or that the sidecar lost,
	// and whose release with owner_ended did not get there: the leader ends
	// each as that release would, leaving its lock-delay. At most 1024.
	OwnerEnded    []*LeaseRef `protobuf:"bytes,5,rep,name=owner_ended,json=ownerEnded,proto3" json:"owner_ended,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *SessionRenewal) Reset() {
	*x = SessionRenewal{}
	mi := &file_grantor_proto_msgTypes[7]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *SessionRenewal) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*SessionRenewal) ProtoMessage() {}

func (x *SessionRenewal) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[7]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use SessionRenewal.ProtoReflect.Descriptor instead.
func (*SessionRenewal) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{7}
}

func (x *SessionRenewal) GetSession() string {
	if x != nil {
		return x.Session
	}
	return ""
}

func (x *SessionRenewal) GetTtlNs() int64 {
	if x != nil {
		return x.TtlNs
	}
	return 0
}

func (x *SessionRenewal) GetLeaseSetVersion() uint64 {
	if x != nil {
		return x.LeaseSetVersion
	}
	return 0
}

func (x *SessionRenewal) GetUntold() []*LeaseRef {
	if x != nil {
		return x.Untold
	}
	return nil
}

func (x *SessionRenewal) GetOwnerEnded() []*LeaseRef {
	if x != nil {
		return x.OwnerEnded
	}
	return nil
}

// SessionRenewed answers a SessionRenewal.
type SessionRenewed struct {
	state   protoimpl.MessageState `protogen:"open.v1"`
	Session string                 `protobuf:"bytes,1,opt,name=session,proto3" json:"session,omitempty"`
	// Renewed: the session's leases now run until the leader's clock at the
	// reply plus ttl_ns (grantor side: d(1+rho)+eps). False when the session
	// expired at the grantor; its leases are over.
	Renewed bool `protobuf:"varint,2,opt,name=renewed,proto3" json:"renewed,omitempty"`
	// TtlNs is the term applied: the largest term of the session's grants.
	TtlNs int64 `protobuf:"varint,3,opt,name=ttl_ns,json=ttlNs,proto3" json:"ttl_ns,omitempty"`
	// LeaseSetVersion is the grantor's digest of the session's grants.
	LeaseSetVersion uint64 `protobuf:"fixed64,4,opt,name=lease_set_version,json=leaseSetVersion,proto3" json:"lease_set_version,omitempty"`
	// Listed is set when the digests differ: leases then lists every grant
	// the session holds (lease, token, ttl_ns, owner), possibly none.
	Listed bool        `protobuf:"varint,5,opt,name=listed,proto3" json:"listed,omitempty"`
	Leases []*LeaseRef `protobuf:"bytes,6,rep,name=leases,proto3" json:"leases,omitempty"`
	// Refused is set when the session belongs to another identity (version
	// 16): nothing of it was renewed, ended or listed, renewed is false, and
	// nothing else about it is said. The holder's leases in it are over.
	Refused bool `protobuf:"varint,7,opt,name=refused,proto3" json:"refused,omitempty"`
	// Withheld is set when the digests differ but listing the session's
	// grants would take the caller past its queued_bytes (version 17):
	// nothing is listed and renewed is false. The holder must not extend any
	// deadline of the session on this answer: it keeps the deadlines it had,
	// and asks again.
	Withheld      bool `protobuf:"varint,8,opt,name=withheld,proto3" json:"withheld,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *SessionRenewed) Reset() {
	*x = SessionRenewed{}
	mi := &file_grantor_proto_msgTypes[8]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *SessionRenewed) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*SessionRenewed) ProtoMessage() {}

func (x *SessionRenewed) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[8]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use SessionRenewed.ProtoReflect.Descriptor instead.
func (*SessionRenewed) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{8}
}

func (x *SessionRenewed) GetSession() string {
	if x != nil {
		return x.Session
	}
	return ""
}

func (x *SessionRenewed) GetRenewed() bool {
	if x != nil {
		return x.Renewed
	}
	return false
}

func (x *SessionRenewed) GetTtlNs() int64 {
	if x != nil {
		return x.TtlNs
	}
	return 0
}

func (x *SessionRenewed) GetLeaseSetVersion() uint64 {
	if x != nil {
		return x.LeaseSetVersion
	}
	return 0
}

func (x *SessionRenewed) GetListed() bool {
	if x != nil {
		return x.Listed
	}
	return false
}

func (x *SessionRenewed) GetLeases() []*LeaseRef {
	if x != nil {
		return x.Leases
	}
	return nil
}

func (x *SessionRenewed) GetRefused() bool {
	if x != nil {
		return x.Refused
	}
	return false
}

func (x *SessionRenewed) GetWithheld() bool {
	if x != nil {
		return x.Withheld
	}
	return false
}

type KeepAliveResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	Batch uint64                 `protobuf:"varint,1,opt,name=batch,proto3" json:"batch,omitempty"`
	// Renewed leases now run until the leader's clock at the reply plus
	// their term (grantor side: d(1+rho)+eps).
	Renewed []*LeaseRef `protobuf:"bytes,2,rep,name=renewed,proto3" json:"renewed,omitempty"`
	// Lost leases are no longer held by this session with that token.
	Lost []*LeaseRef `protobuf:"bytes,3,rep,name=lost,proto3" json:"lost,omitempty"`
	// GrantorTimeNs is the leader's CLOCK_BOOTTIME when it answered.
	GrantorTimeNs int64 `protobuf:"varint,4,opt,name=grantor_time_ns,json=grantorTimeNs,proto3" json:"grantor_time_ns,omitempty"`
	// Rho and EpsilonNs are the grantor's timing model, as in AcquireResponse.
	Rho       float64 `protobuf:"fixed64,5,opt,name=rho,proto3" json:"rho,omitempty"`
	EpsilonNs int64   `protobuf:"varint,6,opt,name=epsilon_ns,json=epsilonNs,proto3" json:"epsilon_ns,omitempty"`
	// Sessions answers the request's sessions, in order.
	Sessions      []*SessionRenewed `protobuf:"bytes,7,rep,name=sessions,proto3" json:"sessions,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *KeepAliveResponse) Reset() {
	*x = KeepAliveResponse{}
	mi := &file_grantor_proto_msgTypes[9]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *KeepAliveResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*KeepAliveResponse) ProtoMessage() {}

func (x *KeepAliveResponse) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[9]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use KeepAliveResponse.ProtoReflect.Descriptor instead.
func (*KeepAliveResponse) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{9}
}

func (x *KeepAliveResponse) GetBatch() uint64 {
	if x != nil {
		return x.Batch
	}
	return 0
}

func (x *KeepAliveResponse) GetRenewed() []*LeaseRef {
	if x != nil {
		return x.Renewed
	}
	return nil
}

func (x *KeepAliveResponse) GetLost() []*LeaseRef {
	if x != nil {
		return x.Lost
	}
	return nil
}

func (x *KeepAliveResponse) GetGrantorTimeNs() int64 {
	if x != nil {
		return x.GrantorTimeNs
	}
	return 0
}

func (x *KeepAliveResponse) GetRho() float64 {
	if x != nil {
		return x.Rho
	}
	return 0
}

func (x *KeepAliveResponse) GetEpsilonNs() int64 {
	if x != nil {
		return x.EpsilonNs
	}
	return 0
}

func (x *KeepAliveResponse) GetSessions() []*SessionRenewed {
	if x != nil {
		return x.Sessions
	}
	return nil
}

// NotLeader is attached to FAILED_PRECONDITION errors from non-leaders.
type NotLeader struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// LeaderRpcAddr is the leader's gRPC address, empty when unknown.
	LeaderRpcAddr string `protobuf:"bytes,1,opt,name=leader_rpc_addr,json=leaderRpcAddr,proto3" json:"leader_rpc_addr,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *NotLeader) Reset() {
	*x = NotLeader{}
	mi := &file_grantor_proto_msgTypes[10]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *NotLeader) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*NotLeader) ProtoMessage() {}

func (x *NotLeader) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[10]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use NotLeader.ProtoReflect.Descriptor instead.
func (*NotLeader) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{10}
}

func (x *NotLeader) GetLeaderRpcAddr() string {
	if x != nil {
		return x.LeaderRpcAddr
	}
	return ""
}

// NameNotAllowed is attached to PERMISSION_DENIED errors for a name the
// grantors' name rules do not let the caller use.
type NameNotAllowed struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Lease is the name refused.
	Lease string `protobuf:"bytes,1,opt,name=lease,proto3" json:"lease,omitempty"`
	// Identity is the caller, as the rules match it (a sidecar's name;
	// ROLE/NAME for the other roles).
	Identity string `protobuf:"bytes,2,opt,name=identity,proto3" json:"identity,omitempty"`
	// Access is what was refused: "acquire" (Acquire, Proclaim) or "read"
	// (Watch, CheckToken).
	Access        string `protobuf:"bytes,3,opt,name=access,proto3" json:"access,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *NameNotAllowed) Reset() {
	*x = NameNotAllowed{}
	mi := &file_grantor_proto_msgTypes[11]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *NameNotAllowed) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*NameNotAllowed) ProtoMessage() {}

func (x *NameNotAllowed) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[11]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use NameNotAllowed.ProtoReflect.Descriptor instead.
func (*NameNotAllowed) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{11}
}

func (x *NameNotAllowed) GetLease() string {
	if x != nil {
		return x.Lease
	}
	return ""
}

func (x *NameNotAllowed) GetIdentity() string {
	if x != nil {
		return x.Identity
	}
	return ""
}

func (x *NameNotAllowed) GetAccess() string {
	if x != nil {
		return x.Access
	}
	return ""
}

type MembersRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// LeaderOnly asks only who leads (version 15): the answer's members are
	// the leader's and the answering grantor's entries (at most two, the
	// same fields as in a full answer), with leader_id, answered_by and
	// caller_join as ever. An older grantor ignores it and lists everyone.
	LeaderOnly bool `protobuf:"varint,1,opt,name=leader_only,json=leaderOnly,proto3" json:"leader_only,omitempty"`
	// ServersOnly asks for the servers of the answering grantor's raft
	// configuration alone (version 18): their entries, as in a full answer,
	// and no other gossip member (no sidecar). leader_only, when also set,
	// wins. An older grantor ignores it and lists everyone.
	ServersOnly   bool `protobuf:"varint,2,opt,name=servers_only,json=serversOnly,proto3" json:"servers_only,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *MembersRequest) Reset() {
	*x = MembersRequest{}
	mi := &file_grantor_proto_msgTypes[12]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *MembersRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*MembersRequest) ProtoMessage() {}

func (x *MembersRequest) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[12]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use MembersRequest.ProtoReflect.Descriptor instead.
func (*MembersRequest) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{12}
}

func (x *MembersRequest) GetLeaderOnly() bool {
	if x != nil {
		return x.LeaderOnly
	}
	return false
}

func (x *MembersRequest) GetServersOnly() bool {
	if x != nil {
		return x.ServersOnly
	}
	return false
}

// Member is one grantor or sidecar.
type Member struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Name is the gossip member name ("" for a raft server not in gossip).
	Name string `protobuf:"bytes,1,opt,name=name,proto3" json:"name,omitempty"`
	// Role is "grantor" or "sidecar".
	Role string `protobuf:"bytes,2,opt,name=role,proto3" json:"role,omitempty"`
	// NodeId is the raft server ID (grantors).
	NodeId     string `protobuf:"bytes,3,opt,name=node_id,json=nodeId,proto3" json:"node_id,omitempty"`
	RpcAddr    string `protobuf:"bytes,4,opt,name=rpc_addr,json=rpcAddr,proto3" json:"rpc_addr,omitempty"`
	RaftAddr   string `protobuf:"bytes,5,opt,name=raft_addr,json=raftAddr,proto3" json:"raft_addr,omitempty"`
	GossipAddr string `protobuf:"bytes,6,opt,name=gossip_addr,json=gossipAddr,proto3" json:"gossip_addr,omitempty"`
	// GossipState is alive, leaving, left or dead; "" when not in gossip.
	GossipState string `protobuf:"bytes,7,opt,name=gossip_state,json=gossipState,proto3" json:"gossip_state,omitempty"`
	// Voter is true for a voter in the raft configuration.
	Voter bool `protobuf:"varint,8,opt,name=voter,proto3" json:"voter,omitempty"`
	// RaftState is leader or follower for servers in the configuration
	// ("" when unknown).
	RaftState string `protobuf:"bytes,9,opt,name=raft_state,json=raftState,proto3" json:"raft_state,omitempty"`
	// LastContactMs is how long ago the leader last heard from this server,
	// in milliseconds; -1 when unknown (not answered by the leader, or the
	// leader itself).
	LastContactMs int64 `protobuf:"varint,10,opt,name=last_contact_ms,json=lastContactMs,proto3" json:"last_contact_ms,omitempty"`
	// Version is the member's leaseside version, from gossip.
	Version       string `protobuf:"bytes,11,opt,name=version,proto3" json:"version,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *Member) Reset() {
	*x = Member{}
	mi := &file_grantor_proto_msgTypes[13]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Member) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Member) ProtoMessage() {}

func (x *Member) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[13]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Member.ProtoReflect.Descriptor instead.
func (*Member) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{13}
}

func (x *Member) GetName() string {
	if x != nil {
		return x.Name
	}
	return ""
}

func (x *Member) GetRole() string {
	if x != nil {
		return x.Role
	}
	return ""
}

func (x *Member) GetNodeId() string {
	if x != nil {
		return x.NodeId
	}
	return ""
}

func (x *Member) GetRpcAddr() string {
	if x != nil {
		return x.RpcAddr
	}
	return ""
}

func (x *Member) GetRaftAddr() string {
	if x != nil {
		return x.RaftAddr
	}
	return ""
}

func (x *Member) GetGossipAddr() string {
	if x != nil {
		return x.GossipAddr
	}
	return ""
}

func (x *Member) GetGossipState() string {
	if x != nil {
		return x.GossipState
	}
	return ""
}

func (x *Member) GetVoter() bool {
	if x != nil {
		return x.Voter
	}
	return false
}

func (x *Member) GetRaftState() string {
	if x != nil {
		return x.RaftState
	}
	return ""
}

func (x *Member) GetLastContactMs() int64 {
	if x != nil {
		return x.LastContactMs
	}
	return 0
}

func (x *Member) GetVersion() string {
	if x != nil {
		return x.Version
	}
	return ""
}

type MembersResponse struct {
	state   protoimpl.MessageState `protogen:"open.v1"`
	Members []*Member              `protobuf:"bytes,1,rep,name=members,proto3" json:"members,omitempty"`
	// LeaderId is the raft leader's server ID as the answering grantor knows it.
	LeaderId string `protobuf:"bytes,2,opt,name=leader_id,json=leaderId,proto3" json:"leader_id,omitempty"`
	// AnsweredBy is the answering grantor's server ID.
	AnsweredBy string `protobuf:"bytes,3,opt,name=answered_by,json=answeredBy,proto3" json:"answered_by,omitempty"`
	// CallerJoin says, to a caller holding a grantor certificate, whether a
	// join rule of the answering grantor's name rules admits the grantor of
	// the certificate's name (version 14): "admitted" (also when no rules
	// are in force) or "not admitted"; "" to any other caller, and from
	// older grantors.
	CallerJoin    string `protobuf:"bytes,4,opt,name=caller_join,json=callerJoin,proto3" json:"caller_join,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *MembersResponse) Reset() {
	*x = MembersResponse{}
	mi := &file_grantor_proto_msgTypes[14]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *MembersResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*MembersResponse) ProtoMessage() {}

func (x *MembersResponse) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[14]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use MembersResponse.ProtoReflect.Descriptor instead.
func (*MembersResponse) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{14}
}

func (x *MembersResponse) GetMembers() []*Member {
	if x != nil {
		return x.Members
	}
	return nil
}

func (x *MembersResponse) GetLeaderId() string {
	if x != nil {
		return x.LeaderId
	}
	return ""
}

func (x *MembersResponse) GetAnsweredBy() string {
	if x != nil {
		return x.AnsweredBy
	}
	return ""
}

func (x *MembersResponse) GetCallerJoin() string {
	if x != nil {
		return x.CallerJoin
	}
	return ""
}

type RemoveServerRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// NodeId is the raft server ID to remove.
	NodeId        string `protobuf:"bytes,1,opt,name=node_id,json=nodeId,proto3" json:"node_id,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *RemoveServerRequest) Reset() {
	*x = RemoveServerRequest{}
	mi := &file_grantor_proto_msgTypes[15]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *RemoveServerRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*RemoveServerRequest) ProtoMessage() {}

func (x *RemoveServerRequest) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[15]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use RemoveServerRequest.ProtoReflect.Descriptor instead.
func (*RemoveServerRequest) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{15}
}

func (x *RemoveServerRequest) GetNodeId() string {
	if x != nil {
		return x.NodeId
	}
	return ""
}

type RemoveServerResponse struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *RemoveServerResponse) Reset() {
	*x = RemoveServerResponse{}
	mi := &file_grantor_proto_msgTypes[16]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *RemoveServerResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*RemoveServerResponse) ProtoMessage() {}

func (x *RemoveServerResponse) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[16]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use RemoveServerResponse.ProtoReflect.Descriptor instead.
func (*RemoveServerResponse) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{16}
}

type LeaveRequest struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *LeaveRequest) Reset() {
	*x = LeaveRequest{}
	mi := &file_grantor_proto_msgTypes[17]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *LeaveRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*LeaveRequest) ProtoMessage() {}

func (x *LeaveRequest) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[17]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use LeaveRequest.ProtoReflect.Descriptor instead.
func (*LeaveRequest) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{17}
}

type LeaveResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// NodeId is the raft server ID of the grantor that left.
	NodeId string `protobuf:"bytes,1,opt,name=node_id,json=nodeId,proto3" json:"node_id,omitempty"`
	// Outcome says what became of its place in the raft configuration:
	// "removed", "not in the configuration", or "kept: the last voter" (the
	// only voter's raft state is the cluster's; it stops all the same).
	Outcome       string `protobuf:"bytes,2,opt,name=outcome,proto3" json:"outcome,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *LeaveResponse) Reset() {
	*x = LeaveResponse{}
	mi := &file_grantor_proto_msgTypes[18]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *LeaveResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*LeaveResponse) ProtoMessage() {}

func (x *LeaveResponse) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[18]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use LeaveResponse.ProtoReflect.Descriptor instead.
func (*LeaveResponse) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{18}
}

func (x *LeaveResponse) GetNodeId() string {
	if x != nil {
		return x.NodeId
	}
	return ""
}

func (x *LeaveResponse) GetOutcome() string {
	if x != nil {
		return x.Outcome
	}
	return ""
}

type RegisterNodeRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// NodeId is the caller's raft server ID; with TLS it must be the name in
	// the caller's grantor certificate.
	NodeId string `protobuf:"bytes,1,opt,name=node_id,json=nodeId,proto3" json:"node_id,omitempty"`
	// RpcAddr is the caller's advertised gRPC address.
	RpcAddr string `protobuf:"bytes,2,opt,name=rpc_addr,json=rpcAddr,proto3" json:"rpc_addr,omitempty"`
	// MaxCommand is the newest raft log command type the caller applies.
	MaxCommand    uint32 `protobuf:"varint,3,opt,name=max_command,json=maxCommand,proto3" json:"max_command,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *RegisterNodeRequest) Reset() {
	*x = RegisterNodeRequest{}
	mi := &file_grantor_proto_msgTypes[19]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *RegisterNodeRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*RegisterNodeRequest) ProtoMessage() {}

func (x *RegisterNodeRequest) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[19]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use RegisterNodeRequest.ProtoReflect.Descriptor instead.
func (*RegisterNodeRequest) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{19}
}

func (x *RegisterNodeRequest) GetNodeId() string {
	if x != nil {
		return x.NodeId
	}
	return ""
}

func (x *RegisterNodeRequest) GetRpcAddr() string {
	if x != nil {
		return x.RpcAddr
	}
	return ""
}

func (x *RegisterNodeRequest) GetMaxCommand() uint32 {
	if x != nil {
		return x.MaxCommand
	}
	return 0
}

type RegisterNodeResponse struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *RegisterNodeResponse) Reset() {
	*x = RegisterNodeResponse{}
	mi := &file_grantor_proto_msgTypes[20]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *RegisterNodeResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*RegisterNodeResponse) ProtoMessage() {}

func (x *RegisterNodeResponse) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[20]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use RegisterNodeResponse.ProtoReflect.Descriptor instead.
func (*RegisterNodeResponse) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{20}
}

type ProclaimRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	Id    *RequestID             `protobuf:"bytes,1,opt,name=id,proto3" json:"id,omitempty"`
	Lease string                 `protobuf:"bytes,2,opt,name=lease,proto3" json:"lease,omitempty"`
	Owner string                 `protobuf:"bytes,3,opt,name=owner,proto3" json:"owner,omitempty"`
	Token uint64                 `protobuf:"varint,4,opt,name=token,proto3" json:"token,omitempty"`
	// Value replaces the grant's value (same limits as AcquireRequest.value).
	Value         string `protobuf:"bytes,5,opt,name=value,proto3" json:"value,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ProclaimRequest) Reset() {
	*x = ProclaimRequest{}
	mi := &file_grantor_proto_msgTypes[21]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ProclaimRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ProclaimRequest) ProtoMessage() {}

func (x *ProclaimRequest) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[21]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ProclaimRequest.ProtoReflect.Descriptor instead.
func (*ProclaimRequest) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{21}
}

func (x *ProclaimRequest) GetId() *RequestID {
	if x != nil {
		return x.Id
	}
	return nil
}

func (x *ProclaimRequest) GetLease() string {
	if x != nil {
		return x.Lease
	}
	return ""
}

func (x *ProclaimRequest) GetOwner() string {
	if x != nil {
		return x.Owner
	}
	return ""
}

func (x *ProclaimRequest) GetToken() uint64 {
	if x != nil {
		return x.Token
	}
	return 0
}

func (x *ProclaimRequest) GetValue() string {
	if x != nil {
		return x.Value
	}
	return ""
}

type ProclaimResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Proclaimed is false when the caller does not hold the lease with that
	// token (it ended): nothing changed.
	Proclaimed    bool `protobuf:"varint,1,opt,name=proclaimed,proto3" json:"proclaimed,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ProclaimResponse) Reset() {
	*x = ProclaimResponse{}
	mi := &file_grantor_proto_msgTypes[22]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ProclaimResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ProclaimResponse) ProtoMessage() {}

func (x *ProclaimResponse) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[22]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ProclaimResponse.ProtoReflect.Descriptor instead.
func (*ProclaimResponse) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{22}
}

func (x *ProclaimResponse) GetProclaimed() bool {
	if x != nil {
		return x.Proclaimed
	}
	return false
}

type WatchRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Add lists names to watch from now on; Remove names to stop watching.
	// A stream watches at most 4096 names.
	Add           []string `protobuf:"bytes,1,rep,name=add,proto3" json:"add,omitempty"`
	Remove        []string `protobuf:"bytes,2,rep,name=remove,proto3" json:"remove,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *WatchRequest) Reset() {
	*x = WatchRequest{}
	mi := &file_grantor_proto_msgTypes[23]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *WatchRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*WatchRequest) ProtoMessage() {}

func (x *WatchRequest) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[23]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use WatchRequest.ProtoReflect.Descriptor instead.
func (*WatchRequest) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{23}
}

func (x *WatchRequest) GetAdd() []string {
	if x != nil {
		return x.Add
	}
	return nil
}

func (x *WatchRequest) GetRemove() []string {
	if x != nil {
		return x.Remove
	}
	return nil
}

// Holder is one grant of a watched name.
type Holder struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	Token uint64                 `protobuf:"varint,1,opt,name=token,proto3" json:"token,omitempty"`
	// HolderName is the identity name of the holder's sidecar.
	HolderName    string `protobuf:"bytes,2,opt,name=holder_name,json=holderName,proto3" json:"holder_name,omitempty"`
	Value         string `protobuf:"bytes,3,opt,name=value,proto3" json:"value,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *Holder) Reset() {
	*x = Holder{}
	mi := &file_grantor_proto_msgTypes[24]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *Holder) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Holder) ProtoMessage() {}

func (x *Holder) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[24]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Holder.ProtoReflect.Descriptor instead.
func (*Holder) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{24}
}

func (x *Holder) GetToken() uint64 {
	if x != nil {
		return x.Token
	}
	return 0
}

func (x *Holder) GetHolderName() string {
	if x != nil {
		return x.HolderName
	}
	return ""
}

func (x *Holder) GetValue() string {
	if x != nil {
		return x.Value
	}
	return ""
}

type WatchEvent struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	Lease string                 `protobuf:"bytes,1,opt,name=lease,proto3" json:"lease,omitempty"`
	Kind  WatchEvent_Kind        `protobuf:"varint,2,opt,name=kind,proto3,enum=leaseside.grantor.v1.WatchEvent_Kind" json:"kind,omitempty"`
	// Token, HolderName and Value describe the grant the change is about
	// (not set for SNAPSHOT).
	Token      uint64 `protobuf:"varint,3,opt,name=token,proto3" json:"token,omitempty"`
	HolderName string `protobuf:"bytes,4,opt,name=holder_name,json=holderName,proto3" json:"holder_name,omitempty"`
	Value      string `protobuf:"bytes,5,opt,name=value,proto3" json:"value,omitempty"`
	Replaced   uint64 `protobuf:"varint,6,opt,name=replaced,proto3" json:"replaced,omitempty"`
	// Holders are the name's grants after the change, oldest first.
	Holders []*Holder `protobuf:"bytes,7,rep,name=holders,proto3" json:"holders,omitempty"`
	// Limit is the limit in force (1: exclusive; 0 while nobody holds it).
	Limit uint32 `protobuf:"varint,8,opt,name=limit,proto3" json:"limit,omitempty"`
	// Index is the raft log index of the change (of the state, for
	// SNAPSHOT); it only grows along a stream.
	Index uint64 `protobuf:"varint,9,opt,name=index,proto3" json:"index,omitempty"`
	// Shared says the holders are shared grants (version 13; limit 0).
	Shared        bool `protobuf:"varint,10,opt,name=shared,proto3" json:"shared,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *WatchEvent) Reset() {
	*x = WatchEvent{}
	mi := &file_grantor_proto_msgTypes[25]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *WatchEvent) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*WatchEvent) ProtoMessage() {}

func (x *WatchEvent) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[25]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use WatchEvent.ProtoReflect.Descriptor instead.
func (*WatchEvent) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{25}
}

func (x *WatchEvent) GetLease() string {
	if x != nil {
		return x.Lease
	}
	return ""
}

func (x *WatchEvent) GetKind() WatchEvent_Kind {
	if x != nil {
		return x.Kind
	}
	return WatchEvent_KIND_UNSPECIFIED
}

func (x *WatchEvent) GetToken() uint64 {
	if x != nil {
		return x.Token
	}
	return 0
}

func (x *WatchEvent) GetHolderName() string {
	if x != nil {
		return x.HolderName
	}
	return ""
}

func (x *WatchEvent) GetValue() string {
	if x != nil {
		return x.Value
	}
	return ""
}

func (x *WatchEvent) GetReplaced() uint64 {
	if x != nil {
		return x.Replaced
	}
	return 0
}

func (x *WatchEvent) GetHolders() []*Holder {
	if x != nil {
		return x.Holders
	}
	return nil
}

func (x *WatchEvent) GetLimit() uint32 {
	if x != nil {
		return x.Limit
	}
	return 0
}

func (x *WatchEvent) GetIndex() uint64 {
	if x != nil {
		return x.Index
	}
	return 0
}

func (x *WatchEvent) GetShared() bool {
	if x != nil {
		return x.Shared
	}
	return false
}

type CheckTokenRequest struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	Lease         string                 `protobuf:"bytes,1,opt,name=lease,proto3" json:"lease,omitempty"`
	Token         uint64                 `protobuf:"varint,2,opt,name=token,proto3" json:"token,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *CheckTokenRequest) Reset() {
	*x = CheckTokenRequest{}
	mi := &file_grantor_proto_msgTypes[26]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *CheckTokenRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*CheckTokenRequest) ProtoMessage() {}

func (x *CheckTokenRequest) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[26]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use CheckTokenRequest.ProtoReflect.Descriptor instead.
func (*CheckTokenRequest) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{26}
}

func (x *CheckTokenRequest) GetLease() string {
	if x != nil {
		return x.Lease
	}
	return ""
}

func (x *CheckTokenRequest) GetToken() uint64 {
	if x != nil {
		return x.Token
	}
	return 0
}

type CheckTokenResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Live is true when token is a grant of lease that stands now.
	Live bool `protobuf:"varint,1,opt,name=live,proto3" json:"live,omitempty"`
	// Tokens are the lease's grants now (none when it is free), oldest
	// first: a caller told "not live" learns what superseded its token.
	Tokens        []uint64 `protobuf:"varint,2,rep,packed,name=tokens,proto3" json:"tokens,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *CheckTokenResponse) Reset() {
	*x = CheckTokenResponse{}
	mi := &file_grantor_proto_msgTypes[27]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *CheckTokenResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*CheckTokenResponse) ProtoMessage() {}

func (x *CheckTokenResponse) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[27]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use CheckTokenResponse.ProtoReflect.Descriptor instead.
func (*CheckTokenResponse) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{27}
}

func (x *CheckTokenResponse) GetLive() bool {
	if x != nil {
		return x.Live
	}
	return false
}

func (x *CheckTokenResponse) GetTokens() []uint64 {
	if x != nil {
		return x.Tokens
	}
	return nil
}

type LeasesRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Prefix limits the list to names that start with it ("" is every name).
	Prefix string `protobuf:"bytes,1,opt,name=prefix,proto3" json:"prefix,omitempty"`
	// After continues a listing: only names after it (the previous page's
	// last name).
	After string `protobuf:"bytes,2,opt,name=after,proto3" json:"after,omitempty"`
	// Limit is the most names in one page: 0 is 1000, at most 10000.
	Limit         uint32 `protobuf:"varint,3,opt,name=limit,proto3" json:"limit,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *LeasesRequest) Reset() {
	*x = LeasesRequest{}
	mi := &file_grantor_proto_msgTypes[28]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *LeasesRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*LeasesRequest) ProtoMessage() {}

func (x *LeasesRequest) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[28]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use LeasesRequest.ProtoReflect.Descriptor instead.
func (*LeasesRequest) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{28}
}

func (x *LeasesRequest) GetPrefix() string {
	if x != nil {
		return x.Prefix
	}
	return ""
}

func (x *LeasesRequest) GetAfter() string {
	if x != nil {
		return x.After
	}
	return ""
}

func (x *LeasesRequest) GetLimit() uint32 {
	if x != nil {
		return x.Limit
	}
	return 0
}

// LeaseHolder is one grant in a Leases listing.
type LeaseHolder struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	Token uint64                 `protobuf:"varint,1,opt,name=token,proto3" json:"token,omitempty"`
	// HolderName is the identity name of the holder's sidecar.
	HolderName string `protobuf:"bytes,2,opt,name=holder_name,json=holderName,proto3" json:"holder_name,omitempty"`
	// RemainingNs is how long the grant runs at the leader unless its
	// holder renews it: until the leader may end it (its holder's deadline
	// comes earlier). 0 once the leader decided to end it.
	RemainingNs int64 `protobuf:"varint,3,opt,name=remaining_ns,json=remainingNs,proto3" json:"remaining_ns,omitempty"`
	// TtlNs is the term stored with the grant.
	TtlNs int64 `protobuf:"varint,4,opt,name=ttl_ns,json=ttlNs,proto3" json:"ttl_ns,omitempty"`
	// LockDelayNs is the lock-delay stored with the grant.
	LockDelayNs   int64 `protobuf:"varint,5,opt,name=lock_delay_ns,json=lockDelayNs,proto3" json:"lock_delay_ns,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *LeaseHolder) Reset() {
	*x = LeaseHolder{}
	mi := &file_grantor_proto_msgTypes[29]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *LeaseHolder) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*LeaseHolder) ProtoMessage() {}

func (x *LeaseHolder) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[29]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use LeaseHolder.ProtoReflect.Descriptor instead.
func (*LeaseHolder) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{29}
}

func (x *LeaseHolder) GetToken() uint64 {
	if x != nil {
		return x.Token
	}
	return 0
}

func (x *LeaseHolder) GetHolderName() string {
	if x != nil {
		return x.HolderName
	}
	return ""
}

func (x *LeaseHolder) GetRemainingNs() int64 {
	if x != nil {
		return x.RemainingNs
	}
	return 0
}

func (x *LeaseHolder) GetTtlNs() int64 {
	if x != nil {
		return x.TtlNs
	}
	return 0
}

func (x *LeaseHolder) GetLockDelayNs() int64 {
	if x != nil {
		return x.LockDelayNs
	}
	return 0
}

// LeaseDelay is a lock-delay in force in a Leases listing.
type LeaseDelay struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Token is the grant whose end started it.
	Token uint64 `protobuf:"varint,1,opt,name=token,proto3" json:"token,omitempty"`
	// HolderName is that grant's holder identity.
	HolderName string `protobuf:"bytes,2,opt,name=holder_name,json=holderName,proto3" json:"holder_name,omitempty"`
	// RemainingNs is how long the leader keeps the name delayed still.
	RemainingNs   int64 `protobuf:"varint,3,opt,name=remaining_ns,json=remainingNs,proto3" json:"remaining_ns,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *LeaseDelay) Reset() {
	*x = LeaseDelay{}
	mi := &file_grantor_proto_msgTypes[30]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *LeaseDelay) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*LeaseDelay) ProtoMessage() {}

func (x *LeaseDelay) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[30]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use LeaseDelay.ProtoReflect.Descriptor instead.
func (*LeaseDelay) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{30}
}

func (x *LeaseDelay) GetToken() uint64 {
	if x != nil {
		return x.Token
	}
	return 0
}

func (x *LeaseDelay) GetHolderName() string {
	if x != nil {
		return x.HolderName
	}
	return ""
}

func (x *LeaseDelay) GetRemainingNs() int64 {
	if x != nil {
		return x.RemainingNs
	}
	return 0
}

type LeaseInfo struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	Lease string                 `protobuf:"bytes,1,opt,name=lease,proto3" json:"lease,omitempty"`
	// Holders are its grants, oldest first.
	Holders []*LeaseHolder `protobuf:"bytes,2,rep,name=holders,proto3" json:"holders,omitempty"`
	// Limit is the limit in force (1: exclusive; 0 while nobody holds it).
	Limit uint32 `protobuf:"varint,3,opt,name=limit,proto3" json:"limit,omitempty"`
	// Waiters is how many Acquires wait for it at the leader.
	Waiters uint32        `protobuf:"varint,4,opt,name=waiters,proto3" json:"waiters,omitempty"`
	Delays  []*LeaseDelay `protobuf:"bytes,5,rep,name=delays,proto3" json:"delays,omitempty"`
	// Shared says the holders are shared grants (version 13; limit 0).
	Shared        bool `protobuf:"varint,6,opt,name=shared,proto3" json:"shared,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *LeaseInfo) Reset() {
	*x = LeaseInfo{}
	mi := &file_grantor_proto_msgTypes[31]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *LeaseInfo) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*LeaseInfo) ProtoMessage() {}

func (x *LeaseInfo) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[31]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use LeaseInfo.ProtoReflect.Descriptor instead.
func (*LeaseInfo) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{31}
}

func (x *LeaseInfo) GetLease() string {
	if x != nil {
		return x.Lease
	}
	return ""
}

func (x *LeaseInfo) GetHolders() []*LeaseHolder {
	if x != nil {
		return x.Holders
	}
	return nil
}

func (x *LeaseInfo) GetLimit() uint32 {
	if x != nil {
		return x.Limit
	}
	return 0
}

func (x *LeaseInfo) GetWaiters() uint32 {
	if x != nil {
		return x.Waiters
	}
	return 0
}

func (x *LeaseInfo) GetDelays() []*LeaseDelay {
	if x != nil {
		return x.Delays
	}
	return nil
}

func (x *LeaseInfo) GetShared() bool {
	if x != nil {
		return x.Shared
	}
	return false
}

type LeasesResponse struct {
	state  protoimpl.MessageState `protogen:"open.v1"`
	Leases []*LeaseInfo           `protobuf:"bytes,1,rep,name=leases,proto3" json:"leases,omitempty"`
	// More says names after the last one listed match too: ask again with
	// after set to it.
	More bool `protobuf:"varint,2,opt,name=more,proto3" json:"more,omitempty"`
	// AnsweredBy is the raft server ID of the leader that answered.
	AnsweredBy    string `protobuf:"bytes,3,opt,name=answered_by,json=answeredBy,proto3" json:"answered_by,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *LeasesResponse) Reset() {
	*x = LeasesResponse{}
	mi := &file_grantor_proto_msgTypes[32]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *LeasesResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*LeasesResponse) ProtoMessage() {}

func (x *LeasesResponse) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[32]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use LeasesResponse.ProtoReflect.Descriptor instead.
func (*LeasesResponse) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{32}
}

func (x *LeasesResponse) GetLeases() []*LeaseInfo {
	if x != nil {
		return x.Leases
	}
	return nil
}

func (x *LeasesResponse) GetMore() bool {
	if x != nil {
		return x.More
	}
	return false
}

func (x *LeasesResponse) GetAnsweredBy() string {
	if x != nil {
		return x.AnsweredBy
	}
	return ""
}

type RevokeRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	Lease string                 `protobuf:"bytes,1,opt,name=lease,proto3" json:"lease,omitempty"`
	// Token, when not 0, names the one grant to end; else every grant of
	// the name ends.
	Token         uint64 `protobuf:"varint,2,opt,name=token,proto3" json:"token,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *RevokeRequest) Reset() {
	*x = RevokeRequest{}
	mi := &file_grantor_proto_msgTypes[33]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *RevokeRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*RevokeRequest) ProtoMessage() {}

func (x *RevokeRequest) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[33]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use RevokeRequest.ProtoReflect.Descriptor instead.
func (*RevokeRequest) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{33}
}

func (x *RevokeRequest) GetLease() string {
	if x != nil {
		return x.Lease
	}
	return ""
}

func (x *RevokeRequest) GetToken() uint64 {
	if x != nil {
		return x.Token
	}
	return 0
}

type RevokeResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Revoked are the tokens of the grants this call ended.
	Revoked []uint64 `protobuf:"varint,1,rep,packed,name=revoked,proto3" json:"revoked,omitempty"`
	// DelayNs is how long the name stays delayed from the revoke (the
	// longest of the grants' terms plus lock-delays), as counted on the
	// leader's clock before drift and margin.
	DelayNs       int64 `protobuf:"varint,2,opt,name=delay_ns,json=delayNs,proto3" json:"delay_ns,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *RevokeResponse) Reset() {
	*x = RevokeResponse{}
	mi := &file_grantor_proto_msgTypes[34]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *RevokeResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*RevokeResponse) ProtoMessage() {}

func (x *RevokeResponse) ProtoReflect() protoreflect.Message {
	mi := &file_grantor_proto_msgTypes[34]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use RevokeResponse.ProtoReflect.Descriptor instead.
func (*RevokeResponse) Descriptor() ([]byte, []int) {
	return file_grantor_proto_rawDescGZIP(), []int{34}
}

func (x *RevokeResponse) GetRevoked() []uint64 {
	if x != nil {
		return x.Revoked
	}
	return nil
}

func (x *RevokeResponse) GetDelayNs() int64 {
	if x != nil {
		return x.DelayNs
	}
	return 0
}

var File_grantor_proto protoreflect.FileDescriptor

const file_grantor_proto_rawDesc = "" +
	"\n" +
	"\rgrantor.proto\x12\x14leaseside.grantor.v1\"\x81\x01\n" +
	"\tRequestID\x12\x18\n" +
	"\asession\x18\x01 \x01(\tR\asession\x12\x10\n" +
	"\x03seq\x18\x02 \x01(\x04R\x03seq\x12#\n" +
	"\rfirst_unacked\x18\x03 \x01(\x04R\ffirstUnacked\x12#\n" +
	"\ralso_received\x18\x04 \x03(\x04R\falsoReceived\"\xed\x01\n" +
	"\x0eAcquireRequest\x12/\n" +
	"\x02id\x18\x01 \x01(\v2\x1f.leaseside.grantor.v1.RequestIDR\x02id\x12\x14\n" +
	"\x05lease\x18\x02 \x01(\tR\x05lease\x12\x14\n" +
	"\x05owner\x18\x03 \x01(\tR\x05owner\x12\x15\n" +
	"\x06ttl_ns\x18\x04 \x01(\x03R\x05ttlNs\x12\x17\n" +
	"\await_ns\x18\x05 \x01(\x03R\x06waitNs\x12\x14\n" +
	"\x05limit\x18\x06 \x01(\rR\x05limit\x12\x14\n" +
	"\x05value\x18\a \x01(\tR\x05value\x12\"\n" +
	"\rlock_delay_ns\x18\b \x01(\x03R\vlockDelayNs\"\xf4\x02\n" +
	"\x0fAcquireResponse\x12\x18\n" +
	"\agranted\x18\x01 \x01(\bR\agranted\x12\x14\n" +
	"\x05token\x18\x02 \x01(\x04R\x05token\x12&\n" +
	"\x0fgrantor_time_ns\x18\x05 \x01(\x03R\rgrantorTimeNs\x12\x15\n" +
	"\x06ttl_ns\x18\x06 \x01(\x03R\x05ttlNs\x12\x10\n" +
	"\x03rho\x18\a \x01(\x01R\x03rho\x12\x1d\n" +
	"\n" +
	"epsilon_ns\x18\b \x01(\x03R\tepsilonNs\x12\x1f\n" +
	"\vholder_name\x18\t \x01(\tR\n" +
	"holderName\x12\x14\n" +
	"\x05limit\x18\n" +
	" \x01(\rR\x05limit\x12\x18\n" +
	"\aholders\x18\v \x01(\rR\aholders\x12\x14\n" +
	"\x05ended\x18\f \x01(\bR\x05ended\x12\x18\n" +
	"\adelayed\x18\r \x01(\bR\adelayed\x12\x16\n" +
	"\x06shared\x18\x0e \x01(\bR\x06sharedJ\x04\b\x03\x10\x04J\x04\b\x04\x10\x05R\x0eholder_sessionR\fholder_owner\"\xbc\x01\n" +
	"\x0eReleaseRequest\x12/\n" +
	"\x02id\x18\x01 \x01(\v2\x1f.leaseside.grantor.v1.RequestIDR\x02id\x12\x14\n" +
	"\x05lease\x18\x02 \x01(\tR\x05lease\x12\x14\n" +
	"\x05owner\x18\x03 \x01(\tR\x05owner\x12\x14\n" +
	"\x05token\x18\x04 \x01(\x04R\x05token\x12\x1f\n" +
	"\vowner_ended\x18\x05 \x01(\bR\n" +
	"ownerEnded\x12\x16\n" +
	"\x06lapsed\x18\x06 \x01(\bR\x06lapsed\"-\n" +
	"\x0fReleaseResponse\x12\x1a\n" +
	"\breleased\x18\x01 \x01(\bR\breleased\"c\n" +
	"\bLeaseRef\x12\x14\n" +
	"\x05lease\x18\x01 \x01(\tR\x05lease\x12\x14\n" +
	"\x05token\x18\x02 \x01(\x04R\x05token\x12\x15\n" +
	"\x06ttl_ns\x18\x03 \x01(\x03R\x05ttlNs\x12\x14\n" +
	"\x05owner\x18\x04 \x01(\tR\x05owner\"\xbc\x01\n" +
	"\x10KeepAliveRequest\x12\x18\n" +
	"\asession\x18\x01 \x01(\tR\asession\x12\x14\n" +
	"\x05batch\x18\x02 \x01(\x04R\x05batch\x126\n" +
	"\x06leases\x18\x03 \x03(\v2\x1e.leaseside.grantor.v1.LeaseRefR\x06leases\x12@\n" +
	"\bsessions\x18\x04 \x03(\v2$.leaseside.grantor.v1.SessionRenewalR\bsessions\"\xe6\x01\n" +
	"\x0eSessionRenewal\x12\x18\n" +
	"\asession\x18\x01 \x01(\tR\asession\x12\x15\n" +
	"\x06ttl_ns\x18\x02 \x01(\x03R\x05ttlNs\x12*\n" +
	"\x11lease_set_version\x18\x03 \x01(\x06R\x0fleaseSetVersion\x126\n" +
	"\x06untold\x18\x04 \x03(\v2\x1e.leaseside.grantor.v1.LeaseRefR\x06untold\x12?\n" +
	"\vowner_ended\x18\x05 \x03(\v2\x1e.leaseside.grantor.v1.LeaseRefR\n" +
	"ownerEnded\"\x8d\x02\n" +
	"\x0eSessionRenewed\x12\x18\n" +
	"\asession\x18\x01 \x01(\tR\asession\x12\x18\n" +
	"\arenewed\x18\x02 \x01(\bR\arenewed\x12\x15\n" +
	"\x06ttl_ns\x18\x03 \x01(\x03R\x05ttlNs\x12*\n" +
	"\x11lease_set_version\x18\x04 \x01(\x06R\x0fleaseSetVersion\x12\x16\n" +
	"\x06listed\x18\x05 \x01(\bR\x06listed\x126\n" +
	"\x06leases\x18\x06 \x03(\v2\x1e.leaseside.grantor.v1.LeaseRefR\x06leases\x12\x18\n" +
	"\arefused\x18\a \x01(\bR\arefused\x12\x1a\n" +
	"\bwithheld\x18\b \x01(\bR\bwithheld\"\xb2\x02\n" +
	"\x11KeepAliveResponse\x12\x14\n" +
	"\x05batch\x18\x01 \x01(\x04R\x05batch\x128\n" +
	"\arenewed\x18\x02 \x03(\v2\x1e.leaseside.grantor.v1.LeaseRefR\arenewed\x122\n" +
	"\x04lost\x18\x03 \x03(\v2\x1e.leaseside.grantor.v1.LeaseRefR\x04lost\x12&\n" +
	"\x0fgrantor_time_ns\x18\x04 \x01(\x03R\rgrantorTimeNs\x12\x10\n" +
	"\x03rho\x18\x05 \x01(\x01R\x03rho\x12\x1d\n" +
	"\n" +
	"epsilon_ns\x18\x06 \x01(\x03R\tepsilonNs\x12@\n" +
	"\bsessions\x18\a \x03(\v2$.leaseside.grantor.v1.SessionRenewedR\bsessions\"3\n" +
	"\tNotLeader\x12&\n" +
	"\x0fleader_rpc_addr\x18\x01 \x01(\tR\rleaderRpcAddr\"Z\n" +
	"\x0eNameNotAllowed\x12\x14\n" +
	"\x05lease\x18\x01 \x01(\tR\x05lease\x12\x1a\n" +
	"\bidentity\x18\x02 \x01(\tR\bidentity\x12\x16\n" +
	"\x06access\x18\x03 \x01(\tR\x06access\"T\n" +
	"\x0eMembersRequest\x12\x1f\n" +
	"\vleader_only\x18\x01 \x01(\bR\n" +
	"leaderOnly\x12!\n" +
	"\fservers_only\x18\x02 \x01(\bR\vserversOnly\"\xbc\x02\n" +
	"\x06Member\x12\x12\n" +
	"\x04name\x18\x01 \x01(\tR\x04name\x12\x12\n" +
	"\x04role\x18\x02 \x01(\tR\x04role\x12\x17\n" +
	"\anode_id\x18\x03 \x01(\tR\x06nodeId\x12\x19\n" +
	"\brpc_addr\x18\x04 \x01(\tR\arpcAddr\x12\x1b\n" +
	"\traft_addr\x18\x05 \x01(\tR\braftAddr\x12\x1f\n" +
	"\vgossip_addr\x18\x06 \x01(\tR\n" +
	"gossipAddr\x12!\n" +
	"\fgossip_state\x18\a \x01(\tR\vgossipState\x12\x14\n" +
	"\x05voter\x18\b \x01(\bR\x05voter\x12\x1d\n" +
	"\n" +
	"raft_state\x18\t \x01(\tR\traftState\x12&\n" +
	"\x0flast_contact_ms\x18\n" +
	" \x01(\x03R\rlastContactMs\x12\x18\n" +
	"\aversion\x18\v \x01(\tR\aversion\"\xa8\x01\n" +
	"\x0fMembersResponse\x126\n" +
	"\amembers\x18\x01 \x03(\v2\x1c.leaseside.grantor.v1.MemberR\amembers\x12\x1b\n" +
	"\tleader_id\x18\x02 \x01(\tR\bleaderId\x12\x1f\n" +
	"\vanswered_by\x18\x03 \x01(\tR\n" +
	"answeredBy\x12\x1f\n" +
	"\vcaller_join\x18\x04 \x01(\tR\n" +
	"callerJoin\".\n" +
	"\x13RemoveServerRequest\x12\x17\n" +
	"\anode_id\x18\x01 \x01(\tR\x06nodeId\"\x16\n" +
	"\x14RemoveServerResponse\"\x0e\n" +
	"\fLeaveRequest\"B\n" +
	"\rLeaveResponse\x12\x17\n" +
	"\anode_id\x18\x01 \x01(\tR\x06nodeId\x12\x18\n" +
	"\aoutcome\x18\x02 \x01(\tR\aoutcome\"j\n" +
	"\x13RegisterNodeRequest\x12\x17\n" +
	"\anode_id\x18\x01 \x01(\tR\x06nodeId\x12\x19\n" +
	"\brpc_addr\x18\x02 \x01(\tR\arpcAddr\x12\x1f\n" +
	"\vmax_command\x18\x03 \x01(\rR\n" +
	"maxCommand\"\x16\n" +
	"\x14RegisterNodeResponse\"\x9a\x01\n" +
	"\x0fProclaimRequest\x12/\n" +
	"\x02id\x18\x01 \x01(\v2\x1f.leaseside.grantor.v1.RequestIDR\x02id\x12\x14\n" +
	"\x05lease\x18\x02 \x01(\tR\x05lease\x12\x14\n" +
	"\x05owner\x18\x03 \x01(\tR\x05owner\x12\x14\n" +
	"\x05token\x18\x04 \x01(\x04R\x05token\x12\x14\n" +
	"\x05value\x18\x05 \x01(\tR\x05value\"2\n" +
	"\x10ProclaimResponse\x12\x1e\n" +
	"\n" +
	"proclaimed\x18\x01 \x01(\bR\n" +
	"proclaimed\"8\n" +
	"\fWatchRequest\x12\x10\n" +
	"\x03add\x18\x01 \x03(\tR\x03add\x12\x16\n" +
	"\x06remove\x18\x02 \x03(\tR\x06remove\"U\n" +
	"\x06Holder\x12\x14\n" +
	"\x05token\x18\x01 \x01(\x04R\x05token\x12\x1f\n" +
	"\vholder_name\x18\x02 \x01(\tR\n" +
	"holderName\x12\x14\n" +
	"\x05value\x18\x03 \x01(\tR\x05value\"\xb3\x03\n" +
	"\n" +
	"WatchEvent\x12\x14\n" +
	"\x05lease\x18\x01 \x01(\tR\x05lease\x129\n" +
	"\x04kind\x18\x02 \x01(\x0e2%.leaseside.grantor.v1.WatchEvent.KindR\x04kind\x12\x14\n" +
	"\x05token\x18\x03 \x01(\x04R\x05token\x12\x1f\n" +
	"\vholder_name\x18\x04 \x01(\tR\n" +
	"holderName\x12\x14\n" +
	"\x05value\x18\x05 \x01(\tR\x05value\x12\x1a\n" +
	"\breplaced\x18\x06 \x01(\x04R\breplaced\x126\n" +
	"\aholders\x18\a \x03(\v2\x1c.leaseside.grantor.v1.HolderR\aholders\x12\x14\n" +
	"\x05limit\x18\b \x01(\rR\x05limit\x12\x14\n" +
	"\x05index\x18\t \x01(\x04R\x05index\x12\x16\n" +
	"\x06shared\x18\n" +
	" \x01(\bR\x06shared\"o\n" +
	"\x04Kind\x12\x14\n" +
	"\x10KIND_UNSPECIFIED\x10\x00\x12\f\n" +
	"\bSNAPSHOT\x10\x01\x12\f\n" +
	"\bACQUIRED\x10\x02\x12\f\n" +
	"\bRELEASED\x10\x03\x12\v\n" +
	"\aEXPIRED\x10\x04\x12\x0e\n" +
	"\n" +
	"PROCLAIMED\x10\x05\x12\n" +
	"\n" +
	"\x06DENIED\x10\x06\"?\n" +
	"\x11CheckTokenRequest\x12\x14\n" +
	"\x05lease\x18\x01 \x01(\tR\x05lease\x12\x14\n" +
	"\x05token\x18\x02 \x01(\x04R\x05token\"@\n" +
	"\x12CheckTokenResponse\x12\x12\n" +
	"\x04live\x18\x01 \x01(\bR\x04live\x12\x16\n" +
	"\x06tokens\x18\x02 \x03(\x04R\x06tokens\"S\n" +
	"\rLeasesRequest\x12\x16\n" +
	"\x06prefix\x18\x01 \x01(\tR\x06prefix\x12\x14\n" +
	"\x05after\x18\x02 \x01(\tR\x05after\x12\x14\n" +
	"\x05limit\x18\x03 \x01(\rR\x05limit\"\xa2\x01\n" +
	"\vLeaseHolder\x12\x14\n" +
	"\x05token\x18\x01 \x01(\x04R\x05token\x12\x1f\n" +
	"\vholder_name\x18\x02 \x01(\tR\n" +
	"holderName\x12!\n" +
	"\fremaining_ns\x18\x03 \x01(\x03R\vremainingNs\x12\x15\n" +
	"\x06ttl_ns\x18\x04 \x01(\x03R\x05ttlNs\x12\"\n" +
	"\rlock_delay_ns\x18\x05 \x01(\x03R\vlockDelayNs\"f\n" +
	"\n" +
	"LeaseDelay\x12\x14\n" +
	"\x05token\x18\x01 \x01(\x04R\x05token\x12\x1f\n" +
	"\vholder_name\x18\x02 \x01(\tR\n" +
	"holderName\x12!\n" +
	"\fremaining_ns\x18\x03 \x01(\x03R\vremainingNs\"\xe0\x01\n" +
	"\tLeaseInfo\x12\x14\n" +
	"\x05lease\x18\x01 \x01(\tR\x05lease\x12;\n" +
	"\aholders\x18\x02 \x03(\v2!.leaseside.grantor.v1.LeaseHolderR\aholders\x12\x14\n" +
	"\x05limit\x18\x03 \x01(\rR\x05limit\x12\x18\n" +
	"\awaiters\x18\x04 \x01(\rR\awaiters\x128\n" +
	"\x06delays\x18\x05 \x03(\v2 .leaseside.grantor.v1.LeaseDelayR\x06delays\x12\x16\n" +
	"\x06shared\x18\x06 \x01(\bR\x06shared\"~\n" +
	"\x0eLeasesResponse\x127\n" +
	"\x06leases\x18\x01 \x03(\v2\x1f.leaseside.grantor.v1.LeaseInfoR\x06leases\x12\x12\n" +
	"\x04more\x18\x02 \x01(\bR\x04more\x12\x1f\n" +
	"\vanswered_by\x18\x03 \x01(\tR\n" +
	"answeredBy\";\n" +
	"\rRevokeRequest\x12\x14\n" +
	"\x05lease\x18\x01 \x01(\tR\x05lease\x12\x14\n" +
	"\x05token\x18\x02 \x01(\x04R\x05token\"E\n" +
	"\x0eRevokeResponse\x12\x18\n" +
	"\arevoked\x18\x01 \x03(\x04R\arevoked\x12\x19\n" +
	"\bdelay_ns\x18\x02 \x01(\x03R\adelayNs2\xaa\t\n" +
	"\aGrantor\x12V\n" +
	"\aAcquire\x12$.leaseside.grantor.v1.AcquireRequest\x1a%.leaseside.grantor.v1.AcquireResponse\x12\\\n" +
	"\rAcquireShared\x12$.leaseside.grantor.v1.AcquireRequest\x1a%.leaseside.grantor.v1.AcquireResponse\x12V\n" +
	"\aRelease\x12$.leaseside.grantor.v1.ReleaseRequest\x1a%.leaseside.grantor.v1.ReleaseResponse\x12`\n" +
	"\tKeepAlive\x12&.leaseside.grantor.v1.KeepAliveRequest\x1a'.leaseside.grantor.v1.KeepAliveResponse(\x010\x01\x12V\n" +
	"\aMembers\x12$.leaseside.grantor.v1.MembersRequest\x1a%.leaseside.grantor.v1.MembersResponse\x12e\n" +
	"\fRemoveServer\x12).leaseside.grantor.v1.RemoveServerRequest\x1a*.leaseside.grantor.v1.RemoveServerResponse\x12P\n" +
	"\x05Leave\x12\".leaseside.grantor.v1.LeaveRequest\x1a#.leaseside.grantor.v1.LeaveResponse\x12e\n" +
	"\fRegisterNode\x12).leaseside.grantor.v1.RegisterNodeRequest\x1a*.leaseside.grantor.v1.RegisterNodeResponse\x12Y\n" +
	"\bProclaim\x12%.leaseside.grantor.v1.ProclaimRequest\x1a&.leaseside.grantor.v1.ProclaimResponse\x12Q\n" +
	"\x05Watch\x12\".leaseside.grantor.v1.WatchRequest\x1a .leaseside.grantor.v1.WatchEvent(\x010\x01\x12_\n" +
	"\n" +
	"CheckToken\x12'.leaseside.grantor.v1.CheckTokenRequest\x1a(.leaseside.grantor.v1.CheckTokenResponse\x12S\n" +
	"\x06Leases\x12#.leaseside.grantor.v1.LeasesRequest\x1a$.leaseside.grantor.v1.LeasesResponse\x12S\n" +
	"\x06Revoke\x12#.leaseside.grantor.v1.RevokeRequest\x1a$.leaseside.grantor.v1.RevokeResponseB2Z0github.com/leaseside/leaseside/grantor/grantorpbb\x06proto3"

var (
	file_grantor_proto_rawDescOnce sync.Once
	file_grantor_proto_rawDescData []byte
)

func file_grantor_proto_rawDescGZIP() []byte {
	file_grantor_proto_rawDescOnce.Do(func() {
		file_grantor_proto_rawDescData = protoimpl.X.CompressGZIP(unsafe.Slice(unsafe.StringData(file_grantor_proto_rawDesc), len(file_grantor_proto_rawDesc)))
	})
	return file_grantor_proto_rawDescData
}

var file_grantor_proto_enumTypes = make([]protoimpl.EnumInfo, 1)
var file_grantor_proto_msgTypes = make([]protoimpl.MessageInfo, 35)
var file_grantor_proto_goTypes = []any{
	(WatchEvent_Kind)(0),         // 0: leaseside.grantor.v1.WatchEvent.Kind
	(*RequestID)(nil),            // 1: leaseside.grantor.v1.RequestID
	(*AcquireRequest)(nil),       // 2: leaseside.grantor.v1.AcquireRequest
	(*AcquireResponse)(nil),      // 3: leaseside.grantor.v1.AcquireResponse
	(*ReleaseRequest)(nil),       // 4: leaseside.grantor.v1.ReleaseRequest
	(*ReleaseResponse)(nil),      // 5: leaseside.grantor.v1.ReleaseResponse
	(*LeaseRef)(nil),             // 6: leaseside.grantor.v1.LeaseRef
	(*KeepAliveRequest)(nil),     // 7: leaseside.grantor.v1.KeepAliveRequest
	(*SessionRenewal)(nil),       // 8: leaseside.grantor.v1.SessionRenewal
	(*SessionRenewed)(nil),       // 9: leaseside.grantor.v1.SessionRenewed
	(*KeepAliveResponse)(nil),    // 10: leaseside.grantor.v1.KeepAliveResponse
	(*NotLeader)(nil),            // 11: leaseside.grantor.v1.NotLeader
	(*NameNotAllowed)(nil),       // 12: leaseside.grantor.v1.NameNotAllowed
	(*MembersRequest)(nil),       // 13: leaseside.grantor.v1.MembersRequest
	(*Member)(nil),               // 14: leaseside.grantor.v1.Member
	(*MembersResponse)(nil),      // 15: leaseside.grantor.v1.MembersResponse
	(*RemoveServerRequest)(nil),  // 16: leaseside.grantor.v1.RemoveServerRequest
	(*RemoveServerResponse)(nil), // 17: leaseside.grantor.v1.RemoveServerResponse
	(*LeaveRequest)(nil),         // 18: leaseside.grantor.v1.LeaveRequest
	(*LeaveResponse)(nil),        // 19: leaseside.grantor.v1.LeaveResponse
	(*RegisterNodeRequest)(nil),  // 20: leaseside.grantor.v1.RegisterNodeRequest
	(*RegisterNodeResponse)(nil), // 21: leaseside.grantor.v1.RegisterNodeResponse
	(*ProclaimRequest)(nil),      // 22: leaseside.grantor.v1.ProclaimRequest
	(*ProclaimResponse)(nil),     // 23: leaseside.grantor.v1.ProclaimResponse
	(*WatchRequest)(nil),         // 24: leaseside.grantor.v1.WatchRequest
	(*Holder)(nil),               // 25: leaseside.grantor.v1.Holder
	(*WatchEvent)(nil),           // 26: leaseside.grantor.v1.WatchEvent
	(*CheckTokenRequest)(nil),    // 27: leaseside.grantor.v1.CheckTokenRequest
	(*CheckTokenResponse)(nil),   // 28: leaseside.grantor.v1.CheckTokenResponse
	(*LeasesRequest)(nil),        // 29: leaseside.grantor.v1.LeasesRequest
	(*LeaseHolder)(nil),          // 30: leaseside.grantor.v1.LeaseHolder
	(*LeaseDelay)(nil),           // 31: leaseside.grantor.v1.LeaseDelay
	(*LeaseInfo)(nil),            // 32: leaseside.grantor.v1.LeaseInfo
	(*LeasesResponse)(nil),       // 33: leaseside.grantor.v1.LeasesResponse
	(*RevokeRequest)(nil),        // 34: leaseside.grantor.v1.RevokeRequest
	(*RevokeResponse)(nil),       // 35: leaseside.grantor.v1.RevokeResponse
}
var file_grantor_proto_depIdxs = []int32{
	1,  // 0: leaseside.grantor.v1.AcquireRequest.id:type_name -> leaseside.grantor.v1.RequestID
	1,  // 1: leaseside.grantor.v1.ReleaseRequest.id:type_name -> leaseside.grantor.v1.RequestID
	6,  // 2: leaseside.grantor.v1.KeepAliveRequest.leases:type_name -> leaseside.grantor.v1.LeaseRef
	8,  // 3: leaseside.grantor.v1.KeepAliveRequest.sessions:type_name -> leaseside.grantor.v1.SessionRenewal
	6,  // 4: leaseside.grantor.v1.SessionRenewal.untold:type_name -> leaseside.grantor.v1.LeaseRef
	6,  // 5: leaseside.grantor.v1.SessionRenewal.owner_ended:type_name -> leaseside.grantor.v1.LeaseRef
	6,  // 6: leaseside.grantor.v1.SessionRenewed.leases:type_name -> leaseside.grantor.v1.LeaseRef
	6,  // 7: leaseside.grantor.v1.KeepAliveResponse.renewed:type_name -> leaseside.grantor.v1.LeaseRef
	6,  // 8: leaseside.grantor.v1.KeepAliveResponse.lost:type_name -> leaseside.grantor.v1.LeaseRef
	9,  // 9: leaseside.grantor.v1.KeepAliveResponse.sessions:type_name -> leaseside.grantor.v1.SessionRenewed
	14, // 10: leaseside.grantor.v1.MembersResponse.members:type_name -> leaseside.grantor.v1.Member
	1,  // 11: leaseside.grantor.v1.ProclaimRequest.id:type_name -> leaseside.grantor.v1.RequestID
	0,  // 12: leaseside.grantor.v1.WatchEvent.kind:type_name -> leaseside.grantor.v1.WatchEvent.Kind
	25, // 13: leaseside.grantor.v1.WatchEvent.holders:type_name -> leaseside.grantor.v1.Holder
	30, // 14: leaseside.grantor.v1.LeaseInfo.holders:type_name -> leaseside.grantor.v1.LeaseHolder
	31, // 15: leaseside.grantor.v1.LeaseInfo.delays:type_name -> leaseside.grantor.v1.LeaseDelay
	32, // 16: leaseside.grantor.v1.LeasesResponse.leases:type_name -> leaseside.grantor.v1.LeaseInfo
	2,  // 17: leaseside.grantor.v1.Grantor.Acquire:input_type -> leaseside.grantor.v1.AcquireRequest
	2,  // 18: leaseside.grantor.v1.Grantor.AcquireShared:input_type -> leaseside.grantor.v1.AcquireRequest
	4,  // 19: leaseside.grantor.v1.Grantor.Release:input_type -> leaseside.grantor.v1.ReleaseRequest
	7,  // 20: leaseside.grantor.v1.Grantor.KeepAlive:input_type -> leaseside.grantor.v1.KeepAliveRequest
	13, // 21: leaseside.grantor.v1.Grantor.Members:input_type -> leaseside.grantor.v1.MembersRequest
	16, // 22: leaseside.grantor.v1.Grantor.RemoveServer:input_type -> leaseside.grantor.v1.RemoveServerRequest
	18, // 23: leaseside.grantor.v1.Grantor.Leave:input_type -> leaseside.grantor.v1.LeaveRequest
	20, // 24: leaseside.grantor.v1.Grantor.RegisterNode:input_type -> leaseside.grantor.v1.RegisterNodeRequest
	22, // 25: leaseside.grantor.v1.Grantor.Proclaim:input_type -> leaseside.grantor.v1.ProclaimRequest
	24, // 26: leaseside.grantor.v1.Grantor.Watch:input_type -> leaseside.grantor.v1.WatchRequest
	27, // 27: leaseside.grantor.v1.Grantor.CheckToken:input_type -> leaseside.grantor.v1.CheckTokenRequest
	29, // 28: leaseside.grantor.v1.Grantor.Leases:input_type -> leaseside.grantor.v1.LeasesRequest
	34, // 29: leaseside.grantor.v1.Grantor.Revoke:input_type -> leaseside.grantor.v1.RevokeRequest
	3,  // 30: leaseside.grantor.v1.Grantor.Acquire:output_type -> leaseside.grantor.v1.AcquireResponse
	3,  // 31: leaseside.grantor.v1.Grantor.AcquireShared:output_type -> leaseside.grantor.v1.AcquireResponse
	5,  // 32: leaseside.grantor.v1.Grantor.Release:output_type -> leaseside.grantor.v1.ReleaseResponse
	10, // 33: leaseside.grantor.v1.Grantor.KeepAlive:output_type -> leaseside.grantor.v1.KeepAliveResponse
	15, // 34: leaseside.grantor.v1.Grantor.Members:output_type -> leaseside.grantor.v1.MembersResponse
	17, // 35: leaseside.grantor.v1.Grantor.RemoveServer:output_type -> leaseside.grantor.v1.RemoveServerResponse
	19, // 36: leaseside.grantor.v1.Grantor.Leave:output_type -> leaseside.grantor.v1.LeaveResponse
	21, // 37: leaseside.grantor.v1.Grantor.RegisterNode:output_type -> leaseside.grantor.v1.RegisterNodeResponse
	23, // 38: leaseside.grantor.v1.Grantor.Proclaim:output_type -> leaseside.grantor.v1.ProclaimResponse
	26, // 39: leaseside.grantor.v1.Grantor.Watch:output_type -> leaseside.grantor.v1.WatchEvent
	28, // 40: leaseside.grantor.v1.Grantor.CheckToken:output_type -> leaseside.grantor.v1.CheckTokenResponse
	33, // 41: leaseside.grantor.v1.Grantor.Leases:output_type -> leaseside.grantor.v1.LeasesResponse
	35, // 42: leaseside.grantor.v1.Grantor.Revoke:output_type -> leaseside.grantor.v1.RevokeResponse
	30, // [30:43] is the sub-list for method output_type
	17, // [17:30] is the sub-list for method input_type
	17, // [17:17] is the sub-list for extension type_name
	17, // [17:17] is the sub-list for extension extendee
	0,  // [0:17] is the sub-list for field type_name
}

func init() { file_grantor_proto_init() }
func file_grantor_proto_init() {
	if File_grantor_proto != nil {
		return
	}
	type x struct{}
	out := protoimpl.TypeBuilder{
		File: protoimpl.DescBuilder{
			GoPackagePath: reflect.TypeOf(x{}).PkgPath(),
			RawDescriptor: unsafe.Slice(unsafe.StringData(file_grantor_proto_rawDesc), len(file_grantor_proto_rawDesc)),
			NumEnums:      1,
			NumMessages:   35,
			NumExtensions: 0,
			NumServices:   1,
		},
		GoTypes:           file_grantor_proto_goTypes,
		DependencyIndexes: file_grantor_proto_depIdxs,
		EnumInfos:         file_grantor_proto_enumTypes,
		MessageInfos:      file_grantor_proto_msgTypes,
	}.Build()
	File_grantor_proto = out.File
	file_grantor_proto_goTypes = nil
	file_grantor_proto_depIdxs = nil
}
