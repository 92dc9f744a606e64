package grantor

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// A follower's raft log loses its tail when a new leader's entries
// conflict with it (raft's "clearing log suffix"). The log must open again
// afterwards: raft-wal v0.4.0 sealed the tail segment without its index
// block on such a truncation, and every later open panicked ("sealed
// segment has no index block"), so the grantor could never restart. The
// chaos suite found it after a partition healed (findings F2).
func TestLogOpensAfterSuffixTruncation(t *testing.T) {
	dir := t.TempDir()
	open := func() (*wal.WAL, *metadb.BoltMetaDB) {
		t.Helper()
		meta := &metadb.BoltMetaDB{}
		w, err := wal.Open(dir, wal.WithMetaStore(meta))
		if err != nil {
			t.Fatalf("opening the log: %v", err)
		}
		return w, meta
	}
	w, meta := open()
	var logs []*raft.Log
	for i := uint64(1); i <= 18; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte(fmt.Sprint(i))})
	}
	if err := w.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	// What raft does on a conflicting append: drop the suffix, then
	// append the new leader's entries.
	if err := w.DeleteRange(17, 18); err != nil {
		t.Fatal(err)
	}
	if err := w.StoreLogs([]*raft.Log{{Index: 17, Term: 2, Type: raft.LogCommand, Data: []byte("new")}}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	meta.Close()

	w, meta = open() // panicked with raft-wal v0.4.0
	defer meta.Close()
	defer w.Close()
	last, err := w.LastIndex()
	if err != nil || last != 17 {
		t.Fatalf("last index after reopening = %d, %v; want 17", last, err)
	}
	for i := uint64(1); i <= 16; i++ { // in the segment the truncation sealed
		var got raft.Log
		if err := w.GetLog(i, &got); err != nil || string(got.Data) != fmt.Sprint(i) {
			t.Fatalf("entry %d after reopening = %+v, %v", i, got, err)
		}
	}
	var got raft.Log
	if err := w.GetLog(17, &got); err != nil || string(got.Data) != "new" || got.Term != 2 {
		t.Fatalf("entry 17 after reopening = %+v, %v; want the new leader's", got, err)
	}
}
