package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// recoverReport is what `leaseside grantor recover --json` prints.
type recoverReport struct {
	Skipped *struct {
		Index uint64 `json:"index"`
		Type  int    `json:"type"`
	} `json:"skipped"`
	Log struct {
		LastIndex uint64   `json:"last_index"`
		Applied   uint64   `json:"applied"`
		Halt      string   `json:"halt"`
		Skipped   []uint64 `json:"skipped"`
		LastToken uint64   `json:"last_token"`
		Leases    int      `json:"leases"`
		Digest    string   `json:"digest"`
	} `json:"log"`
}

// grantorRecover runs `leaseside grantor recover --json` with args on
// data dir dir and returns its report; it fails the test unless it exits
// 0.
func grantorRecover(t *testing.T, dir string, args ...string) recoverReport {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, append([]string{"grantor", "recover", "--data-dir", dir, "--json"}, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("grantor recover %v on %s: %v\n%s", args, dir, err, stderr.String())
	}
	var r recoverReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("grantor recover --json: %v: %q", err, out)
	}
	return r
}

// openLog opens the raft log of a stopped grantor's data dir.
func openLog(t *testing.T, dataDir string) (*wal.WAL, func()) {
	t.Helper()
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(filepath.Join(dataDir, "raft", "wal"), wal.WithMetaStore(meta))
	if err != nil {
		t.Fatal(err)
	}
	return w, func() {
		w.Close()
		meta.Close()
	}
}

