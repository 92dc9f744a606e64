package grantor

import (
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/internal/groupwrite"
)

// gateWriter is an io.Writer whose writes block while it is shut.
type gateWriter struct {
	mu      sync.Mutex
	shut    chan struct{} // nil: open
	entered chan struct{} // closed when a write blocks
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	shut, entered := g.shut, g.entered
	g.mu.Unlock()
	if shut != nil {
		select {
		case <-entered:
		default:
			close(entered)
		}
		<-shut
	}
	return len(p), nil
}

// Review of 2026-12-03 (701ed86, lane review): an audit sink that stops
// taking lines (a full disk that blocks, a FIFO nobody reads) holds up the
// calls whose lines wait for it (a Release here), never the keepalives:
// renewals are not audited and do not wait on the audit's writer.
func TestBlockedAuditSinkDoesNotHoldUpKeepAlives(t *testing.T) {
	gw := &gateWriter{}
	w := groupwrite.New(gw)
	cfg := fastConfig(t, t.TempDir())
	cfg.Audit = slog.New(slog.NewTextHandler(w, nil))
	cfg.AuditFlush = w.Flush
	n := start(t, cfg, true)
	// Terms of an hour: the session must still stand at the keepalives,
	// however slow the machine.
	long := func(r *grantorpb.AcquireRequest) *grantorpb.AcquireRequest { r.TtlNs = int64(time.Hour); return r }
	a := mustAcquire(t, n.client, long(acqReq("s1", 1, "held")))
	b := mustAcquire(t, n.client, long(acqReq("s1", 2, "other")))

	shut, entered := make(chan struct{}), make(chan struct{})
	gw.mu.Lock()
	gw.shut, gw.entered = shut, entered
	gw.mu.Unlock()
	released := make(chan error, 1)
	go func() {
		_, err := n.client.Release(tctx(t), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: "s1", Seq: 3},
			Lease: "other", Owner: "o", Token: b.Token})
		released <- err
	}()
	<-entered // the release's audit line is stuck in the sink

	ka, err := n.client.KeepAlive(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ka.CloseSend()
	for batch := range uint64(3) {
		if err := ka.Send(&grantorpb.KeepAliveRequest{Session: "s1", Batch: batch + 1, Sessions: []*grantorpb.SessionRenewal{
			{Session: "s1", TtlNs: int64(time.Hour), LeaseSetVersion: grantorpb.LeaseSetDigest([]uint64{a.Token})}}}); err != nil {
			t.Fatal(err)
		}
		r, err := ka.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Sessions) != 1 || !r.Sessions[0].Renewed {
			t.Fatalf("keepalive while the audit sink is blocked: %v", r)
		}
	}
	select {
	case err := <-released:
		t.Fatalf("the release was answered (%v) before its audit line was written", err)
	default:
	}
	close(shut)
	if err := <-released; err != nil {
		t.Fatal(err)
	}
}

// A failing audit trail (a full disk) loses the lines of the calls
// answered meanwhile, as slog drops its writes' errors; the node's log
// says when it starts failing and when it works again, with how many
// lines were lost (review of 2026-12-03: before, nothing said so).
func TestFailingAuditTrailIsToldInTheNodeLog(t *testing.T) {
	var mu sync.Mutex
	var fail error
	w := groupwrite.New(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail != nil {
			return 0, fail
		}
		return len(p), nil
	}))
	log := newLineLog()
	cfg := fastConfig(t, t.TempDir())
	cfg.Logger = log.logger()
	cfg.Audit = slog.New(slog.NewTextHandler(w, nil))
	cfg.AuditFlush = w.Flush
	n := start(t, cfg, true)
	mustAcquire(t, n.client, acqReq("s1", 1, "a"))
	mu.Lock()
	fail = errors.New("no space left on device")
	mu.Unlock()
	mustAcquire(t, n.client, acqReq("s1", 2, "b"))
	mustAcquire(t, n.client, acqReq("s1", 3, "c"))
	log.wait(t, "audit trail cannot be written", "no space left on device")
	mu.Lock()
	fail = nil
	mu.Unlock()
	mustAcquire(t, n.client, acqReq("s1", 4, "d"))
	log.wait(t, "audit trail is written again", "lines_lost=2")
}
