package grantor

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// Recovery of a halted grantor (recover.go): InspectDataDir finds the
// entry it halts on; SkipEntry replaces that one entry by a no-op (again:
// nothing changes) and refuses a valid command, an entry not in the log
// and a data dir in use; the node then starts and applies the entries
// after it, and its state is the replay's.
func TestSkipEntryLetsAHaltedGrantorGoOn(t *testing.T) {
	dir := t.TempDir()
	cfg := fastConfig(t, dir)
	n := start(t, cfg, true)
	a := mustAcquire(t, n.client, acqReq("s1", 1, "a"))
	n.stop()
	b := encodeCmd(cmdAcquire, acquireCmd{ID: requestID{Session: "s2", Seq: 1}, Lease: "b", Owner: "o", TTL: 10 * time.Second})
	bad := appendToLog(t, dir, []byte{0xEE}, b)

	r, err := InspectDataDir(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Halt == nil || r.Halt.Index != bad || r.Applied != bad-1 || r.LastToken != a.Token || r.Leases != 1 {
		t.Fatalf("inspect before: %+v, want a halt at %d with a held under %d", r, bad, a.Token)
	}
	before := r.Digest

	for _, tc := range []struct {
		name  string
		index uint64
		want  error
	}{
		{name: "a valid command", index: bad + 1, want: ErrEntryApplies},
		{name: "beyond the log", index: bad + 100},
	} {
		if _, err := SkipEntry(dir, tc.index); err == nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: SkipEntry(%d) = %v, want an error (%v)", tc.name, tc.index, err, tc.want)
		}
	}
	for range 2 {
		old, err := SkipEntry(dir, bad)
		if err != nil || old.Index != bad {
			t.Fatalf("SkipEntry(%d) = %+v, %v", bad, old, err)
		}
	}
	r, err = InspectDataDir(dir, bad)
	if err != nil {
		t.Fatal(err)
	}
	if r.Halt != nil || r.Applied != bad || r.Digest != before || len(r.Skipped) != 1 || r.Skipped[0] != bad {
		t.Fatalf("inspect up to the skipped entry: %+v, want it passed over with the state of before (%s)", r, before)
	}

	n = start(t, cfg, true)
	if _, err := InspectDataDir(dir, 0); !errors.Is(err, ErrDataDirInUse) {
		t.Fatalf("inspect of a data dir in use: %v", err)
	}
	if _, err := SkipEntry(dir, bad); !errors.Is(err, ErrDataDirInUse) {
		t.Fatalf("SkipEntry in a data dir in use: %v", err)
	}
	waitRaft(t, "the entry after the skipped one applied", func() bool { _, held := n.fsm.lease("b"); return held }, n)
	if rec, _ := n.fsm.lease("a"); rec.Token != a.Token {
		t.Fatalf("a is %+v, want held under %d", rec, a.Token)
	}
}

// A directory that holds no grantor's raft log is refused, by name, and
// nothing is written in it.
func TestRecoverRefusesADirWithoutARaftLog(t *testing.T) {
	dir := t.TempDir()
	if _, err := InspectDataDir(dir, 0); !errors.Is(err, ErrNotADataDir) {
		t.Fatalf("InspectDataDir of an empty dir: %v", err)
	}
	if _, err := SkipEntry(dir, 1); !errors.Is(err, ErrNotADataDir) {
		t.Fatalf("SkipEntry in an empty dir: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("recover wrote %v in a dir that is no data dir", left)
	}
}

// Rule 5 (SECURITY.md, files nobody else controls): recover, run as the
// grantor's user or root, takes a data dir only as the grantor would: one
// writable by others (or another user's, or in another user's directory)
// is refused with ErrUnsafeDataDir, naming it, before its lock file is
// made or its raft log read. Before, `grantor recover` (red team, issue
// 21) replayed, and with --skip-index rewrote, a raft log in a local
// user's directory as root, and made root's lock file there.
func TestRecoverRefusesADataDirOthersControl(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(dir+"/raft/wal", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := InspectDataDir(dir, 0); !errors.Is(err, ErrUnsafeDataDir) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("InspectDataDir of a dir writable by others: %v, want ErrUnsafeDataDir naming it", err)
	}
	if _, err := SkipEntry(dir, 1); !errors.Is(err, ErrUnsafeDataDir) {
		t.Fatalf("SkipEntry in a dir writable by others: %v, want ErrUnsafeDataDir", err)
	}
	if _, err := os.Lstat(dir + "/" + lockFileName); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("recover made the lock file in a dir writable by others: %v", err)
	}
}
