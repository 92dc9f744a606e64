package grantor

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// appendToLog writes entries straight into a stopped node's raft log, as
// a newer leader (or a forged AppendEntries) would have, after the last
// entry and in its term.
func appendToLog(t *testing.T, dataDir string, data ...[]byte) (first uint64) {
	t.Helper()
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(filepath.Join(dataDir, "raft", "wal"), wal.WithMetaStore(meta))
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	defer w.Close()
	last, err := w.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	var prev raft.Log
	if err := w.GetLog(last, &prev); err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for i, d := range data {
		logs = append(logs, &raft.Log{Index: last + 1 + uint64(i), Term: prev.Term, Type: raft.LogCommand, Data: d})
	}
	if err := w.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	return last + 1
}

// runUntilHalt runs a node from cfg and returns what Run returned; the
// node must halt on its own.
func runUntilHalt(t *testing.T, cfg Config) (*Node, error) {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Run(context.Background()) }()
	select {
	case err := <-done:
		return n, err
	case <-time.After(waitTimeout):
		n.Shutdown()
		<-done
		t.Fatal("the node did not halt")
	}
	return nil, nil
}

// Issue 8 item 4: an entry of a type this grantor does not know, written
// into its raft log, halts it with a clear error: Run returns a HaltError
// naming the index, the type and what to do; nothing after the entry is
// applied; no snapshot is taken from the halted state; and a restart halts
// at the same entry with the state unchanged, instead of a crash loop.
func TestNodeHaltsAtAnUnknownEntryInItsLog(t *testing.T) {
	dir := t.TempDir()
	cfg := fastConfig(t, dir)
	cfg.SnapshotThreshold = 1 // raft would snapshot after every entry
	cfg.SnapshotInterval = 10 * time.Millisecond

	n := start(t, cfg, true)
	a := mustAcquire(t, n.client, acqReq("s1", 1, "a"))
	n.stop()

	b := encodeCmd(cmdAcquire, acquireCmd{ID: requestID{Session: "s2", Seq: 1}, Lease: "b", Owner: "o", TTL: 10 * time.Second})
	// A newer grantor n9 registered applying type 255 (versions.go): the
	// marker that a newer leaseside wrote the entry.
	reg := encodeCmd(cmdRegisterNode, registerNodeCmd{NodeID: "n9", RPCAddr: "127.0.0.1:1", MaxCmd: 0xFF})
	bad := appendToLog(t, dir, reg, []byte{0xFF, '{', '}'}, b) + 1

	for run := 1; run <= 2; run++ {
		node, err := runUntilHalt(t, cfg)
		var h *HaltError
		if !errors.As(err, &h) || !errors.Is(err, ErrHalted) {
			t.Fatalf("run %d: Run returned %v, want a HaltError", run, err)
		}
		if h.Index != bad || h.Type != 0xFF || !h.Unknown {
			t.Fatalf("run %d: halted at %d type %d (unknown %v), want %d type 255", run, h.Index, h.Type, h.Unknown, bad)
		}
		for _, want := range []string{"raft log entry", "command type 255 is unknown to this grantor", "grantor n9 registered applying it: written by a newer leaseside: upgrade this grantor"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("run %d: %q does not say %q", run, err, want)
			}
		}
		if rec, ok := node.fsm.lease("a"); !ok || rec.Token != a.Token {
			t.Fatalf("run %d: a = %+v %v, want held with %d", run, rec, ok, a.Token)
		}
		if _, held := node.fsm.lease("b"); held || node.fsm.lastToken() != a.Token {
			t.Fatalf("run %d: the entry after the bad one was applied", run)
		}
		snaps, err := node.snaps.List()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range snaps {
			if s.Index >= bad {
				t.Fatalf("run %d: snapshot at index %d, taken from the halted state (bad entry %d)", run, s.Index, bad)
			}
		}
	}
}
