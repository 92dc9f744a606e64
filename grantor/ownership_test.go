package grantor

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

func acq4(identity, session string, seq uint64, lease string, limit int) acquireCmd {
	return acquireCmd{ID: requestID{Session: session, Seq: seq}, Lease: lease, Owner: "o", TTL: 10 * time.Second, Identity: identity, Limit: limit}
}

// TEAM.md decision 3 in the FSM: a session belongs to the identity that
// opened it. Another identity's Acquire or Release under it is refused and
// changes nothing (not even the session's floor), and a refused Acquire of
// a held lease names the holder's token and identity name, never its
// session or owner ids.
func TestFSMSessionBelongsToItsIdentity(t *testing.T) {
	f := newTestFSM()
	a := f.apply(cmdAcquire4, acq4("host-a", "s1", 1, "x", 0)).(*acquireResult)
	if !a.Granted {
		t.Fatalf("host-a's acquire: %+v", a)
	}
	before := persist(t, f.fsm)

	foreign := acq4("host-b", "s1", 5, "y", 0)
	foreign.ID.FirstUnacked = 5
	foreign.ID.AlsoReceived = []uint64{1}
	if r := f.apply(cmdAcquire4, foreign); !errors.Is(asErr(r), ErrPermissionDenied) {
		t.Fatalf("host-b's acquire under host-a's session: %v, want permission denied", r)
	}
	rel := releaseCmd{ID: requestID{Session: "s1", Seq: 6}, Lease: "x", Owner: "o", Token: a.Token, Identity: "host-b"}
	if r := f.apply(cmdRelease3, rel); !errors.Is(asErr(r), ErrPermissionDenied) {
		t.Fatalf("host-b's release under host-a's session: %v, want permission denied", r)
	}
	if after := persist(t, f.fsm); string(after) != string(before) {
		t.Fatalf("refused requests changed the state:\n%s\n%s", before, after)
	}

	r := f.apply(cmdAcquire4, acq4("host-b", "s2", 1, "x", 0)).(*acquireResult)
	if r.Granted || r.Token != a.Token || r.HolderName != "host-a" {
		t.Fatalf("host-b's acquire of host-a's lease: %+v, want refused naming host-a and token %d", r, a.Token)
	}
	if !f.release(t, "s1", 2, "x", "o", a.Token) { // an entry without identity: an older type
		t.Fatal("release by an older entry type refused")
	}
}

// A session opened by entries older than cmdAcquire4 has no owner; the
// first identity that names it takes it.
func TestFSMUnownedSessionIsAdopted(t *testing.T) {
	f := newTestFSM()
	f.acquire(t, "s1", 1, "x", "o") // cmdAcquire: no identity
	if got := f.sessionOwner("s1"); got != "" {
		t.Fatalf("owner %q after an older entry", got)
	}
	if r := f.apply(cmdAcquire4, acq4("host-a", "s1", 2, "y", 0)).(*acquireResult); !r.Granted {
		t.Fatalf("host-a on the unowned session: %+v", r)
	}
	if got := f.sessionOwner("s1"); got != "host-a" {
		t.Fatalf("owner %q, want host-a", got)
	}
	if r := f.apply(cmdAcquire4, acq4("host-b", "s1", 3, "z", 0)); !errors.Is(asErr(r), ErrPermissionDenied) {
		t.Fatalf("host-b after host-a adopted the session: %v", r)
	}
	// Both leases count for host-a now.
	if r := f.apply(cmdAcquire4, acq4("host-a", "s1", 4, "w", 2)); !errors.Is(asErr(r), ErrOverLimit) {
		t.Fatalf("host-a with 2 leases and limit 2: %v, want too many", r)
	}
}

