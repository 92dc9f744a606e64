package grantor

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"

	"github.com/leaseside/leaseside/internal/safefs"
)

// Recovery of a cluster halted on a raft log entry (docs/operations-recovery.md).
//
// A committed entry that no grantor can apply halts every grantor at it,
// on every start (fsm.go). Since raft commits an entry only once a
// majority holds it, at the same index and term, every replica that holds
// it holds the same bytes there. SkipEntry, run on every replica while
// its grantor is stopped, replaces that one entry, in place, by a raft
// no-op of the same index and term: raft's log matching still holds
// (index and term are unchanged), the FSM is never handed it, so every
// replica applies exactly the same entries and their states stay equal;
// and a replica that gets the entry later from the leader gets the no-op.
// It skips only an entry this grantor cannot apply: a valid command is
// never dropped by it. InspectDataDir replays a stopped replica's snapshot
// and log offline and says where it halts and what state it reaches, so
// that an operator can compare the replicas before and after.

// ErrEntryApplies is returned by SkipEntry for an entry this grantor can
// apply: it skips only one that halts the grantor.
var ErrEntryApplies = errors.New("grantor: the entry is a command this grantor applies; recover skips only an entry it cannot apply")

// ErrNotADataDir is returned by InspectDataDir and SkipEntry for a
// directory that holds no grantor's raft log; nothing is written in it.
var ErrNotADataDir = errors.New("grantor: not a grantor's data dir")

// LogReport is what InspectDataDir finds in a stopped grantor's data dir.
type LogReport struct {
	// FirstIndex and LastIndex bound the raft log (0 when it is empty).
	FirstIndex uint64 `json:"first_index"`
	LastIndex  uint64 `json:"last_index"`
	// SnapshotIndex is the index of the newest snapshot, 0 without one.
	SnapshotIndex uint64 `json:"snapshot_index"`
	// Applied is the last index the replay applied (or passed over: raft's
	// own entries, no-ops, configurations), from the snapshot on.
	Applied uint64 `json:"applied"`
	// Halt is the entry the replay cannot apply, nil when there is none.
	Halt *HaltError `json:"-"`
	// HaltMessage is Halt's message, "" when there is none.
	HaltMessage string `json:"halt,omitempty"`
	// Skipped lists the indexes of the log that hold raft no-ops written
	// by SkipEntry in place of a command.
	Skipped []uint64 `json:"skipped,omitempty"`
	// LastToken, Leases and Digest describe the state at Applied: the
	// highest token granted, the grants held, and the SHA-256 of the
	// state as a snapshot would write it (equal states, equal digests).
	LastToken uint64 `json:"last_token"`
	Leases    int    `json:"leases"`
	Digest    string `json:"digest"`
}

// recoverStores are a stopped grantor's raft stores, opened by
// openRecoverStores; close releases them and the data dir's lock.
type recoverStores struct {
	wal   *wal.WAL
	snaps *raft.FileSnapshotStore
	close func()
}

func openRecoverStores(dataDir string) (*recoverStores, error) {
	walDir := filepath.Join(dataDir, "raft", "wal")
	if fi, err := os.Stat(walDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s has no raft log (%s)", ErrNotADataDir, dataDir, walDir)
	}
	// The grantor's own rule (makeDataDir): recover runs as root or the
	// grantor's user, and must not read or rewrite a raft log, nor make
	// its lock file, where another user could swap them.
	if err := safefs.CheckDir(dataDir); errors.Is(err, safefs.ErrUnsafe) {
		return nil, fmt.Errorf("%w: %w: recover works only on a data dir of this user's (uid %d) that nobody else may write", ErrUnsafeDataDir, err, os.Geteuid())
	} else if err != nil {
		return nil, fmt.Errorf("grantor: data dir %s: %w", dataDir, err)
	}
	lock, err := lockDataDir(dataDir)
	if err != nil {
		return nil, err
	}
	raftDir := filepath.Join(dataDir, "raft")
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(walDir, wal.WithMetaStore(meta))
	if err != nil {
		meta.Close()
		lock.Close()
		return nil, fmt.Errorf("grantor: opening the raft log in %s: %w", raftDir, err)
	}
	closeAll := func() {
		w.Close()
		meta.Close()
		lock.Close()
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(raftDir, snapshotsRetained, hclog.NewNullLogger())
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("grantor: opening the snapshots in %s: %w", raftDir, err)
	}
	return &recoverStores{wal: w, snaps: snaps, close: closeAll}, nil
}

