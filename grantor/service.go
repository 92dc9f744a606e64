package grantor

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// service implements grantorpb.GrantorServer on a Node.
type service struct {
	grantorpb.UnimplementedGrantorServer
	n *Node
}

// Acquire implements grantorpb.GrantorServer.
func (s *service) Acquire(ctx context.Context, req *grantorpb.AcquireRequest) (*grantorpb.AcquireResponse, error) {
	return s.acquire(ctx, req, false)
}

// AcquireShared implements grantorpb.GrantorServer: Acquire for a shared
// grant (shared.go).
func (s *service) AcquireShared(ctx context.Context, req *grantorpb.AcquireRequest) (*grantorpb.AcquireResponse, error) {
	return s.acquire(ctx, req, true)
}

func (s *service) acquire(ctx context.Context, req *grantorpb.AcquireRequest, shared bool) (*grantorpb.AcquireResponse, error) {
	c, wait, err := s.n.cfg.validAcquire(req, shared)
	if err != nil {
		s.n.metrics.acquiresFailed.Add(1)
		return nil, toStatus(err)
	}
	id := IdentityFrom(ctx)
	c.Identity, c.caller = id.owner(), id
	c.Limit = s.n.cfg.Limits.For(id).Leases
	if err := s.n.accounts.checkRequest(id, c.ID, len(c.Value), !s.n.fsm.heldBy(c.Lease, c.ID.Session, c.Owner)); err != nil {
		s.n.metrics.acquiresFailed.Add(1)
		return nil, toStatus(err)
	}
	res, err := s.n.lessor.acquire(ctx, c, wait)
	if err != nil {
		if le := (*LimitError)(nil); errors.As(err, &le) && le.Limit == limLeases.String() {
			s.n.accounts.countRefused(limLeases)
		}
		s.n.metrics.acquiresFailed.Add(1)
		return nil, toStatus(err)
	}
	if res.Granted {
		s.n.metrics.acquiresGranted.Add(1)
		s.n.audit.grant(IdentityFrom(ctx), req.GetLease(), res.Token, req.GetId().GetSession(), req.GetOwner())
	} else {
		s.n.metrics.acquiresNotGranted.Add(1)
	}
	return &grantorpb.AcquireResponse{
		Granted:       res.Granted,
		Token:         res.Token,
		HolderName:    res.HolderName,
		Limit:         uint32(res.Limit),
		Holders:       uint32(res.Holders),
		Ended:         res.Ended,
		Delayed:       res.Delayed,
		Shared:        res.Shared,
		GrantorTimeNs: s.n.cfg.Clock.Now().Nanoseconds(),
		TtlNs:         int64(res.TTL),
		Rho:           s.n.cfg.Timing.Rho,
		EpsilonNs:     int64(s.n.cfg.Timing.Epsilon),
	}, nil
}

// Release implements grantorpb.GrantorServer.
func (s *service) Release(ctx context.Context, req *grantorpb.ReleaseRequest) (*grantorpb.ReleaseResponse, error) {
	c, err := validRelease(req)
	if err != nil {
		s.n.metrics.releasesFailed.Add(1)
		return nil, toStatus(err)
	}
	id := IdentityFrom(ctx)
	if err := s.n.accounts.takeUnchanged(id); err != nil {
		s.n.metrics.releasesFailed.Add(1)
		return nil, toStatus(err)
	}
	c.Identity = id.owner()
	// Under a session the state does not know, a release is answered
	// without an entry (lessor.release) and leaves nothing to charge.
	if s.n.fsm.hasSession(c.ID.Session) {
		if err := s.n.accounts.checkRequest(id, c.ID, 0, false); err != nil {
			s.n.metrics.releasesFailed.Add(1)
			return nil, toStatus(err)
		}
	}
	res, err := s.n.lessor.release(ctx, c)
	if err != nil {
		s.n.metrics.releasesFailed.Add(1)
		return nil, toStatus(err)
	}
	if res.Released {
		s.n.metrics.releasesReleased.Add(1)
		s.n.accounts.changedAfterAll(id)
	} else {
		s.n.metrics.releasesNotHeld.Add(1)
	}
	s.n.audit.release(id, c, res.Released)
	return &grantorpb.ReleaseResponse{Released: res.Released}, nil
}

