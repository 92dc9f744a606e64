package pgfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/leaseside/leaseside/fence"
	"github.com/leaseside/leaseside/fence/pgfence"
	"github.com/leaseside/leaseside/internal/stores"
)

// testDB starts a PostgreSQL server, installs the fence (twice: a second
// install is harmless) and a register table, and opens it.
func testDB(t testing.TB) (*sql.DB, string) {
	t.Helper()
	dsn, _ := stores.StartPostgres(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	for range 2 {
		if err := pgfence.Install(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE register (name text PRIMARY KEY, value text NOT NULL);
		CREATE TABLE writes (id bigserial PRIMARY KEY, name text NOT NULL, token bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return db, dsn
}

// write sets name's value in the register with a fenced write.
func write(ctx context.Context, db *sql.DB, lease string, token uint64, value string) error {
	return pgfence.Do(ctx, db, lease, token, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO register VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = excluded.value`, lease, value)
		return err
	})
}

func value(t *testing.T, db *sql.DB, name string) string {
	t.Helper()
	var v string
	if err := db.QueryRow(`SELECT value FROM register WHERE name = $1`, name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// A token equal to or above the lease's highest is accepted and becomes
// the highest; a lower one is refused with both tokens named, in Go and
// in PostgreSQL's own message, and changes nothing.
func TestFenceAcceptsHigherOrEqualRefusesLower(t *testing.T) {
	db, _ := testDB(t)
	ctx := context.Background()
	steps := []struct {
		name    string
		lease   string
		token   uint64
		highest uint64 // refused: the highest named
	}{
		{name: "first", lease: "jobs/a", token: 5},
		{name: "equal", lease: "jobs/a", token: 5},
		{name: "higher", lease: "jobs/a", token: 9},
		{name: "lower", lease: "jobs/a", token: 6, highest: 9},
		{name: "zero", lease: "jobs/a", token: 0, highest: 9},
		{name: "another lease is separate", lease: "jobs/b", token: 1},
		{name: "largest bigint", lease: "jobs/c", token: math.MaxInt64},
		{name: "below the largest", lease: "jobs/c", token: math.MaxInt64 - 1, highest: math.MaxInt64},
	}
	for _, s := range steps {
		err := write(ctx, db, s.lease, s.token, s.name)
		if s.highest == 0 {
			if err != nil {
				t.Fatalf("%s: token %d refused: %v", s.name, s.token, err)
			}
			if v := value(t, db, s.lease); v != s.name {
				t.Fatalf("%s: value %q after an accepted write", s.name, v)
			}
			continue
		}
		var st *fence.StaleTokenError
		if !errors.As(err, &st) || !errors.Is(err, fence.ErrStaleToken) {
			t.Fatalf("%s: token %d: %v, want a stale token error", s.name, s.token, err)
		}
		if *st != (fence.StaleTokenError{Lease: s.lease, Token: s.token, Highest: s.highest}) {
			t.Fatalf("%s: %+v", s.name, *st)
		}
		if v := value(t, db, s.lease); v == s.name {
			t.Fatalf("%s: a refused write landed", s.name)
		}
	}
	// PostgreSQL's own error, as psql and Python see it.
	_, err := db.ExecContext(ctx, pgfence.Query, "jobs/a", 7)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "LS001" || pe.Message != "stale token 7 for lease 'jobs/a': highest seen 9" ||
		pe.Detail != "lease=jobs/a token=7 highest=9" {
		t.Fatalf("stale fence in SQL: %#v", err)
	}
	var h int64
	if err := db.QueryRow(`SELECT leaseside.highest('jobs/a')`).Scan(&h); err != nil || h != 9 {
		t.Fatalf("leaseside.highest = %d, %v", h, err)
	}
}

// Bad arguments are refused with a specific error: in Go a token bigint
// cannot hold, in SQL a NULL (22004), an empty or overlong name or a
// negative token (22023).
func TestFenceRefusesBadInput(t *testing.T) {
	db, _ := testDB(t)
	ctx := context.Background()
	if err := write(ctx, db, "x", math.MaxInt64+1, "v"); !errors.Is(err, pgfence.ErrTokenRange) {
		t.Fatalf("token 2^63: %v", err)
	}
	for _, c := range []struct {
		name  string
		lease any
		token any
		code  string
	}{
		{name: "null lease", lease: nil, token: 1, code: "22004"},
		{name: "null token", lease: "x", token: nil, code: "22004"},
		{name: "empty lease", lease: "", token: 1, code: "22023"},
		{name: "long lease", lease: strings.Repeat("x", 1025), token: 1, code: "22023"},
		{name: "negative token", lease: "x", token: -1, code: "22023"},
	} {
		_, err := db.ExecContext(ctx, pgfence.Query, c.lease, c.token)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != c.code {
			t.Errorf("%s: %v, want SQLSTATE %s", c.name, err, c.code)
		}
	}
}

// The write and its fence are atomic: a write made before a refused fence
// in the same transaction is undone with it.
func TestRefusedFenceUndoesTheWrite(t *testing.T) {
	db, _ := testDB(t)
	ctx := context.Background()
	if err := write(ctx, db, "jobs/a", 10, "new"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE register SET value = 'old' WHERE name = 'jobs/a'`); err != nil {
		t.Fatal(err)
	}
	if err := pgfence.Fence(ctx, tx, "jobs/a", 4); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("fence with token 4 after 10: %v", err)
	}
	if err := tx.Commit(); err == nil {
		t.Fatal("a transaction whose fence was refused committed")
	}
	if v := value(t, db, "jobs/a"); v != "new" {
		t.Fatalf("value %q: the write before the refused fence stayed", v)
	}
}

// A writer that is not the fence's owner may call it but cannot lower a
// lease's token by hand.
func TestWritersCannotLowerTheToken(t *testing.T) {
	db, dsn := testDB(t)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE ROLE writer LOGIN; GRANT ALL ON register TO writer`); err != nil {
		t.Fatal(err)
	}
	wdb, err := sql.Open("pgx", strings.Replace(dsn, "postgres@", "writer@", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer wdb.Close()
	if err := write(ctx, wdb, "jobs/a", 3, "w"); err != nil {
		t.Fatalf("writer's fenced write: %v", err)
	}
	if _, err := wdb.ExecContext(ctx, `UPDATE leaseside.tokens SET highest = 0`); err == nil {
		t.Fatal("a writer lowered the tokens by hand")
	}
	if err := write(ctx, wdb, "jobs/a", 2, "w"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("writer's stale write: %v", err)
	}
}

// Concurrent writers with interleaved tokens: every writer writes its
// token again and again while newer ones start; the writes the database
// committed, in commit order, never go back to an older token, and the
// register holds the newest token's value.
func TestConcurrentInterleavedWritersNeverGoBack(t *testing.T) {
	db, _ := testDB(t)
	db.SetMaxOpenConns(8)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const writers, each = 8, 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted, refused := 0, 0
	for w := 1; w <= writers; w++ {
		wg.Go(func() {
			for i := range each {
				// Writer w's tokens interleave with the others': w, w+8, ...
				token := uint64(w + writers*(i/4))
				err := pgfence.Do(ctx, db, "jobs/r", token, func(tx *sql.Tx) error {
					if _, err := tx.ExecContext(ctx, `INSERT INTO writes (name, token) VALUES ('jobs/r', $1)`, int64(token)); err != nil {
						return err
					}
					_, err := tx.ExecContext(ctx, `INSERT INTO register VALUES ('jobs/r', $1) ON CONFLICT (name) DO UPDATE SET value = excluded.value`, fmt.Sprint(token))
					return err
				})
				mu.Lock()
				switch {
				case err == nil:
					accepted++
				case errors.Is(err, fence.ErrStaleToken):
					refused++
				default:
					t.Error(err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	rows, err := db.QueryContext(ctx, `SELECT token FROM writes ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var last uint64
	n := 0
	for rows.Next() {
		var tok uint64
		if err := rows.Scan(&tok); err != nil {
			t.Fatal(err)
		}
		if tok < last {
			t.Fatalf("write %d has token %d after a write with token %d", n+1, tok, last)
		}
		last, n = tok, n+1
	}
	if n != accepted || accepted == 0 || refused == 0 {
		t.Fatalf("%d writes in the table, %d accepted, %d refused: want all accepted there, and some of each", n, accepted, refused)
	}
	if v := value(t, db, "jobs/r"); v != fmt.Sprint(last) {
		t.Fatalf("register holds %s, the last write's token is %d", v, last)
	}
	t.Logf("%d writes accepted, %d refused", accepted, refused)
}

// The shell (psql) and Python (psycopg2) examples, run as `leaseside run`
// runs them (LEASESIDE_LEASE and LEASESIDE_TOKEN in their environment):
// a token at least the highest writes, a lower one is refused with both
// tokens named, a non-zero exit, and the report unchanged.
func TestShellAndPythonExamples(t *testing.T) {
	db, dsn := testDB(t)
	if _, err := db.Exec(`CREATE TABLE report (name text PRIMARY KEY, body text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	clients, err := filepath.Abs("../../clients/python")
	if err != nil {
		t.Fatal(err)
	}
	examples := []struct {
		name, lease string
		argv        []string
	}{
		{name: "psql", lease: "jobs/sh", argv: []string{"../examples/report_postgres.sh"}},
		{name: "psycopg2", lease: "jobs/py", argv: []string{"/usr/bin/python3", "../examples/report_postgres.py"}},
	}
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			for _, step := range []struct {
				token string
				ok    bool
			}{{"5", true}, {"7", true}, {"7", true}, {"6", false}} {
				body := ex.name + " " + step.token
				cmd := exec.Command(ex.argv[0], append(ex.argv[1:], body)...)
				cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "LEASESIDE_LEASE="+ex.lease, "LEASESIDE_TOKEN="+step.token,
					"PYTHONPATH="+clients, "PYTHONDONTWRITEBYTECODE=1")
				out, err := cmd.CombinedOutput()
				if step.ok != (err == nil) {
					t.Fatalf("token %s: %v\n%s", step.token, err, out)
				}
				if !step.ok && !(strings.Contains(string(out), "stale token 6") && strings.Contains(string(out), "highest seen 7")) {
					t.Fatalf("token %s refused without naming both tokens:\n%s", step.token, out)
				}
				want := ex.name + " 7"
				if step.ok {
					want = body
				}
				var got string
				if err := db.QueryRow(`SELECT body FROM report`).Scan(&got); err != nil || got != want {
					t.Fatalf("after token %s the report holds %q (%v), want %q", step.token, got, err, want)
				}
			}
		})
	}
}

// docs/fencing-postgres-redis.md shows the examples' code as the files
// have it (after their shebang, comments and imports), so that what the
// tests run is what the page says.
func TestDocShowsTheExamples(t *testing.T) {
	doc, err := os.ReadFile("../../docs/fencing-postgres-redis.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report_postgres.sh", "report_postgres.py", "report_redis.sh", "report_redis.py"} {
		b, err := os.ReadFile(filepath.Join("../examples", f))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		start := 0
		for i, l := range lines {
			if l == "set -eu" || strings.HasPrefix(l, "import ") {
				start = i + 1
			}
		}
		body := strings.TrimSpace(strings.Join(lines[start:], "\n"))
		if body == "" || !strings.Contains(string(doc), body) {
			t.Errorf("the page does not show %s as it is:\n%s", f, body)
		}
	}
}
