package redisfence_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leaseside/leaseside/fence/redisfence"
)

// BenchmarkFenceCost measures what the fence costs a write: each
// iteration makes one SET through leaseside_set and the same plain SET,
// in turn, on the same connection of the same server, and reports the
// writes per second of each and their ratio; same-token is one holder's
// writes (the token key is read, not written), new-token a new holder's
// every time (the token key is written too).
func BenchmarkFenceCost(b *testing.B) {
	b.Run("same-token", func(b *testing.B) { benchmarkFenceCost(b, func(int) uint64 { return 1 }) })
	b.Run("new-token", func(b *testing.B) { benchmarkFenceCost(b, func(i int) uint64 { return uint64(i) }) })
}

func benchmarkFenceCost(b *testing.B, token func(int) uint64) {
	c := testRedis(b)
	ctx := context.Background()
	var fenced, plain time.Duration
	b.ResetTimer()
	for i := range b.N {
		v := fmt.Sprint(i)
		t0 := time.Now()
		if err := redisfence.Set(ctx, c, "bench", v, "jobs/bench", token(i)); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := c.Set(ctx, "bench", v, 0).Err(); err != nil {
			b.Fatal(err)
		}
		fenced, plain = fenced+t1.Sub(t0), plain+time.Since(t1)
	}
	b.ReportMetric(float64(b.N)/fenced.Seconds(), "fenced-writes/s")
	b.ReportMetric(float64(b.N)/plain.Seconds(), "plain-writes/s")
	b.ReportMetric(plain.Seconds()/fenced.Seconds(), "fenced/plain")
}