// Members implements grantorpb.GrantorServer. Any node answers, leader or
// not, from its own view: the raft configuration it knows, each server's
// voter flag and raft state, and, when it leads, how long ago each
// follower last answered it; merged with every gossip member, sidecars
// included, and their gossip states; to a grantor certificate, whether
// a join rule admits its name (CallerJoin, retired.go). With leader_only
// it lists only the leader and itself, with servers_only only the servers
// of its raft configuration: a full answer grows by about 77 bytes a
// gossip member, these do not. The answer is charged to the caller's
// queued bytes until it is sent (edgeLimits.chargeAnswer).
func (s *service) Members(ctx context.Context, req *grantorpb.MembersRequest) (*grantorpb.MembersResponse, error) {
	if err := s.n.edge.chargeAnswer(ctx, 0); err != nil {
		return nil, toStatus(err)
	}
	resp := s.n.members(scopeOf(req))
	if id := IdentityFrom(ctx); s.n.cfg.TLS != nil && id.Role == RoleGrantor {
		resp.CallerJoin = callerJoin(s.n.nameRules.Load().admitsGrantor(id.Name))
	}
	if err := s.n.edge.chargeAnswer(ctx, proto.Size(resp)); err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

// RemoveServer implements grantorpb.GrantorServer. Only the leader
// answers; see Node.RemoveServer.
func (s *service) RemoveServer(ctx context.Context, req *grantorpb.RemoveServerRequest) (*grantorpb.RemoveServerResponse, error) {
	if req.GetNodeId() == "" {
		return nil, toStatus(invalid("node_id", "node_id is empty"))
	}
	if err := s.onlyItself(ctx, "RemoveServer", req.GetNodeId()); err != nil {
		return nil, err
	}
	if err := s.n.RemoveServer(ctx, req.GetNodeId()); err != nil {
		return nil, toStatus(err)
	}
	s.n.audit.memberRemove(IdentityFrom(ctx), req.GetNodeId())
	return &grantorpb.RemoveServerResponse{}, nil
}

// onlyItself refuses a grantor certificate's RemoveServer or Leave of
// any server but its own (PERMISSION_DENIED, audited by the interceptor):
// a grantor leaves by its own Leave, whose RemoveServer at the leader
// names itself, and only an operator removes another. Any grantor
// certificate of the CA may make these calls, one of a name in no
// configuration too (red team, issue 21: such a certificate removed a
// member of a running cluster, and could remove all but the leader).
func (s *service) onlyItself(ctx context.Context, call, nodeID string) error {
	if id := IdentityFrom(ctx); s.n.cfg.TLS != nil && id.Role == RoleGrantor && id.Name != nodeID {
		return status.Errorf(codes.PermissionDenied, "grantor: %s of grantor %q by %v refused: a grantor certificate takes only its own grantor out of the cluster (an operator's takes any)", call, nodeID, id)
	}
	return nil
}

// Leave implements grantorpb.GrantorServer: this node leaves the cluster
// (Node.Leave, within the caller's deadline) and then stops; Run returns
// nil once it has. A second call while one is under way is refused.
func (s *service) Leave(ctx context.Context, req *grantorpb.LeaveRequest) (*grantorpb.LeaveResponse, error) {
	if err := s.onlyItself(ctx, "Leave", s.n.cfg.NodeID); err != nil {
		return nil, err
	}
	if !s.n.leaving.CompareAndSwap(false, true) {
		return nil, status.Error(codes.FailedPrecondition, "grantor: already leaving")
	}
	outcome, err := s.n.leave(ctx)
	// Stop whatever became of the leave: the node acknowledges nothing
	// any more (lessor.retire) and has left gossip. Run shuts it down once
	// this answer is out (GracefulStop waits for it).
	close(s.n.left)
	if err != nil {
		return nil, toStatus(err)
	}
	return &grantorpb.LeaveResponse{NodeId: s.n.cfg.NodeID, Outcome: outcome}, nil
}

// KeepAlive implements grantorpb.GrantorServer. The stream belongs to the
// office it started in: when this node leaves office the stream ends with
// NotLeader, and the sidecar reconnects to the new leader.
//
// Its requests are answered side by side, up to keepAlivesInFlight at
// once, each as soon as its verify round is over (issue 22.6): a sidecar
// keeps one keepalive in flight per session, and one whose reply waits
// (in a round, or on the way) holds back no other. Replies may leave out
// of order; each names its batch. The sessions of two requests in flight
// may be the same (a sidecar that gave up on a request and sent the
// session again): each renewal only ever moves a session's expiry later
// (office.extendLocked), from a tG read after its own round, so the order
// in which they are answered changes no expiry for the worse. The first
// request that fails ends the stream with its error, as one alone did.
func (s *service) KeepAlive(stream grpc.BidiStreamingServer[grantorpb.KeepAliveRequest, grantorpb.KeepAliveResponse]) error {
	caller := IdentityFrom(stream.Context())
	o, err := s.n.lessor.await(stream.Context())
	if err != nil {
		return toStatus(err)
	}
	ctx, cancel := context.WithCancelCause(stream.Context())
	// The reader takes room for a request, reads it and starts its
	// answer; the handler waits for the answers it started when it
	// returns (spawn refuses to start one after that), not for the
	// reader, whose Recv only returns once the handler has.
	var (
		work     sync.WaitGroup
		spawnMu  sync.Mutex
		returned bool
		sendMu   sync.Mutex // grpc-go: no two goroutines call SendMsg at once
	)
	defer func() {
		cancel(nil)
		spawnMu.Lock()
		returned = true
		spawnMu.Unlock()
		work.Wait() // no reply is sent after the handler returns
	}()
	as := s.n.edge.answerStream(stream.Context())
	answer := func(req *grantorpb.KeepAliveRequest, refund func()) {
		defer work.Done()
		defer refund()
		resp, err := s.keepAlive(ctx, o, caller, req, as)
		if err != nil {
			cancel(toStatus(err))
			return
		}
		sendMu.Lock()
		err = stream.Send(resp)
		sendMu.Unlock()
		if err != nil {
			cancel(err)
		}
	}
	spawn := func(req *grantorpb.KeepAliveRequest, refund func()) bool {
		spawnMu.Lock()
		defer spawnMu.Unlock()
		if returned {
			return false
		}
		work.Add(1)
		go answer(req, refund)
		return true
	}
	room := s.keepAliveRoom(caller)
	recvErr := make(chan error, 1)
	go func() {
		for {
			refund := room.take()
			for refund == nil { // past the bound, the stream is not read
				select {
				case <-room.freed:
				case <-ctx.Done():
					return
				}
				refund = room.take()
			}
			req, err := stream.Recv()
			if err != nil {
				refund()
				recvErr <- err
				return
			}
			if !spawn(req, refund) {
				refund()
				return
			}
		}
	}()
	// ended is the stream's end once ctx is done: the error of the
	// request that failed, or the call's own end.
	ended := func() error {
		err := context.Cause(ctx)
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return status.FromContextError(err).Err()
		}
		return err
	}
	select {
	case err := <-recvErr:
		if errors.Is(err, io.EOF) {
			work.Wait() // the requests in flight are still answered
			return nil
		}
		return err
	case <-o.ctx.Done():
		return toStatus(s.n.lessor.prop.notLeader())
	case <-ctx.Done():
		return ended()
	}
}

