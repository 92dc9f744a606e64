package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver of the PostgreSQL register

	"github.com/leaseside/leaseside/fence/pgfence"
	"github.com/leaseside/leaseside/internal/chaos/workload"
	"github.com/leaseside/leaseside/internal/stores"
)

// StorePostgres keeps the fenced register in a real PostgreSQL server
// (Config.Store): each write that passes the deadline check is one
// transaction that calls leaseside.fence with the write's token, appends
// the write to chaos_writes and sets the name's value, so the database
// decides what is stale. At the end the checkers take what was accepted
// from the database itself, not from the register's answers.
const StorePostgres = "postgres"

// storeErrPrefix starts the reason of a write whose transaction failed
// for another cause than a stale token (its outcome is read back later).
const storeErrPrefix = "store: "

// pgStore is the register's PostgreSQL database.
type pgStore struct{ db *sql.DB }

// storeTimeout bounds one write's transaction.
const storeTimeout = 10 * time.Second

// openPGStore starts a throwaway PostgreSQL server for the run and sets
// the fence and the register's tables up in it.
func openPGStore(t testing.TB) (*pgStore, error) {
	dsn, _ := stores.StartPostgres(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pgfence.Install(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	if _, err := db.ExecContext(ctx, `
		CREATE TABLE chaos_writes (id bigserial PRIMARY KEY, name text NOT NULL, seq bigint NOT NULL,
			holder text NOT NULL, token bigint NOT NULL, UNIQUE (name, seq));
		CREATE TABLE chaos_register (name text PRIMARY KEY, value text NOT NULL)`); err != nil {
		db.Close()
		return nil, err
	}
	return &pgStore{db: db}, nil
}

// write makes w, the seq-th write of its name, one fenced transaction.
func (s *pgStore) write(w workload.Write, seq uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	return pgfence.Do(ctx, s.db, w.Name, w.Token, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO chaos_writes (name, seq, holder, token) VALUES ($1, $2, $3, $4)`,
			w.Name, int64(seq), w.Holder, int64(w.Token)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO chaos_register VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = excluded.value`,
			w.Name, registerValue(w))
		return err
	})
}

// registerValue is what a write sets its name's value to.
func registerValue(w workload.Write) string {
	return w.Holder + "/" + strconv.FormatUint(w.Token, 10)
}

// readBack reads what the database holds: every write it committed, in
// commit order (a name's writes take turns on its leaseside.tokens row,
// and each takes its id after it got the row), and each name's value.
func (s *pgStore) readBack() (*StoreState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := &StoreState{Kind: StorePostgres, Values: map[string]string{}}
	rows, err := s.db.QueryContext(ctx, `SELECT name, seq, holder, token FROM chaos_writes ORDER BY id`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var w StoredWrite
		if err := rows.Scan(&w.Name, &w.Seq, &w.Holder, &w.Token); err != nil {
			rows.Close()
			return nil, err
		}
		st.Writes = append(st.Writes, w)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	rows, err = s.db.QueryContext(ctx, `SELECT name, value FROM chaos_register`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var n, v string
		if err := rows.Scan(&n, &v); err != nil {
			return nil, err
		}
		st.Values[n] = v
	}
	return st, rows.Err()
}

func (s *pgStore) close() { s.db.Close() }

// StoreState is what the register's store held at the end of a run.
type StoreState struct {
	Kind string `json:"kind"`
	// Writes are the writes the store committed, in commit order.
	Writes []StoredWrite `json:"writes"`
	// Values are each name's value.
	Values map[string]string `json:"values"`
}

// StoredWrite is a write the store committed.
type StoredWrite struct {
	Name   string `json:"name"`
	Seq    uint64 `json:"seq"`
	Holder string `json:"holder"`
	Token  uint64 `json:"token"`
}

// fromStore returns h's register writes with Accepted as the store has
// them (a write whose transaction's outcome the register did not learn is
// decided there too), and the violations of the store's own record: an
// acknowledged write the store does not hold, a write it holds that the
// register never made or holds differently, a name's writes committed out
// of the register's order, a value that is not its name's last write.
func fromStore(h *History) ([]RegisterWrite, []Violation) {
	ws := slices.Clone(h.Writes)
	if h.Store == nil {
		return ws, nil
	}
	type key struct {
		name string
		seq  uint64
	}
	stored := map[key]StoredWrite{}
	var vs []Violation
	lastSeq := map[string]uint64{}
	last := map[string]StoredWrite{}
	for _, sw := range h.Store.Writes {
		if sw.Seq <= lastSeq[sw.Name] {
			vs = append(vs, Violation{Checker: CheckRegister, Name: sw.Name,
				Message: fmt.Sprintf("the store committed write %d of %s after write %d", sw.Seq, sw.Name, lastSeq[sw.Name])})
		}
		lastSeq[sw.Name] = sw.Seq
		last[sw.Name] = sw
		stored[key{sw.Name, sw.Seq}] = sw
	}
	made := map[key]bool{}
	for i, w := range ws {
		if w.Seq == 0 {
			continue
		}
		k := key{w.Name, w.Seq}
		made[k] = true
		sw, ok := stored[k]
		switch {
		case ok && (sw.Holder != w.Holder || sw.Token != w.Token):
			vs = append(vs, Violation{Checker: CheckRegister, Name: w.Name, At: w.At,
				Message: fmt.Sprintf("the store holds write %d of %s as %s's with token %d; the register made it %s's with token %d", w.Seq, w.Name, sw.Holder, sw.Token, w.Holder, w.Token)})
		case !ok && w.Accepted:
			vs = append(vs, Violation{Checker: CheckRegister, Name: w.Name, At: w.At,
				Message: fmt.Sprintf("write %d of %s (token %d) was acknowledged and the store does not hold it", w.Seq, w.Name, w.Token)})
		}
		ws[i].Accepted = ok
		if !ok && strings.HasPrefix(w.Reason, storeErrPrefix) {
			ws[i].Seq = 0 // never reached the store's fence: not in its history
		}
	}
	for k := range stored {
		if !made[k] {
			vs = append(vs, Violation{Checker: CheckRegister, Name: k.name,
				Message: fmt.Sprintf("the store holds a write %d of %s the register never made", k.seq, k.name)})
		}
	}
	for n, sw := range last {
		if v, want := h.Store.Values[n], sw.Holder+"/"+strconv.FormatUint(sw.Token, 10); v != want {
			vs = append(vs, Violation{Checker: CheckRegister, Name: n,
				Message: fmt.Sprintf("the store's value of %s is %q, its last committed write's is %q", n, v, want)})
		}
	}
	return ws, vs
}