// injectBadEntry makes the raft logs of the stopped grantors in dirs
// identical and then appends to each the same entry no grantor can apply
// (command type 238), as a forged AppendEntries once did; it returns the
// entry's index. The logs are made identical as raft would: the longest
// one's entries past each other one's end are copied to it, after a check
// that the shorter one is its prefix (the same term at its last index);
// each replica's current term is raised to the last entry's.
func injectBadEntry(t *testing.T, dirs []string) uint64 {
	t.Helper()
	logs := make([]*wal.WAL, len(dirs))
	lasts := make([]uint64, len(dirs))
	ref := 0
	for i, d := range dirs {
		w, closeLog := openLog(t, d)
		defer closeLog()
		logs[i] = w
		last, err := w.LastIndex()
		if err != nil {
			t.Fatal(err)
		}
		lasts[i] = last
		if last > lasts[ref] {
			ref = i
		}
	}
	entry := func(w *wal.WAL, i uint64) *raft.Log {
		var l raft.Log
		if err := w.GetLog(i, &l); err != nil {
			t.Fatalf("raft log entry %d: %v", i, err)
		}
		return &l
	}
	top := entry(logs[ref], lasts[ref])
	bad := &raft.Log{Index: top.Index + 1, Term: top.Term, Type: raft.LogCommand, Data: []byte{0xEE}}
	for i, w := range logs {
		if got, want := entry(w, lasts[i]).Term, entry(logs[ref], lasts[i]).Term; got != want {
			t.Fatalf("replica %d's log diverges from the longest at %d (term %d, not %d)", i, lasts[i], got, want)
		}
		var add []*raft.Log
		for j := lasts[i] + 1; j <= lasts[ref]; j++ {
			add = append(add, entry(logs[ref], j))
		}
		if err := w.StoreLogs(append(add, bad)); err != nil {
			t.Fatal(err)
		}
		if term, _ := w.GetUint64([]byte("CurrentTerm")); term < top.Term {
			if err := w.SetUint64([]byte("CurrentTerm"), top.Term); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("logs made identical up to %d (copied from replica %d); bad entry at %d, term %d", lasts[ref], ref, bad.Index, bad.Term)
	return bad.Index
}

// stopAny stops node i of c if it still runs (SIGTERM), accepting a halt
// (65) that came meanwhile.
func stopAny(t *testing.T, c *cluster, i int) int {
	t.Helper()
	n := c.nodes[i]
	if !n.proc.done() {
		n.proc.cmd.Process.Signal(syscall.SIGTERM)
	}
	code := n.proc.waitExit(t)
	n.alive = false
	return code
}

// equalReplicas runs `grantor recover` on every data dir up to index
// upTo and fails the test unless the replicas' states are equal; it
// returns one of the reports.
func equalReplicas(t *testing.T, c *cluster, upTo uint64, args ...string) recoverReport {
	t.Helper()
	var first recoverReport
	for i, n := range c.nodes {
		r := grantorRecover(t, n.dataDir, append([]string{"--up-to", strconv.FormatUint(upTo, 10)}, args...)...)
		t.Logf("%s: applied %d, last token %d, %d leases, %s, halt %q", n.id, r.Log.Applied, r.Log.LastToken, r.Log.Leases, r.Log.Digest, r.Log.Halt)
		if i == 0 {
			first = r
			continue
		}
		if r.Log.Applied != first.Log.Applied || r.Log.Digest != first.Log.Digest || r.Log.LastToken != first.Log.LastToken {
			t.Fatalf("%s differs from %s: applied %d, %s, token %d; not %d, %s, token %d", n.id, c.nodes[0].id,
				r.Log.Applied, r.Log.Digest, r.Log.LastToken, first.Log.Applied, first.Log.Digest, first.Log.LastToken)
		}
	}
	return first
}

// minLast returns the lowest last index of the replicas' logs.
func minLast(t *testing.T, c *cluster) uint64 {
	t.Helper()
	low := uint64(0)
	for i, n := range c.nodes {
		r := grantorRecover(t, n.dataDir)
		if i == 0 || r.Log.LastIndex < low {
			low = r.Log.LastIndex
		}
	}
	return low
}

// Issue 21 item 1, the recovery procedure of docs/operations-recovery.md
// on real processes: a cluster of three whose logs hold, committed, an
// entry no grantor can apply halts (exit 65) on it, at every start. With
// every grantor stopped, `leaseside grantor recover --skip-index N` on
// each replaces that entry by a no-op; the replicas are then equal (the
// same state digest, token and grants), the cluster starts, keeps the
// grants of before and grants again with higher tokens, and after it the
// replicas are still equal.
func TestGrantorRecoverSkipsTheHaltingEntry(t *testing.T) {
	t.Parallel()
	c := newLoopbackCluster(t, 3)
	c.startAll()
	// Ready is not serving: on a loaded machine the first leader may
	// step down before it took office, and the first acquire (no wait)
	// then fails with no leader.
	c.waitOffice(c.marks0())
	s := startSidecar(t, "sidecar", nil, "--grantors", c.rpcAddrs())
	var tokens []uint64
	for i := range 3 {
		tokens = append(tokens, tokenOf(t, acquireCLI(t, s, fmt.Sprintf("recover/before-%d", i), "--ttl", "5m", "--detached")))
	}
	// A grant of before is still held under its token.
	heldUnder := func(i int) {
		t.Helper()
		cli(t, s.socket, "check", fmt.Sprintf("recover/before-%d", i), "--token", strconv.FormatUint(tokens[i], 10)).must(t, 0)
	}
	for i := range c.nodes {
		c.stop(i)
	}
	var dirs []string
	for _, n := range c.nodes {
		dirs = append(dirs, n.dataDir)
	}
	bad := injectBadEntry(t, dirs)

	// The cluster commits the entry and halts on it: a quorum at least,
	// each with exit status 65 and the entry named; the others, if any,
	// are stopped (their logs hold the entry all the same).
	c.startAll()
	exits := make(chan int, len(c.nodes))
	for i, n := range c.nodes {
		exited := n.proc.exited // read here: the node's proc is replaced when it starts again below
		go func() {
			<-exited
			exits <- i
		}()
	}
	want := fmt.Sprintf("halted at raft log entry %d (term", bad)
	for range 2 {
		select {
		case i := <-exits:
			n := c.nodes[i]
			n.proc.waitLine(t, 0, want, "command type 238 is unknown, and no grantor of this cluster registered applying it")
			if code := n.proc.waitExit(t); code != 65 {
				t.Fatalf("%s exited %d, want 65", n.id, code)
			}
			n.alive = false
		case <-time.After(timeout):
			t.Fatalf("no quorum of grantors halted within %v", timeout)
		}
	}
	for i := range c.nodes {
		if code := stopAny(t, c, i); code != 0 && code != 65 {
			t.Fatalf("%s exited %d", c.nodes[i].id, code)
		}
	}
	before := equalReplicas(t, c, bad)
	if !strings.Contains(before.Log.Halt, fmt.Sprintf("raft log entry %d", bad)) || before.Log.Applied != bad-1 {
		t.Fatalf("before the recovery the replay %+v, want it to halt at %d", before.Log, bad)
	}
	if before.Log.LastToken != tokens[2] || before.Log.Leases != 3 {
		t.Fatalf("state before the entry: last token %d, %d grants; want %d, 3", before.Log.LastToken, before.Log.Leases, tokens[2])
	}

	// The procedure: the same --skip-index on every replica.
	for _, n := range c.nodes {
		r := grantorRecover(t, n.dataDir, "--skip-index", strconv.FormatUint(bad, 10))
		if r.Skipped == nil || r.Skipped.Index != bad || r.Skipped.Type != 0xEE || r.Log.Halt != "" {
			t.Fatalf("%s: recover --skip-index %d: %+v", n.id, bad, r)
		}
	}
	// Skipping again changes nothing; a valid entry is never skipped.
	again := grantorRecover(t, c.nodes[0].dataDir, "--skip-index", strconv.FormatUint(bad, 10))
	if again.Log.Digest == "" || len(again.Log.Skipped) != 1 || again.Log.Skipped[0] != bad {
		t.Fatalf("recover --skip-index twice: %+v", again)
	}
	out, err := exec.Command(bin, "grantor", "recover", "--data-dir", c.nodes[0].dataDir, "--skip-index", strconv.FormatUint(bad-1, 10)).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not skipped") && !strings.Contains(string(out), "raft's own") {
		t.Fatalf("recover --skip-index of entry %d, which applies: %v\n%s", bad-1, err, out)
	}
	after := equalReplicas(t, c, bad)
	if after.Log.Applied != bad || after.Log.Digest != before.Log.Digest {
		t.Fatalf("after the skip the replay reaches %d with %s, want %d with the state of before (%s)", after.Log.Applied, after.Log.Digest, bad, before.Log.Digest)
	}

	c.startAll()
	c.waitOffice(c.marks0())
	// The sidecar saw no leader while the cluster was down: an acquire
	// with a wait keeps trying until it reaches the new one.
	fresh := acquireCLI(t, s, "recover/after", "--ttl", "5s", "--detached", "--wait", "30s")
	if tokenOf(t, fresh) <= tokens[2] {
		t.Fatalf("granted token %s after the recovery, not above %d", fresh.Token, tokens[2])
	}
	t.Logf("granted token %s after the recovery", fresh.Token)
	for i := range tokens {
		heldUnder(i)
	}
	for i := range c.nodes {
		c.stop(i)
	}
	final := equalReplicas(t, c, minLast(t, c))
	if final.Log.Halt != "" || final.Log.LastToken < tokenOf(t, fresh) {
		t.Fatalf("the replicas after the recovered run: %+v, want no halt and token %s", final.Log, fresh.Token)
	}
}
