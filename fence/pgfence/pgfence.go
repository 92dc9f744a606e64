// Package pgfence fences writes to PostgreSQL with leaseside's tokens: the
// SQL it ships (SQL, installed once per database by Install, `leaseside
// fence postgres install URL` or `psql -f`) adds leaseside.fence(lease,
// token), which a write calls in its own transaction; a token below the
// highest the database has recorded for the lease is refused with SQLSTATE
// LS001, which aborts the transaction and the write with it.
//
// pgfence works through database/sql and imports no driver: the program
// brings its own (pgx's stdlib, lib/pq). A program on pgx's own API runs
// Query in its transaction and passes the error to Check.
package pgfence

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"

	"github.com/leaseside/leaseside/fence"
)

// SQL is leaseside.sql: the schema leaseside, its table of the highest
// token per lease, and the functions leaseside.fence and
// leaseside.highest. Running it again is harmless.
//
//go:embed leaseside.sql
var SQL string

// Query fences a write when run in its transaction with the lease ($1)
// and the token ($2, a bigint); it returns the lease's previous highest
// token (0: none).
const Query = "SELECT leaseside.fence($1, $2)"

// StaleState is the SQLSTATE leaseside.fence raises for a token below the
// lease's highest.
const StaleState = "LS001"

// ErrTokenRange is returned for a token PostgreSQL's bigint cannot hold.
var ErrTokenRange = errors.New("pgfence: token above 9223372036854775807 (bigint)")

// Execer runs SQL: a *sql.DB, *sql.Conn or *sql.Tx.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Install runs SQL on db (the driver must take several statements in one
// Exec without arguments, as pgx's stdlib and lib/pq do).
func Install(ctx context.Context, db Execer) error {
	if _, err := db.ExecContext(ctx, SQL); err != nil {
		return fmt.Errorf("pgfence: installing leaseside.sql: %w", err)
	}
	return nil
}

// Fence runs leaseside.fence(lease, token) in tx. It returns nil when the
// token is at least the lease's highest (now recorded as the highest
// until tx ends), a *fence.StaleTokenError (errors.Is ErrStaleToken)
// naming both tokens when it is lower, or another error. Either error
// aborts tx: roll it back.
func Fence(ctx context.Context, tx *sql.Tx, lease string, token uint64) error {
	if token > math.MaxInt64 {
		return ErrTokenRange
	}
	var prev int64
	return Check(tx.QueryRowContext(ctx, Query, lease, int64(token)).Scan(&prev), lease, token)
}

// Do runs write in a transaction of db after fencing it with lease and
// token, and commits: the write and the token's record commit together or
// not at all. A stale token (a *fence.StaleTokenError) or an error of
// write rolls the transaction back; write is not called after a refusal.
func Do(ctx context.Context, db *sql.DB, lease string, token uint64, write func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := Fence(ctx, tx, lease, token); err != nil {
		return err
	}
	if err := write(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// sqlStater is the SQLSTATE of a driver's error (pgx's *pgconn.PgError,
// lib/pq's *pq.Error).
type sqlStater interface{ SQLState() string }

// highestRE finds the highest token in leaseside.fence's LS001 message:
// its last match, as the lease's name before it may read the same.
var highestRE = regexp.MustCompile(`highest seen ([0-9]+)`)

// Check turns the error of running Query for lease and token into what
// Fence returns: nil stays nil, an LS001 becomes a *fence.StaleTokenError,
// anything else is returned as it is.
func Check(err error, lease string, token uint64) error {
	var s sqlStater
	if err == nil || !errors.As(err, &s) || s.SQLState() != StaleState {
		return err
	}
	all := highestRE.FindAllStringSubmatch(err.Error(), -1)
	if all == nil {
		return fmt.Errorf("pgfence: stale token, and no highest in the message: %w", err)
	}
	m := all[len(all)-1]
	highest, perr := strconv.ParseUint(m[1], 10, 64)
	if perr != nil {
		return fmt.Errorf("pgfence: stale token, and a highest out of range: %w", err)
	}
	return &fence.StaleTokenError{Lease: lease, Token: token, Highest: highest}
}