// keepAlivesInFlight bounds the requests of one keepalive stream the
// grantor works on at once: a sidecar has one in flight per session of
// its (one per term), rarely more than a few.
const keepAlivesInFlight = 8

// kaRoom is the room of one keepalive stream for requests in progress.
// The stream's call (charged at the edge, grpc_limits.go) covers one;
// each more is charged to the caller's calls as a call of its own, since
// it holds a request as a call does (docs/limits.md). Past
// keepAlivesInFlight or the caller's calls, the stream waits for an
// answer to go out before it reads on: its requests are answered one by
// one again, never refused.
type kaRoom struct {
	accounts *accounts
	caller   Identity

	mu    sync.Mutex
	busy  int
	freed chan struct{} // poked when a request's room is given back
}

func (s *service) keepAliveRoom(caller Identity) *kaRoom {
	return &kaRoom{accounts: s.n.accounts, caller: caller, freed: make(chan struct{}, 1)}
}

// take returns room for one more request, and the function that gives
// it back; nil when there is none now.
func (r *kaRoom) take() (refund func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var acct *account
	switch {
	case r.busy == 0:
	case r.busy >= keepAlivesInFlight:
		return nil
	default:
		var ok bool
		if acct, ok = r.accounts.tryCharge(r.caller, limCalls, 1); !ok {
			return nil
		}
	}
	r.busy++
	return func() {
		if acct != nil {
			r.accounts.refund(acct, limCalls, 1)
		}
		r.mu.Lock()
		r.busy--
		r.mu.Unlock()
		select {
		case r.freed <- struct{}{}:
		default:
		}
	}
}

