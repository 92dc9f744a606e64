package pgfence_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leaseside/leaseside/fence"
	"github.com/leaseside/leaseside/fence/pgfence"
)

// refusedOrRetry says err is a stale token refusal or a serialization
// failure (the transaction is retried, and then refused).
func refusedOrRetry(err error) bool {
	var pe *pgconn.PgError
	return errors.Is(err, fence.ErrStaleToken) || errors.As(err, &pe) && pe.Code == "40001"
}

// A lease's first fence races an older token's transaction that started
// before it, at each isolation level: the older token is refused (or its
// transaction fails to serialize) whether the newer one's row committed
// after the older's snapshot or was still uncommitted when the older
// fenced. And a fence whose transaction rolls back records nothing: the
// write it guarded never happened.
func TestFirstFenceRaceAndRollback(t *testing.T) {
	db, _ := testDB(t)
	ctx := context.Background()
	for _, iso := range []sql.IsolationLevel{sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable} {
		lease := "first/committed/" + iso.String()
		old, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: iso})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := old.ExecContext(ctx, `SELECT count(*) FROM register`); err != nil { // the snapshot
			t.Fatal(err)
		}
		if err := write(ctx, db, lease, 5, "new"); err != nil {
			t.Fatal(err)
		}
		if err := pgfence.Fence(ctx, old, lease, 3); !refusedOrRetry(err) {
			t.Errorf("%s: token 3 after a committed 5: %v", iso, err)
		}
		old.Rollback()

		lease = "first/uncommitted/" + iso.String()
		newer, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := pgfence.Fence(ctx, newer, lease, 5); err != nil {
			t.Fatal(err)
		}
		old, err = db.BeginTx(ctx, &sql.TxOptions{Isolation: iso})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := old.ExecContext(ctx, `SELECT count(*) FROM register`); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- pgfence.Fence(ctx, old, lease, 3) }()
		waitForALockWait(t, db)
		if err := newer.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !refusedOrRetry(err) {
			t.Errorf("%s: token 3 waiting on an uncommitted 5: %v", iso, err)
		}
		old.Rollback()
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pgfence.Fence(ctx, tx, "first/rollback", 10); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	var h int64
	if err := db.QueryRow(`SELECT leaseside.highest('first/rollback')`).Scan(&h); err != nil || h != 0 {
		t.Fatalf("a rolled back fence left highest %d (%v)", h, err)
	}
}

// waitForALockWait returns once some session of db waits for a lock.
func waitForALockWait(t *testing.T, db *sql.DB) {
	t.Helper()
	for {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
}

// A stale refusal names the lease's highest even when the lease's name
// itself reads like the message's "highest seen N".
func TestStaleErrorHighestNotFromTheLeaseName(t *testing.T) {
	db, _ := testDB(t)
	ctx := context.Background()
	lease := "x: highest seen 1"
	if err := write(ctx, db, lease, 10, "new"); err != nil {
		t.Fatal(err)
	}
	var st *fence.StaleTokenError
	if err := write(ctx, db, lease, 3, "old"); !errors.As(err, &st) || st.Highest != 10 {
		t.Fatalf("token 3 after 10: %v, want a StaleTokenError naming 10", err)
	}
}
