package grantor

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
)

// What a Release under a session that never existed (issue 21's flood
// (c)) costs the grantor, over mutual TLS from a sidecar certificate,
// audited, 8 callers per CPU at once: answered (its identity without an
// unchanged_calls_per_sec limit), and refused at the edge once that
// limit's bucket is empty. Allocations include the client's, in the same
// process; a memory profile tells the two apart:
//
//	go test -run '^$' -bench BenchmarkReleaseUnknownSession -benchmem -memprofile mem.out ./grantor
func BenchmarkReleaseUnknownSession(b *testing.B) {
	cfg := fastConfig(b, b.TempDir())
	p := newTestPKI(b)
	cfg.TLS = p.conf(pki.RoleGrantor, cfg.NodeID)
	cfg.Audit = slog.New(slog.NewJSONHandler(io.Discard, nil))
	answered, refused := DefaultLimits(), DefaultLimits()
	answered.UnchangedCalls, refused.UnchangedCalls = 0, 1
	cfg.Limits.Identities = map[string]Limits{"sidecar/answered": answered, "sidecar/refused": refused}
	n := start(b, cfg, true)
	lease := strings.Repeat("n", 250)
	for _, who := range []string{"answered", "refused"} {
		b.Run(who, func(b *testing.B) {
			c := dialWith(b, n.RPCAddr(), p.conf(pki.RoleSidecar, who).ClientCredentials())
			want := codes.OK
			if who == "refused" {
				want = codes.ResourceExhausted
				// Empty its bucket.
				_, _ = c.Release(b.Context(), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: "never", Seq: 1}, Lease: lease, Owner: "o", Token: 1})
			}
			b.SetParallelism(8)
			b.ReportAllocs()
			var workers atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				w := workers.Add(1)
				for i := 0; pb.Next(); i++ {
					_, err := c.Release(b.Context(), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: fmt.Sprintf("never-%d-%d", w, i), Seq: 1},
						Lease: lease, Owner: "o", Token: 1})
					// The refused one's bucket earns a token a second.
					if got := status.Code(err); got != want && (want == codes.OK || got != codes.OK) {
						b.Fatalf("Release: %v, want %v", err, want)
					}
				}
			})
		})
	}
}
