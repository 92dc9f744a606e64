package grantor

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// Issue 22.6 at the grantor: the requests of one keepalive stream are
// answered side by side. The first request's handling is held (the test
// hook blocks it after it joined the verify queue, before its reply goes
// out); the second, sent on the same stream after it, is answered while
// the first is still held, and then the first is answered too, each reply
// naming its batch. One session rides both (a sidecar that sent it again
// after giving up on the first): both renew it. Before, a stream's
// requests were answered one after another, and the second waited.
func TestKeepAliveStreamAnswersRequestsSideBySide(t *testing.T) {
	hold, held := make(chan struct{}), make(chan struct{})
	var pendings atomic.Int32
	n := start(t, fastConfig(t, t.TempDir()), true, func(n *Node) {
		n.lessor.hook = func(e testEvent) {
			if e.what == "pending" && pendings.Add(1) == 1 {
				close(held)
				<-hold
			}
		}
	})
	defer func() {
		select {
		case <-hold:
		default:
			close(hold)
		}
	}()
	c := n.client
	tok := mustAcquire(t, c, acqReq("s1", 1, "a")).Token
	ka, err := c.KeepAlive(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ka.CloseSend()
	send := func(batch uint64) {
		t.Helper()
		if err := ka.Send(&grantorpb.KeepAliveRequest{Batch: batch, Sessions: []*grantorpb.SessionRenewal{
			{Session: "s1", TtlNs: int64(10 * time.Second), LeaseSetVersion: grantorpb.TokenDigest(tok)}}}); err != nil {
			t.Fatal(err)
		}
	}
	recv := func(batch uint64) {
		t.Helper()
		r, err := ka.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.Batch != batch || len(r.Sessions) != 1 || !r.Sessions[0].Renewed || r.Sessions[0].Listed {
			t.Fatalf("reply %v, want batch %d renewing s1", r, batch)
		}
	}
	send(1)
	select {
	case <-held:
	case <-tctx(t).Done():
		t.Fatal("batch 1 never joined the verify queue")
	}
	send(2)
	recv(2) // while batch 1 is held
	close(hold)
	recv(1)
}