// keepAlive answers one keepalive request: whole sessions (version 5),
// or an older sidecar's session and list of leases. Every reply is a new
// message: grpc-go's SendMsg says a message must not be modified after
// it is sent (a stats handler or tracer may read it later), so a stream
// never writes into a reply it sent (review 9/12/13 S5).
//
// Every reply is charged to the caller's queued_bytes on its stream (as)
// until the connection has written it (answer_charge.go): a listing
// reserves its bytes before it is built and is withheld past the limit
// (renewSessions); the rest, which the request's own size bounds, is
// charged whatever the limit. Before, a sidecar certificate holding 2,000
// grants that sent keepalives with wrong digests and read none of the
// answers took a grantor's live heap from 9 to 53 MiB (review K2).
func (s *service) keepAlive(ctx context.Context, o *office, caller Identity, req *grantorpb.KeepAliveRequest, as *answerStream) (*grantorpb.KeepAliveResponse, error) {
	resp, reserved, err := s.keepAliveAnswer(ctx, o, caller, req, as)
	if err != nil {
		as.unreserve(reserved)
		return nil, err
	}
	if as != nil {
		if err := as.owe(ctx, grpcMessageHeader+proto.Size(resp), reserved); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// grpcMessageHeader is the bytes gRPC writes before each message on a
// stream (a compression flag and the length), in the stream's DATA.
const grpcMessageHeader = 5

// keepAliveAnswer makes keepAlive's reply, and says how many bytes of it
// as reserved.
func (s *service) keepAliveAnswer(ctx context.Context, o *office, caller Identity, req *grantorpb.KeepAliveRequest, as *answerStream) (resp *grantorpb.KeepAliveResponse, reserved int, err error) {
	resp = &grantorpb.KeepAliveResponse{
		Batch:     req.GetBatch(),
		Rho:       s.n.cfg.Timing.Rho,
		EpsilonNs: int64(s.n.cfg.Timing.Epsilon),
	}
	if len(req.GetSessions()) > 0 {
		ss, err := validSessions(req)
		if err != nil {
			return nil, 0, err
		}
		var refusal error
		reserve := func(n int) bool {
			if err := as.reserve(n); err != nil {
				refusal = err
				return false
			}
			reserved += n
			return true
		}
		res, tG, err := s.n.lessor.renewSessions(ctx, o, caller.owner(), ss, reserve)
		if err != nil {
			return nil, reserved, err
		}
		resp.GrantorTimeNs = tG.Nanoseconds()
		sessions := make([]grantorpb.SessionRenewed, len(res)) // one allocation for the reply's sessions
		resp.Sessions = make([]*grantorpb.SessionRenewed, 0, len(res))
		for i, r := range res {
			out := &sessions[i]
			*out = grantorpb.SessionRenewed{Session: r.Session, Renewed: r.Renewed, TtlNs: int64(r.TTL),
				LeaseSetVersion: r.Digest, Listed: r.Listed, Refused: r.Refused, Withheld: r.Withheld}
			// Audited as a call's refusal is (authz.go), limited as
			// every refusal is.
			switch {
			case r.Refused:
				s.n.audit.refused(caller, "KeepAlive", (&PermissionError{Session: r.Session, Identity: caller.owner()}).Error())
			case r.Withheld:
				s.n.audit.refused(caller, "KeepAlive", "listing of session "+strconv.Quote(r.Session)+" withheld, the session not renewed: "+refusal.Error())
			}
			if r.Listed {
				out.Leases = make([]*grantorpb.LeaseRef, len(r.Grants))
				for j, g := range r.Grants {
					out.Leases[j] = &grantorpb.LeaseRef{Lease: g.Lease, Token: g.Token, TtlNs: int64(g.TTL), Owner: g.Owner}
				}
			}
			resp.Sessions = append(resp.Sessions, out)
		}
		return resp, reserved, nil
	}
	refs, err := validKeepAlive(req)
	if err != nil {
		return nil, 0, err
	}
	if err := checkOwner(&sessionRecord{Owner: s.n.fsm.sessionOwner(req.GetSession())}, req.GetSession(), caller.owner()); err != nil {
		return nil, 0, err
	}
	res, err := s.n.lessor.renew(ctx, o, req.GetSession(), refs)
	if err != nil {
		return nil, 0, err
	}
	resp.Renewed, resp.Lost, resp.GrantorTimeNs = toPB(res.renewed), toPB(res.lost), res.tG.Nanoseconds()
	return resp, 0, nil
}

func toPB(refs []leaseRef) []*grantorpb.LeaseRef {
	out := make([]*grantorpb.LeaseRef, len(refs))
	for i, r := range refs {
		out[i] = &grantorpb.LeaseRef{Lease: r.Lease, Token: r.Token, TtlNs: int64(r.TTL)}
	}
	return out
}

// toStatus maps the grantor's errors to gRPC status codes:
//
//	NotLeaderError        FAILED_PRECONDITION with a grantorpb.NotLeader detail
//	InvalidArgumentError  INVALID_ARGUMENT
//	ErrSeqReused          INVALID_ARGUMENT
//	StaleRequestError     OUT_OF_RANGE (seq below the session's first_unacked, or listed in also_received)
//	ErrTooManyOutstanding RESOURCE_EXHAUSTED
//	ErrOverLimit          RESOURCE_EXHAUSTED (a limit of the caller's account, named)
//	ErrPermissionDenied   PERMISSION_DENIED (a session of another identity)
//	ErrUnknownServer      NOT_FOUND
//	ErrNotHeld            NOT_FOUND (a Revoke of a name nothing holds)
//	ErrWrongToken         FAILED_PRECONDITION, without a NotLeader detail
//	ErrRevokeNotSupported UNIMPLEMENTED (a Revoke before every grantor applies cmdRevoke2)
//	ErrNotSupported       UNIMPLEMENTED (semaphores, values, Proclaim before every grantor applies them)
//	ErrLockDelayNotSupported UNIMPLEMENTED (a lock-delay before every grantor applies them)
//	ErrSharedNotSupported UNIMPLEMENTED (a shared Acquire before every grantor applies them)
//	ErrLastVoter          FAILED_PRECONDITION, without a NotLeader detail
//	ErrShutdown, raft     UNAVAILABLE
//	context errors        CANCELED / DEADLINE_EXCEEDED
func toStatus(err error) error {
	var nl *NotLeaderError
	switch {
	case errors.As(err, &nl):
		st, derr := status.New(codes.FailedPrecondition, nl.Error()).
			WithDetails(&grantorpb.NotLeader{LeaderRpcAddr: nl.LeaderRPCAddr})
		if derr != nil {
			return status.Error(codes.FailedPrecondition, nl.Error())
		}
		return st.Err()
	case errors.Is(err, ErrInvalidArgument), errors.Is(err, ErrSeqReused):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ErrStaleRequest):
		return status.Error(codes.OutOfRange, err.Error())
	case errors.Is(err, ErrTooManyOutstanding), errors.Is(err, ErrOverLimit):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, ErrPermissionDenied):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, ErrUnknownServer), errors.Is(err, ErrNotHeld):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, ErrWrongToken):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, ErrNotSupported), errors.Is(err, ErrLockDelayNotSupported), errors.Is(err, ErrRevokeNotSupported), errors.Is(err, ErrSharedNotSupported):
		return status.Error(codes.Unimplemented, err.Error())
	case errors.Is(err, ErrLastVoter):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Unavailable, err.Error())
}
