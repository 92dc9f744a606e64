package grantor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

func TestHCLogAdapter(t *testing.T) {
	var buf bytes.Buffer
	l := newHCLog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), "raft")
	l.Debug("hidden")
	l.Named("wal").Info("formatted", "servers", hclog.Fmt("%d-%s", 7, "x"))
	got := buf.String()
	if strings.Contains(got, "hidden") {
		t.Errorf("debug line passed an info handler: %s", got)
	}
	for _, want := range []string{"logger=raft.wal", "servers=7-x", "msg=formatted"} {
		if !strings.Contains(got, want) {
			t.Errorf("log %q lacks %q", got, want)
		}
	}
	if l.IsDebug() || !l.IsInfo() {
		t.Error("levels not taken from the handler")
	}
}

// recorded is a slog handler that keeps every record.
type recorded struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *recorded) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorded) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}
func (r *recorded) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorded) WithGroup(string) slog.Handler      { return r }

func (r *recorded) take() []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	recs := r.recs
	r.recs = nil
	return recs
}

func attr(rec slog.Record, key string) (v slog.Value, ok bool) {
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v, ok = a.Value, true
			return false
		}
		return true
	})
	return v, ok
}

// Raft's errors for a peer it cannot reach are routine: WARN, at most one
// per message and peer every routineEvery, the next one counting those
// left out (at DEBUG); the same message with an answer from the peer, and
// every other ERROR line, stay ERROR.
func TestHCLogDemotesRoutineRaftErrors(t *testing.T) {
	now := time.Unix(1000, 0)
	rec := &recorded{}
	l := newHCLogAt(slog.New(rec), "raft", func() time.Time { return now }).Named("replication")
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	peerA := raft.Server{ID: "g1", Address: "127.0.0.1:1"}
	peerB := raft.Server{ID: "g2", Address: "127.0.0.1:2"}
	type line struct {
		level    slog.Level
		repeated int64 // 0: no repeated attribute
	}
	check := func(step string, want ...line) {
		t.Helper()
		got := rec.take()
		if len(got) != len(want) {
			t.Fatalf("%s: %d records, want %d", step, len(got), len(want))
		}
		for i, r := range got {
			rep, has := attr(r, "repeated")
			var n int64
			if has {
				n = rep.Int64()
			}
			if r.Level != want[i].level || n != want[i].repeated {
				t.Errorf("%s: record %d %q at %v repeated=%d, want %v repeated=%d", step, i, r.Message, r.Level, n, want[i].level, want[i].repeated)
			}
		}
	}

	l.Error("failed to appendEntries to", "peer", peerA, "error", refused)
	l.Error("failed to appendEntries to", "peer", peerA, "error", fmt.Errorf("wrapped: %w", io.EOF))
	l.Error("failed to heartbeat to", "peer", peerA.Address, "backoff time", time.Second, "error", refused)
	l.Error("failed to appendEntries to", "peer", peerB, "error", refused)
	check("first lines", line{slog.LevelWarn, 0}, line{slog.LevelDebug, 0}, line{slog.LevelWarn, 0}, line{slog.LevelWarn, 0})

	now = now.Add(routineEvery - time.Millisecond)
	l.Error("failed to appendEntries to", "peer", peerA, "error", os.ErrDeadlineExceeded)
	check("within routineEvery", line{slog.LevelDebug, 0})
	now = now.Add(time.Millisecond)
	l.Error("failed to appendEntries to", "peer", peerA, "error", refused)
	check("after routineEvery", line{slog.LevelWarn, 2})

	l.Error("failed to appendEntries to", "peer", peerA, "error", errors.New("log not found"))
	l.Error("failed to make requestVote RPC", "target", peerA, "error", nil)
	l.Error("failed to persist vote", "error", io.EOF)
	l.Error("failed to decode incoming command", "error", errors.New("unknown rpc type 9"))
	check("real errors", line{slog.LevelError, 0}, line{slog.LevelError, 0}, line{slog.LevelError, 0}, line{slog.LevelError, 0})

	l.Error(routineStepDown, "peer", peerB)
	l.Error(routineStepDown, "peer", peerB)
	check("step down", line{slog.LevelWarn, 0}, line{slog.LevelWarn, 0})
}
