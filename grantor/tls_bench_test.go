package grantor

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
)

// What TLS adds to the grantor's calls, in one process (client and
// grantor), as CPU per call: a keepalive of 100 leases (the leader's
// hottest path, no raft entry) and an acquire with its release (two raft
// entries, fsync'd), each in clear text and over mutual TLS. Run both
// in one go so they share the machine's load:
//
//	go test -run '^$' -bench BenchmarkTLSCost -count 5 ./grantor
func BenchmarkTLSCost(b *testing.B) {
	for _, mode := range []string{"plain", "tls"} {
		cfg := fastConfig(b, b.TempDir())
		var creds credentials.TransportCredentials
		if mode == "tls" {
			p := newTestPKI(b)
			cfg.TLS = p.conf(pki.RoleGrantor, cfg.NodeID)
			creds = p.conf(pki.RoleSidecar, "bench").ClientCredentials()
		}
		n := start(b, cfg, true)
		if creds == nil {
			creds = n.dialCredentials()
		}
		c := dialWith(b, n.RPCAddr(), creds)

		// -count runs each sub-benchmark again on the same node: every run
		// takes sessions and names of its own.
		run := 0
		b.Run("keepalive100/"+mode, func(b *testing.B) {
			run++
			session := fmt.Sprintf("ka-%s-%d", mode, run)
			ka, err := c.KeepAlive(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			req := &grantorpb.KeepAliveRequest{Session: session}
			for i := range 100 {
				name := fmt.Sprintf("bench/%s-%03d", session, i)
				a, err := c.Acquire(b.Context(), &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: session, Seq: uint64(i + 1)},
					Lease: name, Owner: "o", TtlNs: int64(time.Hour)})
				if err != nil || !a.Granted {
					b.Fatalf("acquire: %v %v", a, err)
				}
				req.Leases = append(req.Leases, &grantorpb.LeaseRef{Lease: name, Token: a.Token, TtlNs: int64(time.Hour)})
			}
			cpu := cpuMeter(b)
			for i := 0; b.Loop(); i++ {
				req.Batch = uint64(i + 1)
				if err := ka.Send(req); err != nil {
					b.Fatal(err)
				}
				resp, err := ka.Recv()
				if err != nil || len(resp.Renewed) != 100 {
					b.Fatalf("keepalive: %v %v", resp, err)
				}
			}
			cpu()
		})
		b.Run("acquire-release/"+mode, func(b *testing.B) {
			run++
			session := fmt.Sprintf("ar-%s-%d", mode, run)
			cpu := cpuMeter(b)
			for i := 0; b.Loop(); i++ {
				seq := uint64(2*i + 1)
				a, err := c.Acquire(b.Context(), &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: session, Seq: seq},
					Lease: "bench/ar", Owner: "o", TtlNs: int64(time.Minute)})
				if err != nil || !a.Granted {
					b.Fatalf("acquire: %v %v", a, err)
				}
				if _, err := c.Release(b.Context(), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: session, Seq: seq + 1},
					Lease: "bench/ar", Owner: "o", Token: a.Token}); err != nil {
					b.Fatal(err)
				}
			}
			cpu()
		})
	}
}

// cpuMeter reports, when its result is called, the process's CPU time
// (user and system) per iteration since it was called.
func cpuMeter(b *testing.B) func() {
	used := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := used()
	return func() {
		b.ReportMetric(float64((used()-start).Microseconds())/float64(b.N), "cpu-µs/op")
	}
}