// Issue 8 item 6: over the limit of live leases per identity an Acquire
// is refused with a clear error and nothing held changes; the holder may
// still re-acquire what it holds; others are not affected; the count
// survives a snapshot.
func TestFSMLeaseLimitPerIdentity(t *testing.T) {
	f := newTestFSM()
	const limit = 2
	var tokens []uint64
	for i, name := range []string{"a", "b"} {
		r := f.apply(cmdAcquire4, acq4("host-a", "s1", uint64(i+1), name, limit)).(*acquireResult)
		if !r.Granted {
			t.Fatalf("grant %d: %+v", i, r)
		}
		tokens = append(tokens, r.Token)
	}
	last := f.lastToken()
	r := f.apply(cmdAcquire4, acq4("host-a", "s1", 3, "c", limit))
	var tm *LimitError
	if !errors.As(asErr(r), &tm) || tm.Used != 2 || tm.Max != 2 || tm.Limit != "leases" || !strings.Contains(tm.Error(), "host-a is at its limit of leases (2 of 2)") {
		t.Fatalf("third grant: %v, want too many leases", r)
	}
	if f.lastToken() != last || f.hasOutcome("s1", 3) {
		t.Fatal("the refused grant changed the state")
	}
	// Across sessions of the same identity.
	if r := f.apply(cmdAcquire4, acq4("host-a", "s9", 1, "c", limit)); !errors.Is(asErr(r), ErrOverLimit) {
		t.Fatalf("another session of host-a: %v", r)
	}
	if r := f.apply(cmdAcquire4, acq4("host-a", "s1", 4, "a", limit)).(*acquireResult); !r.Granted || r.Token <= tokens[1] {
		t.Fatalf("re-acquire of a held lease at the limit: %+v", r)
	}
	if r := f.apply(cmdAcquire4, acq4("host-b", "s2", 1, "c", limit)).(*acquireResult); !r.Granted {
		t.Fatalf("another identity: %+v", r)
	}

	g := newTestFSM()
	if err := g.Restore(io.NopCloser(bytes.NewReader(persist(t, f.fsm)))); err != nil {
		t.Fatal(err)
	}
	g.index = f.index
	if r := g.apply(cmdAcquire4, acq4("host-a", "s1", 5, "d", limit)); !errors.Is(asErr(r), ErrOverLimit) {
		t.Fatalf("after a restore: %v, want the limit still counted", r)
	}
	// A release makes room; the refused seq is evaluated afresh.
	if !g.release(t, "s1", 6, "b", "o", tokens[1]) {
		t.Fatal("release failed")
	}
	if r := g.apply(cmdAcquire4, acq4("host-a", "s1", 3, "c", limit)).(*acquireResult); r.Granted {
		t.Fatalf("c is host-b's: %+v", r)
	}
	if r := g.apply(cmdAcquire4, acq4("host-a", "s1", 7, "d", limit)).(*acquireResult); !r.Granted {
		t.Fatalf("after a release: %+v, want granted", r)
	}
}

func asErr(r any) error {
	err, _ := r.(error)
	return err
}

// identityMetadata is the metadata key of testIdentityServer.
const identityMetadata = "x-test-identity"

// testIdentityServer serves a node's service on a gRPC server of its own
// whose interceptors take the caller's identity from the metadata
// ("ROLE/NAME"), standing in for the TLS interceptor: the handlers see
// identities exactly as they would with certificates.
func testIdentityServer(t *testing.T, n *Node) string {
	t.Helper()
	idFrom := func(ctx context.Context) context.Context {
		md, _ := metadata.FromIncomingContext(ctx)
		v := md.Get(identityMetadata)
		if len(v) == 0 {
			return ctx
		}
		role, name, _ := strings.Cut(v[0], "/")
		r, err := ParseRole(role)
		if err != nil {
			t.Errorf("test identity %q: %v", v[0], err)
		}
		return ContextWithIdentity(ctx, Identity{Role: r, Name: name})
	}
	srv := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return h(idFrom(ctx), req)
		}),
		grpc.StreamInterceptor(func(s any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(s, &identityStream{ServerStream: ss, ctx: idFrom(ss.Context())})
		}),
	)
	grantorpb.RegisterGrantorServer(srv, &service{n: n})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// as returns a client whose calls carry identity id.
func as(t *testing.T, addr string, id Identity) (grantorpb.GrantorClient, func(context.Context) context.Context) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return grantorpb.NewGrantorClient(conn), func(ctx context.Context) context.Context {
		return metadata.AppendToOutgoingContext(ctx, identityMetadata, id.String())
	}
}

