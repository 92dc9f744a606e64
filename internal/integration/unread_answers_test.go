package integration

import (
	"context"
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
	"github.com/leaseside/leaseside/internal/attack"
)

// Issue 21, found by lane k2, on a real TLS grantor: one sidecar
// certificate sends Members calls on its 32 connections, as many as a
// connection may carry at once (MaxConcurrentStreams), one at a time,
// and opens no flow-control window, so that no answer is ever written
// (attack.HoldAnswers). Each call's stream and answer stayed at the
// grantor after its handler returned, when the call was no longer
// counted in the account's calls: 32,000 of them, outside the bound
// docs/limits.md states. Now a call stays charged to its calls until its
// stream ends at the transport: past 64 the flood's calls are refused at
// the tap, the leader's live heap stays within what the account allows,
// and other sidecars keep renewing and acquiring (one throughout, one
// while the flood's answers are held).
func TestUnreadAnswersFloodIsBounded(t *testing.T) {
	p := newClusterPKI(t)
	c := newLoopbackCluster(t, 1)
	n := c.nodes[0]
	p.cert("grantor", n.id, false)
	n.tlsDir, n.keyFile = p.dir, p.key
	n.extra = []string{"--metrics-addr", "127.0.0.1:0"}
	c.startAll()
	maddr := servedMetricsAddr(t, n.proc)
	c.currentLeader()
	addr := n.rpcAddr()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	victim := attack.Victim(ctx, grpcDialer(t, p.creds("sidecar", "victim")), addr, "victim-1", 3*time.Second, 200*time.Millisecond)

	// The heap that survived the leader's last collection (liveHeap);
	// the flood's 32,000 calls make many.
	live := func() int64 { return liveHeap(t, maddr) }
	const refusedCalls = `leaseside_grantor_account_refused_total{limit="calls"}`
	before, refused0 := live(), metric(t, maddr, refusedCalls)
	p.creds("sidecar", "flood")
	cfg := p.configurator("sidecar", "flood").ClientConfig(pki.ALPNgRPC, pki.Peer{Roles: []string{pki.RoleGrantor}})
	u, err := attack.HoldAnswers(ctx, addr, cfg, grantorpb.Grantor_Members_FullMethodName, &grantorpb.MembersRequest{}, 32, grantor.DefaultMaxConcurrentStreams)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	grew, refused := live()-before, metric(t, maddr, refusedCalls)-refused0
	t.Logf("%d calls on %d connections, one at a time, answers never written: %d kept, %d refused (%.0f at the account's calls); leader's live heap +%d KiB",
		u.Calls, u.Conns, u.Kept, u.Refused, refused, grew>>10)
	if limit := int64(grantor.DefaultLimits().Calls); u.Kept > limit {
		t.Errorf("the leader keeps %d unsent answers of one certificate, more than its %d calls", u.Kept, limit)
	}
	// What the account allows for these: 64 calls (a Members answer and
	// its stream each) and 32 connections (~80 KiB each).
	if grew > 16<<20 {
		t.Errorf("the leader's live heap grew %d MiB for answers nobody reads, more than one identity's calls and connections allow", grew>>20)
	}

	// With the flood's answers still held, another sidecar acquires and
	// renews.
	honest := grpcClient(t, addr, p.creds("sidecar", "honest"))
	a, err := honest.Acquire(ctx, &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: "honest-1", Seq: 1},
		Lease: "honest/x", Owner: "o", TtlNs: int64(time.Minute)})
	if err != nil || !a.Granted {
		t.Fatalf("another sidecar's acquire during the flood: %v %v", a, err)
	}
	ka, err := honest.KeepAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ka.Send(&grantorpb.KeepAliveRequest{Session: "honest-1", Batch: 1, Sessions: []*grantorpb.SessionRenewal{
		{Session: "honest-1", TtlNs: int64(time.Minute), LeaseSetVersion: grantorpb.LeaseSetDigest([]uint64{a.Token})}}}); err != nil {
		t.Fatal(err)
	}
	if r, err := ka.Recv(); err != nil || len(r.Sessions) != 1 || !r.Sessions[0].Renewed {
		t.Fatalf("another sidecar's keepalive during the flood: %v %v", r, err)
	}

	cancel()
	st := <-victim
	t.Logf("victim: %d renewals, %d acquires, slowest %v, failures %v", st.Renewals, st.Acquires, st.Slowest, st.Failures)
	if len(st.Failures) > 0 {
		t.Errorf("the other sidecar failed during the flood: %v", st.Failures)
	}
}
