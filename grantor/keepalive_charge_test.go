package grantor

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
)

// holdGrants has c acquire n grants in session, each named with its
// number and pad, held an hour (nothing renews them); it returns their
// tokens.
func holdGrants(t *testing.T, c grantorpb.GrantorClient, session string, n int, pad string) []uint64 {
	t.Helper()
	tokens := make([]uint64, n)
	for i := range n {
		seq := uint64(i + 1)
		req := acqReq(session, seq, fmt.Sprintf("%s/%04d/%s", session, i, pad))
		req.Id.FirstUnacked = seq
		req.TtlNs = int64(time.Hour)
		r := mustAcquire(t, c, req)
		if !r.Granted {
			t.Fatalf("acquire %d: %v", i, r)
		}
		tokens[i] = r.Token
	}
	return tokens
}

// liveHeap is the heap that survives a collection.
func liveHeap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// keepAliveOnce sends one keepalive of session with digest on a new
// stream of c and returns its answer for the session.
func keepAliveOnce(t *testing.T, c grantorpb.GrantorClient, session string, digest uint64) *grantorpb.SessionRenewed {
	t.Helper()
	ka, err := c.KeepAlive(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ka.CloseSend()
	req := &grantorpb.KeepAliveRequest{Session: session, Batch: 1, Sessions: []*grantorpb.SessionRenewal{
		{Session: session, TtlNs: int64(time.Hour), LeaseSetVersion: digest}}}
	if err := ka.Send(req); err != nil {
		t.Fatal(err)
	}
	resp, err := ka.Recv()
	if err != nil || len(resp.Sessions) != 1 {
		t.Fatalf("keepalive of %s: %v %v", session, resp, err)
	}
	return resp.Sessions[0]
}

// Lane review of 2026-12-03, finding K2, on a real TLS node: a keepalive
// answer that lists a session's grants (its digest differed) was charged
// to nothing, and grpc-go ends a call once its answer is queued, not
// sent. A sidecar certificate holding 2,000 grants that sent keepalives
// with wrong digests and read none of the answers took the leader's live
// heap from 9 to 53 MiB with 64 of them. Now each answer is charged to the
// caller's queued_bytes until its connection has written it; a listing
// past the limit is withheld (renewed false, nothing listed), so 64 such
// calls keep the leader's live heap within the identity's queued_bytes
// (two to three times as much heap: grpc-go's buffers), and the caller's other keepalives are
// answered withheld, which an older sidecar reads as a session that
// ended (renewed false). Another sidecar's listings, on one stream kept
// open, come whole and leave nothing charged once read; the flooder's
// come again once its connection is gone.
func TestKeepAliveListingsAreChargedUntilWritten(t *testing.T) {
	p := newTestPKI(t)
	audit := newLineLog()
	cfg := fastConfig(t, t.TempDir())
	cfg.TLS = p.conf(pki.RoleGrantor, cfg.NodeID)
	cfg.Audit = audit.logger()
	n := start(t, cfg, true)
	lim := DefaultLimits()
	flooder := dialWith(t, n.RPCAddr(), p.conf(pki.RoleSidecar, "flooder").ClientCredentials())
	honest := dialWith(t, n.RPCAddr(), p.conf(pki.RoleSidecar, "honest").ClientCredentials())
	// Fewer unread calls than the flooder's calls (64): each stays
	// charged to them until its answer is written, and the flooder's own
	// keepalive below must pass the tap (TestUnreadAnswersStayCharged
	// checks that limit).
	const grants, calls = 2000, 48
	pad := strings.Repeat("x", 200)
	tokens := holdGrants(t, flooder, "flood", grants, pad)
	honestTokens := holdGrants(t, honest, "honest", 100, pad)
	first := keepAliveOnce(t, flooder, "flood", 1)
	if !first.Renewed || !first.Listed || len(first.Leases) != grants {
		t.Fatalf("the flooder's keepalive before its flood: renewed %v, listed %v with %d grants", first.Renewed, first.Listed, len(first.Leases))
	}
	t.Logf("one listing of %d grants: %d KiB", grants, proto.Size(first)>>10)

	before := liveHeap()
	h := dialH2(t, n.RPCAddr(), p.conf(pki.RoleSidecar, "flooder"))
	answers := readAnswers(h) // reads, never opens a window
	var ids []uint32
	for i := range calls {
		ids = append(ids, h.call(grantorpb.Grantor_KeepAlive_FullMethodName, &grantorpb.KeepAliveRequest{Session: "flood", Batch: uint64(i + 1),
			Sessions: []*grantorpb.SessionRenewal{{Session: "flood", TtlNs: int64(time.Hour), LeaseSetVersion: 1}}}))
	}
	answers.wait(t, ids)
	grew := liveHeap() - before
	queued := queuedOf(n, "flooder")
	t.Logf("%d unread keepalives listing %d grants: live heap +%d KiB, %d KiB queued (queued_bytes %d KiB)",
		calls, grants, grew>>10, queued>>10, lim.QueuedBytes>>10)
	// What is charged: listings within the limit, and the small answers
	// of those withheld (charged whatever the limit: they are sent anyway).
	if max := lim.QueuedBytes + calls*256; queued > max {
		t.Fatalf("%d bytes charged to the flooder, past its queued_bytes %d and the withheld answers", queued, lim.QueuedBytes)
	}
	if bound := int64(3 * lim.QueuedBytes); grew > bound {
		t.Fatalf("the leader's live heap grew %d MiB under the flood, more than %d MiB (queued_bytes %d MiB)", grew>>20, bound>>20, lim.QueuedBytes>>20)
	}
	audit.wait(t, "event=refused", "name=flooder", "call=KeepAlive", "withheld", "queued_bytes")

	// The flooder's own keepalive, on another connection: withheld,
	// which an older sidecar, that knows no withheld, reads as not
	// renewed, nothing listed.
	if r := keepAliveOnce(t, flooder, "flood", 1); !r.Withheld || r.Renewed || r.Listed || len(r.Leases) != 0 {
		t.Fatalf("the flooder's keepalive during its flood: %v, want withheld, not renewed, nothing listed", r)
	}
	// The honest sidecar, on one stream: listed whole, renewed, and its
	// answers leave nothing charged once read, the stream still open.
	ka, err := honest.KeepAlive(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		digest := uint64(1) // differs: listed
		if i%2 == 1 {
			digest = grantorpb.LeaseSetDigest(honestTokens)
		}
		if err := ka.Send(&grantorpb.KeepAliveRequest{Session: "honest", Batch: uint64(i + 1), Sessions: []*grantorpb.SessionRenewal{
			{Session: "honest", TtlNs: int64(time.Hour), LeaseSetVersion: digest}}}); err != nil {
			t.Fatal(err)
		}
		resp, err := ka.Recv()
		if err != nil {
			t.Fatal(err)
		}
		r := resp.Sessions[0]
		if !r.Renewed || r.Withheld || r.Listed != (i%2 == 0) || (r.Listed && len(r.Leases) != len(honestTokens)) {
			t.Fatalf("the honest sidecar's keepalive %d: renewed %v, withheld %v, listed %v with %d grants", i, r.Renewed, r.Withheld, r.Listed, len(r.Leases))
		}
	}
	waitQueued(t, n, "honest", 0)
	ka.CloseSend()

	// The flood's connection closes: its answers are given back, and the
	// flooder's listing comes whole again.
	h.conn.Close()
	waitQueued(t, n, "flooder", 0)
	if r := keepAliveOnce(t, flooder, "flood", 1); !r.Renewed || !r.Listed || len(r.Leases) != len(tokens) || r.LeaseSetVersion != grantorpb.LeaseSetDigest(tokens) {
		t.Fatalf("the flooder's keepalive after its flood: renewed %v, listed %v with %d grants, want all %d", r.Renewed, r.Listed, len(r.Leases), grants)
	}
}
