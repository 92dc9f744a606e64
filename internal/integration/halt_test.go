package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// Issue 8 item 4 on the real binary: a raft log entry of a type this
// grantor does not know makes `leaseside grantor` stop with exit status 65
// and a message naming the entry and what to do, on every start, instead
// of a panic and a crash loop. Since no grantor of the cluster registered
// applying the type (the marker a newer leaseside leaves), the message
// calls it forged or corrupt and points at `grantor recover`, not at an
// upgrade (issue 21 item 1).
func TestGrantorHaltsAtUnknownLogEntry(t *testing.T) {
	t.Parallel()
	c := newLoopbackCluster(t, 1)
	c.startAll()
	c.nodes[0].proc.waitLine(t, 0, "grantor: took office")
	c.kill(0)

	appendUnknownEntry(t, filepath.Join(c.nodes[0].dataDir, "raft", "wal"))

	for range 2 {
		c.start(0)
		p := c.nodes[0].proc
		_, l := p.waitLine(t, 0, "command type 255 is unknown, and no grantor of this cluster registered applying it", "grantor recover --data-dir DIR --skip-index")
		if strings.Contains(l.v, "upgrade") {
			t.Fatalf("the halt blames the version: %s", l.v)
		}
		if code := p.waitExit(t); code != 65 {
			t.Fatalf("grantor exited with %d, want 65 (halted); last lines:\n%s", code, p.tail(20))
		}
		c.nodes[0].alive = false
	}
}

// The same for `leaseside dev`: its embedded grantor keeps its raft log in
// the data dir, and when that grantor halts, dev stops with 65 too rather
// than serving a socket whose grantor is gone.
func TestDevHaltsAtUnknownLogEntry(t *testing.T) {
	t.Parallel()
	socket, data := tempSocket(t), t.TempDir()
	startDev(t, socket, data).stop(t)
	appendUnknownEntry(t, filepath.Join(data, "grantor", "raft", "wal"))

	for range 2 {
		cmd := exec.Command(bin, "dev", "--socket", socket, "--data-dir", data)
		out, err := runWithTimeout(cmd)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 65 {
			t.Fatalf("dev ended with %v, want exit status 65 (halted); output:\n%s", err, out)
		}
		for _, want := range []string{"command type 255 is unknown", "the embedded grantor stopped"} {
			if !strings.Contains(string(out), want) {
				t.Fatalf("dev's output does not say %q:\n%s", want, out)
			}
		}
	}
}

// runWithTimeout runs cmd to its end, or kills it after timeout.
func runWithTimeout(cmd *exec.Cmd) ([]byte, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.Bytes(), err
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		return out.Bytes(), fmt.Errorf("still running after %v", timeout)
	}
}

// appendUnknownEntry appends, to the raft log in dir, a command entry of a
// type no leaseside knows (0xFF).
func appendUnknownEntry(t *testing.T, dir string) {
	t.Helper()
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(dir, wal.WithMetaStore(meta))
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
	if err := w.StoreLogs([]*raft.Log{{Index: last + 1, Term: prev.Term, Type: raft.LogCommand, Data: []byte{0xFF}}}); err != nil {
		t.Fatal(err)
	}
}
