package pgfence_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/leaseside/leaseside/fence/pgfence"
)

// BenchmarkFenceCost measures what the fence costs a write: each
// iteration makes one write through leaseside.fence and the same write
// without it (a transaction that updates one row), in turn, on the same
// connection of the same server, and reports the writes per second of
// each and their ratio; same-token is one holder's writes (the fence
// records nothing new), new-token a new holder's every time (it raises
// the lease's highest). The server runs without fsync (internal/stores),
// so the ratio is the fence's own work, not hidden behind a disk flush.
func BenchmarkFenceCost(b *testing.B) {
	b.Run("same-token", func(b *testing.B) { benchmarkFenceCost(b, func(int) uint64 { return 1 }) })
	b.Run("new-token", func(b *testing.B) { benchmarkFenceCost(b, func(i int) uint64 { return uint64(i) }) })
}

func benchmarkFenceCost(b *testing.B, token func(int) uint64) {
	db, _ := testDB(b)
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `INSERT INTO register VALUES ('jobs/bench', '')`); err != nil {
		b.Fatal(err)
	}
	const update = `UPDATE register SET value = $2 WHERE name = $1`
	var fenced, plain time.Duration
	b.ResetTimer()
	for i := range b.N {
		v := fmt.Sprint(i)
		t0 := time.Now()
		if err := pgfence.Do(ctx, db, "jobs/bench", token(i), func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, update, "jobs/bench", v)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, update, "jobs/bench", v); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		fenced, plain = fenced+t1.Sub(t0), plain+time.Since(t1)
	}
	b.ReportMetric(float64(b.N)/fenced.Seconds(), "fenced-writes/s")
	b.ReportMetric(float64(b.N)/plain.Seconds(), "plain-writes/s")
	b.ReportMetric(plain.Seconds()/fenced.Seconds(), "fenced/plain")
}
