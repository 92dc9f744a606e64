package pgfence_test

import (
	"context"
	"database/sql"
	"errors"
	"log"
	"os"
	"strconv"

	_ "github.com/jackc/pgx/v5/stdlib" // or any database/sql driver of PostgreSQL

	"github.com/leaseside/leaseside/fence"
	"github.com/leaseside/leaseside/fence/pgfence"
)

// A program run by `leaseside run jobs/report` writes the report under
// its lease's token: the fence and the write commit together, or a newer
// holder's token refuses both.
func ExampleDo() {
	token, err := strconv.ParseUint(os.Getenv("LEASESIDE_TOKEN"), 10, 64)
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	err = pgfence.Do(ctx, db, os.Getenv("LEASESIDE_LEASE"), token, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE report SET body = $1 WHERE name = 'daily'`, "rows: 42")
		return err
	})
	var stale *fence.StaleTokenError
	if errors.As(err, &stale) {
		log.Fatalf("token %d is below %d: this holder lost the lease", stale.Token, stale.Highest)
	} else if err != nil {
		log.Fatal(err)
	}
}