// InspectDataDir replays the newest snapshot and then the raft log of the
// stopped grantor whose data dir is dataDir, up to index upTo (0: the
// whole log), in a state of its own, and reports where it stands. It
// holds the data dir's lock meanwhile, so it fails with a
// *DataDirInUseError while a grantor runs on it. The replay applies the
// log's uncommitted tail too: compare replicas up to an index they all
// hold.
func InspectDataDir(dataDir string, upTo uint64) (*LogReport, error) {
	s, err := openRecoverStores(dataDir)
	if err != nil {
		return nil, err
	}
	defer s.close()
	r := &LogReport{}
	if r.FirstIndex, err = s.wal.FirstIndex(); err == nil {
		r.LastIndex, err = s.wal.LastIndex()
	}
	if err != nil {
		return nil, fmt.Errorf("grantor: reading the raft log: %w", err)
	}
	f := newFSM()
	metas, err := s.snaps.List()
	if err != nil {
		return nil, fmt.Errorf("grantor: listing snapshots: %w", err)
	}
	if len(metas) > 0 {
		_, rc, err := s.snaps.Open(metas[0].ID)
		if err != nil {
			return nil, fmt.Errorf("grantor: opening snapshot %s: %w", metas[0].ID, err)
		}
		if err := f.Restore(rc); err != nil {
			return nil, fmt.Errorf("grantor: restoring snapshot %s: %w", metas[0].ID, err)
		}
		r.SnapshotIndex, r.Applied = metas[0].Index, metas[0].Index
	}
	end := r.LastIndex
	if upTo > 0 {
		end = min(end, upTo)
	}
	for i := max(r.SnapshotIndex+1, r.FirstIndex); i <= end && r.FirstIndex > 0; i++ {
		var l raft.Log
		if err := s.wal.GetLog(i, &l); err != nil {
			return nil, fmt.Errorf("grantor: reading raft log entry %d: %w", i, err)
		}
		switch l.Type {
		case raft.LogNoop:
			if l.Data != nil {
				r.Skipped = append(r.Skipped, i)
			}
		case raft.LogCommand:
			if h, ok := f.Apply(&l).(*HaltError); ok {
				r.Halt, r.HaltMessage = h, h.Error()
				return r.describe(f)
			}
		}
		r.Applied = i
	}
	return r.describe(f)
}

// describe fills in what r says of the state of f.
func (r *LogReport) describe(f *fsm) (*LogReport, error) {
	f.mu.RLock()
	st := f.st.clone()
	f.mu.RUnlock()
	r.LastToken, r.Leases = st.LastToken, f.leaseCount()
	sink := &hashSink{Hash: sha256.New()}
	if err := (&fsmSnapshot{st: st}).Persist(sink); err != nil {
		return nil, err
	}
	r.Digest = "sha256:" + hex.EncodeToString(sink.Sum(nil))
	return r, nil
}

// hashSink is a raft.SnapshotSink that hashes what is written to it.
type hashSink struct{ hash.Hash }

func (s *hashSink) ID() string    { return "digest" }
func (s *hashSink) Close() error  { return nil }
func (s *hashSink) Cancel() error { return nil }

// skippedMark is the data of the raft no-op SkipEntry writes in place of
// an entry, so that InspectDataDir can tell it from raft's own no-ops
// (which carry none). Raft never hands a no-op's data to anyone.
var skippedMark = []byte("leaseside: skipped by grantor recover")

// SkipEntry replaces raft log entry index of the stopped grantor whose
// data dir is dataDir by a raft no-op of the same index and term (see the
// top of this file), and returns the entry it replaced. It refuses an
// entry this grantor can apply (ErrEntryApplies), one that is not in the
// log or already in a snapshot, and a data dir a grantor runs on
// (*DataDirInUseError). Skipping an entry already skipped changes
// nothing and returns the no-op.
func SkipEntry(dataDir string, index uint64) (*raft.Log, error) {
	s, err := openRecoverStores(dataDir)
	if err != nil {
		return nil, err
	}
	defer s.close()
	if metas, err := s.snaps.List(); err != nil {
		return nil, fmt.Errorf("grantor: listing snapshots: %w", err)
	} else if len(metas) > 0 && metas[0].Index >= index {
		return nil, fmt.Errorf("grantor: raft log entry %d is already in snapshot %s (up to %d): it was applied", index, metas[0].ID, metas[0].Index)
	}
	last, err := s.wal.LastIndex()
	if err != nil {
		return nil, fmt.Errorf("grantor: reading the raft log: %w", err)
	}
	var old raft.Log
	if err := s.wal.GetLog(index, &old); err != nil {
		return nil, fmt.Errorf("grantor: raft log entry %d is not in this log (it ends at %d): %w", index, last, err)
	}
	switch {
	case old.Type == raft.LogNoop && string(old.Data) == string(skippedMark):
		return &old, nil
	case old.Type != raft.LogCommand:
		return nil, fmt.Errorf("grantor: raft log entry %d is raft's own (%v), not a command: nothing to skip", index, old.Type)
	}
	if t, _, err := decodeCmd(old.Data); err == nil {
		return nil, fmt.Errorf("%w: raft log entry %d is a valid %v command", ErrEntryApplies, index, t)
	}
	tail := make([]*raft.Log, 0, last-index+1)
	for i := index; i <= last; i++ {
		l := new(raft.Log)
		if err := s.wal.GetLog(i, l); err != nil {
			return nil, fmt.Errorf("grantor: reading raft log entry %d: %w", i, err)
		}
		tail = append(tail, l)
	}
	tail[0] = &raft.Log{Index: old.Index, Term: old.Term, Type: raft.LogNoop, Data: skippedMark, AppendedAt: old.AppendedAt}
	if err := s.wal.DeleteRange(index, last); err != nil {
		return nil, fmt.Errorf("grantor: truncating the raft log at %d: %w", index, err)
	}
	if err := s.wal.StoreLogs(tail); err != nil {
		return nil, fmt.Errorf("grantor: rewriting raft log entries %d to %d (restore the data dir from the copy made before): %w", index, last, err)
	}
	return &old, nil
}