// Issue 8 items 1 and 6 over real gRPC, with identities as the TLS
// interceptor hands them over: the attack of issue 8 (probe, release as
// the holder, acquire) fails at every step, and a sidecar over its limit
// gets RESOURCE_EXHAUSTED while an operator, under its own account, acquires.
func TestNodeSessionsBelongToTheirIdentity(t *testing.T) {
	cfg := fastConfig(t, t.TempDir())
	cfg.Limits.Sidecar.Leases = 3
	n := start(t, cfg, true)
	addr := testIdentityServer(t, n.Node)
	hostA, ctxA := as(t, addr, Identity{Role: RoleSidecar, Name: "host-a"})
	hostB, ctxB := as(t, addr, Identity{Role: RoleSidecar, Name: "host-b"})

	a, err := hostA.Acquire(ctxA(tctx(t)), acqReq("sa", 1, "x"))
	if err != nil || !a.Granted {
		t.Fatalf("host-a: %v %v", a, err)
	}
	// The probe: the holder's name and token, nothing to act with.
	probe, err := hostB.Acquire(ctxB(tctx(t)), acqReq("sb", 1, "x"))
	if err != nil || probe.Granted || probe.Token != a.Token || probe.HolderName != "host-a" {
		t.Fatalf("host-b's probe: %v %v, want refused naming host-a token %d", probe, err, a.Token)
	}
	// Acting under host-a's session, knowing it anyway.
	_, err = hostB.Release(ctxB(tctx(t)), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: "sa", Seq: 2}, Lease: "x", Owner: "o", Token: a.Token})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("host-b releasing under host-a's session: %v, want PermissionDenied", err)
	}
	if _, err := hostB.Acquire(ctxB(tctx(t)), acqReq("sa", 3, "y")); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("host-b acquiring under host-a's session: %v, want PermissionDenied", err)
	}
	ka, err := hostB.KeepAlive(ctxB(tctx(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := ka.Send(&grantorpb.KeepAliveRequest{Session: "sa", Batch: 1, Leases: []*grantorpb.LeaseRef{{Lease: "x", Token: a.Token}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ka.Recv(); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("host-b's keepalive of host-a's session: %v, want PermissionDenied", err)
	}
	if still, err := hostB.Acquire(ctxB(tctx(t)), acqReq("sb", 2, "x")); err != nil || still.Granted || still.Token != a.Token {
		t.Fatalf("after the attack: %v %v, want x still host-a's with token %d", still, err, a.Token)
	}

	// The limit: host-a holds x, two more, then RESOURCE_EXHAUSTED.
	for i, name := range []string{"l1", "l2"} {
		if r, err := hostA.Acquire(ctxA(tctx(t)), acqReq("sa", uint64(4+i), name)); err != nil || !r.Granted {
			t.Fatalf("host-a lease %d: %v %v", i+2, r, err)
		}
	}
	_, err = hostA.Acquire(ctxA(tctx(t)), acqReq("sa", 6, "l3"))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "host-a") {
		t.Fatalf("host-a's fourth lease: %v, want RESOURCE_EXHAUSTED naming host-a", err)
	}
	if r, err := hostB.Acquire(ctxB(tctx(t)), acqReq("sb", 3, "l3")); err != nil || !r.Granted {
		t.Fatalf("host-b is not limited by host-a's leases: %v %v", r, err)
	}
	op, ctxOp := as(t, addr, Identity{Role: RoleOperator, Name: "ops"})
	for i := range 4 {
		if r, err := op.Acquire(ctxOp(tctx(t)), acqReq("so", uint64(i+1), "op"+string(rune('a'+i)))); err != nil || !r.Granted {
			t.Fatalf("operator lease %d: %v %v", i+1, r, err)
		}
	}
}

// Mixed versions: until every server applies cmdAcquire4 and cmdRelease3,
// the leader writes the older types without the identity, which every
// replica applies alike: ownership and limits are then not enforced (and
// no owner is recorded); once every server knows them, they are.
func TestLessorOwnershipOnlyOnceEveryServerKnowsIt(t *testing.T) {
	h := newHarness(t)
	h.raft.allowCmd.Store(uint32(cmdAcquire3))
	h.takeOffice()
	if e := acquireEntry(acq4("host-a", "s1", 1, "x", 1), cmdAcquire3); e[0] != byte(cmdAcquire3) || strings.Contains(string(e), "host-a") {
		t.Fatalf("older entry carries %q", e)
	}
	if r := h.acquire(acq4("host-a", "s1", 1, "x", 1)); !r.Granted {
		t.Fatalf("host-a: %+v", r)
	}
	if r := h.acquire(acq4("host-b", "s1", 2, "y", 1)); !r.Granted {
		t.Fatalf("host-b under s1 with an older server in the cluster: %+v, want granted (not enforced)", r)
	}
	if got := h.fsm.sessionOwner("s1"); got != "" {
		t.Fatalf("owner %q recorded by an older entry", got)
	}
	h.raft.allowCmd.Store(uint32(newestCmd))
	if r := h.acquire(acq4("host-a", "s1", 3, "z", 0)); !r.Granted {
		t.Fatalf("host-a once every server knows acquire4: %+v", r)
	}
	if _, err := h.l.acquire(h.ctx(), acq4("host-b", "s1", 4, "w", 0), 0); !errors.Is(err, ErrPermissionDenied) {
		t.Fatalf("host-b under host-a's session: %v, want permission denied", err)
	}
}

// An operator (or grantor) certificate named like a sidecar host is not
// that host (review R8-16): it may not act under the host's session, and
// its leases do not count against the host's limit.
func TestNodeOwnerIsRoleAndName(t *testing.T) {
	cfg := fastConfig(t, t.TempDir())
	cfg.Limits.Sidecar.Leases = 1
	n := start(t, cfg, true)
	addr := testIdentityServer(t, n.Node)
	host, ctxHost := as(t, addr, Identity{Role: RoleSidecar, Name: "h1"})
	op, ctxOp := as(t, addr, Identity{Role: RoleOperator, Name: "h1"})

	if r, err := op.Acquire(ctxOp(tctx(t)), acqReq("s-op", 1, "y")); err != nil || !r.Granted {
		t.Fatalf("operator h1: %v %v", r, err)
	}
	a, err := host.Acquire(ctxHost(tctx(t)), acqReq("s-host", 1, "x"))
	if err != nil || !a.Granted {
		t.Fatalf("sidecar h1's first lease, the operator's not counted: %v %v", a, err)
	}
	_, err = op.Release(ctxOp(tctx(t)), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: "s-host", Seq: 2}, Lease: "x", Owner: "o", Token: a.Token})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("operator h1 releasing under sidecar h1's session: %v, want PermissionDenied", err)
	}
	if probe, err := op.Acquire(ctxOp(tctx(t)), acqReq("s-op", 2, "x")); err != nil || probe.Granted || probe.HolderName != "h1" {
		t.Fatalf("x after the attempt: %v %v, want still sidecar h1's", probe, err)
	}
}
