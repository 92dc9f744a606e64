package integration

import (
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// Issue 8 item 4 on the real binary: a raft log entry of a type this
// grantor does not know (as a newer leaseside, or a forged append, would
// have written) makes `leaseside grantor` stop with exit status 65 and a
// message naming the entry and what to do, on every start, instead of a
// panic and a crash loop.
func TestGrantorHaltsAtUnknownLogEntry(t *testing.T) {
	c := newLoopbackCluster(t, 1)
	c.startAll()
	c.nodes[0].proc.waitLine(t, 0, "grantor: took office")
	c.kill(0)

	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(filepath.Join(c.nodes[0].dataDir, "raft", "wal"), wal.WithMetaStore(meta))
	if err != nil {
		t.Fatal(err)
	}
	last, err := w.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	var prev raft.Log
	if err := w.GetLog(last, &prev); err != nil {
		t.Fatal(err)
	}
	err = w.StoreLogs([]*raft.Log{{Index: last + 1, Term: prev.Term, Type: raft.LogCommand, Data: []byte{0xFF}}})
	w.Close()
	meta.Close()
	if err != nil {
		t.Fatal(err)
	}

	for range 2 {
		c.start(0)
		p := c.nodes[0].proc
		p.waitLine(t, 0, "command type 255 is unknown", "written by a newer leaseside: upgrade this grantor")
		if code := p.waitExit(t); code != 65 {
			t.Fatalf("grantor exited with %d, want 65 (halted); last lines:\n%s", code, p.tail(20))
		}
		c.nodes[0].alive = false
	}
}
