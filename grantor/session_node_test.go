package grantor

import (
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// Version 5 of the contract on a real node: a keepalive renews whole
// sessions; the reply lists a session's leases only when the holder's
// digest differs; a release hands the lease to the first waiter in the
// same raft entry.
func TestNodeSessionKeepAliveAndHandoff(t *testing.T) {
	ev := newEventLog()
	n := start(t, fastConfig(t, t.TempDir()), true, func(n *Node) { n.lessor.hook = ev.add })
	c := n.client
	var tokens []uint64
	for i, name := range []string{"a", "b", "c"} {
		tokens = append(tokens, mustAcquire(t, c, acqReq("s1", uint64(i+1), name)).Token)
	}
	ka, err := c.KeepAlive(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ka.CloseSend()
	renew := func(batch uint64, digest uint64) *grantorpb.SessionRenewed {
		t.Helper()
		if err := ka.Send(&grantorpb.KeepAliveRequest{Session: "s1", Batch: batch, Sessions: []*grantorpb.SessionRenewal{
			{Session: "s1", TtlNs: int64(10 * time.Second), LeaseSetVersion: digest}}}); err != nil {
			t.Fatal(err)
		}
		r, err := ka.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.Batch != batch || len(r.Sessions) != 1 || r.GrantorTimeNs == 0 {
			t.Fatalf("keepalive reply: %v", r)
		}
		return r.Sessions[0]
	}
	if s := renew(1, grantorpb.LeaseSetDigest(tokens)); !s.Renewed || s.Listed || len(s.Leases) != 0 || s.TtlNs != int64(10*time.Second) {
		t.Fatalf("renewal with the right digest: %v", s)
	}
	s := renew(2, grantorpb.LeaseSetDigest(tokens[:2]))
	if !s.Renewed || !s.Listed || len(s.Leases) != 3 || s.LeaseSetVersion != grantorpb.LeaseSetDigest(tokens) {
		t.Fatalf("renewal with a stale digest: %v", s)
	}
	for _, l := range s.Leases {
		if l.Owner != "o" || l.TtlNs != int64(10*time.Second) {
			t.Fatalf("listed lease %v", l)
		}
	}

	// A waiter on a; the release of a grants it in the same entry.
	m := ev.mark()
	waiting := make(chan *grantorpb.AcquireResponse, 1)
	go func() {
		req := acqReq("s2", 1, "a")
		req.WaitNs = int64(time.Minute)
		r, err := c.Acquire(tctx(t), req)
		if err != nil {
			t.Error(err)
		}
		waiting <- r
	}()
	ev.wait(t, m, "the waiter queued", func(e testEvent) bool { return e.what == "queued" && e.lease == "a" })
	// The raft log's last index: the waiter's first (refused) attempt is
	// in it, as it was applied before the waiter queued.
	before, err := n.wal.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := c.Release(tctx(t), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: "s1", Seq: 4}, Lease: "a", Owner: "o", Token: tokens[0]})
	if err != nil || !rel.Released {
		t.Fatalf("release: %v %v", rel, err)
	}
	w := <-waiting
	if w == nil || !w.Granted || w.Token != tokens[2]+1 {
		t.Fatalf("waiter: %v, want granted with token %d", w, tokens[2]+1)
	}
	after, err := n.wal.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if after-before != 1 {
		t.Fatalf("%d raft entries for a release and its handoff, want 1", after-before)
	}
}
