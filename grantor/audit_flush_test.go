package grantor

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/internal/groupwrite"
)

// Every audit line is written before the call it records is answered,
// also when the audit's writer holds lines back to write those of calls
// answered together at once (Config.AuditFlush, internal/groupwrite, as
// `leaseside grantor` runs it): when an Acquire or a Release returns, its
// line is in the log already. 16 owners call at once, so that lines meet
// in the writer.
func TestAuditLineIsWrittenBeforeTheReply(t *testing.T) {
	out := newLineLog()
	w := groupwrite.New(lineWriter{out})
	cfg := fastConfig(t, t.TempDir())
	cfg.Audit = slog.New(slog.NewTextHandler(w, nil))
	cfg.AuditFlush = w.Flush
	n := start(t, cfg, true)
	written := func(subs ...string) bool {
		out.mu.Lock()
		defer out.mu.Unlock()
		for _, w := range out.lines { // a write holds one line or several
			for l := range strings.SplitSeq(w, "\n") {
				if containsAll(l, subs) {
					return true
				}
			}
		}
		return false
	}
	var wg sync.WaitGroup
	for o := range 16 {
		wg.Go(func() {
			session, lease := fmt.Sprintf("s%d", o), fmt.Sprintf("x%d", o)
			for i := range uint64(5) {
				a, err := n.client.Acquire(tctx(t), acqReq(session, 2*i+1, lease))
				if err != nil || !a.Granted {
					t.Errorf("acquire: %v %v", a, err)
					return
				}
				if !written("event=grant", "lease="+lease, fmt.Sprintf("token=%d ", a.Token)) {
					t.Errorf("acquire of %s answered (token %d) before its audit line was written", lease, a.Token)
				}
				r, err := n.client.Release(tctx(t), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: session, Seq: 2*i + 2},
					Lease: lease, Owner: "o", Token: a.Token})
				if err != nil || !r.Released {
					t.Errorf("release: %v %v", r, err)
					return
				}
				if !written("event=release", "lease="+lease, fmt.Sprintf("token=%d ", a.Token)) {
					t.Errorf("release of %s:%d answered before its audit line was written", lease, a.Token)
				}
			}
		})
	}
	wg.Wait()
}
