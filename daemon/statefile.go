package daemon

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/leaseside/leaseside/internal/safefs"
	"github.com/leaseside/leaseside/ipc"
)

// The state directory's files (format version 2, issue 25 item 6). A
// renewal round changes no lease's facts, only deadlines, and deadlines
// belong to sessions (a keepalive renews a session as a whole): so a
// round must not copy or write the lease table. The state is two files:
//
//   - the lease log (leaseLogName): a line per change of the lease table,
//     appended when a lease is told to a caller as held (put, with its
//     facts and the deadline it had then), when one of its facts changes
//     (put again: it lapses, an election's value, a deadline of its own,
//     a deadline shortened),
//     and when it leaves the table (del). When the lines outnumber twice
//     the live leases (and compactMin), the next write starts a new log
//     from the table; every process's first write does too. A line cut
//     short at the end (a crash in the middle of a write) was never
//     acknowledged to anyone (persisted waits for the whole write) and is
//     ignored; a line that cannot be read before the end refuses the
//     whole state.
//   - the sessions file (sessionsFileName), rewritten (a new file renamed
//     over the old) after the log at every write: the boot id, the
//     grantor sessions with their request seqs, and for each session the
//     earliest t0 and the earliest deadline of the leases it renews
//     (follower leases: neither no_renew nor lapsing), with Covered, the
//     last log line written when it was taken.
//
// The deadline rule (DESIGN.md section 2: a restarted daemon never
// believes a lease longer than the old one could have): a restored
// follower lease whose last log line is covered takes its session's
// deadline, the earliest of the session's follower leases when the file
// was written, so never later than its own; any other lease takes the
// deadline on its last log line, which it had when the line was written
// (deadlines only move later, but for a drift found late, which shortens
// them and puts a line of each lease it shortened). Every restored
// deadline is also no later than the timing floor, as the previous
// process last wrote it (floorfile.go), gives from its t0: a crash
// between a shortening told and its line written. An earlier deadline
// than the true one is safe: the new process renews every restored lease
// at once.

// Names of the state files in the state directory.
const (
	sessionsFileName = "sidecar-sessions.json"
	leaseLogName     = "sidecar-leases.log"
	// stateFileNameV1 is format 1's one file, the whole table rewritten
	// at every change and renewal round: read once, by the first process
	// of this version (or when it is newer than this format's files),
	// then removed at the first write.
	stateFileNameV1 = "sidecar-state.json"
)

// stateVersion is the state's format; stateVersionV1 the one before,
// which is read too. Another is refused.
const (
	stateVersion   = 2
	stateVersionV1 = 1
)

// compactMin is the least number of log lines a compaction leaves behind
// it: below it the log is never rewritten.
const compactMin = 1024

// stateRecord is the state as a whole, as loadState assembles it (and as
// format 1 wrote it, in one file).
type stateRecord struct {
	Version int `json:"version"`
	// BootID is /proc/sys/kernel/random/boot_id when it was written.
	BootID string `json:"boot_id"`
	// BoottimeOffsetNs is the writer's time namespace's CLOCK_BOOTTIME
	// offset (bootClock); format 1 has none (0).
	BoottimeOffsetNs int64 `json:"boottime_offset_ns,omitempty"`
	// WrittenNs is when it was written, on CLOCK_BOOTTIME.
	WrittenNs int64 `json:"written_boottime_ns"`
	// Session is the daemon's session id, which its grantor sessions'
	// ids start with.
	Session string `json:"session"`
	// Start numbers the daemon process that used these sessions last
	// (each restoring one takes a larger number: at least its start on
	// CLOCK_BOOTTIME in ns); it keeps connection owners of one process
	// apart from another's.
	Start    uint64          `json:"start"`
	Detached uint64          `json:"detached"`
	Sessions []sessionState  `json:"sessions"`
	Leases   []leaseSnapshot `json:"leases"`
	// lastSeq is the highest seq of the sessions file and the log.
	lastSeq uint64
}

// sessionsRecord is the sessions file.
type sessionsRecord struct {
	Version int    `json:"version"`
	BootID  string `json:"boot_id"`
	// BoottimeOffsetNs: as stateRecord's. Omitted when 0, so that the
	// file is as before outside time namespaces; a daemon of this format
	// that does not know it refuses a file with it (and starts without
	// the leases, which lapse at the grantors).
	BoottimeOffsetNs int64  `json:"boottime_offset_ns,omitempty"`
	WrittenNs        int64  `json:"written_boottime_ns"`
	Session          string `json:"session"`
	Start            uint64 `json:"start"`
	Detached         uint64 `json:"detached"`
	// Covered is the seq of the last log line written before this file.
	Covered  uint64         `json:"covered"`
	Sessions []sessionState `json:"sessions"`
}

// sessionState is one grantor session.
type sessionState struct {
	ID    string `json:"id"`
	TTLNs int64  `json:"ttl_ns"`
	Seq   uint64 `json:"seq"`
	// T0Ns and DeadlineNs are the earliest t0 and the earliest deadline
	// of the session's follower leases (0: it has none); in the sessions
	// file only.
	T0Ns       int64 `json:"t0_boottime_ns,omitempty"`
	DeadlineNs int64 `json:"deadline_boottime_ns,omitempty"`
}

// leaseSnapshot is one lease of the table.
type leaseSnapshot struct {
	Name        string `json:"name"`
	Key         string `json:"key,omitempty"`
	Token       uint64 `json:"token"`
	TTLNs       int64  `json:"ttl_ns"`
	Limit       int    `json:"limit,omitempty"`
	Holders     int    `json:"holders,omitempty"`
	Shared      bool   `json:"shared,omitempty"`
	Value       string `json:"value,omitempty"`
	SessionID   string `json:"session_id"`
	Owner       string `json:"owner"`
	OwnerID     string `json:"owner_id"`
	OwnerPID    int    `json:"owner_pid,omitempty"`
	UID         int    `json:"uid"`
	LockDelayNs int64  `json:"lock_delay_ns,omitempty"`
	NoRenew     bool   `json:"no_renew,omitempty"`
	T0Ns        int64  `json:"t0_boottime_ns"`
	DeadlineNs  int64  `json:"deadline_boottime_ns"`
	// ToldNs, when later than DeadlineNs, is a deadline an earlier
	// process may have told the lease's owner (orphans.go, heldBack).
	ToldNs   int64  `json:"told_boottime_ns,omitempty"`
	Renewals int64  `json:"renewals,omitempty"`
	Resume   string `json:"resume,omitempty"`
	// Lapsing: no longer renewed, as its owner process was stopped too
	// long.
	Lapsing bool `json:"lapsing,omitempty"`
}

// check refuses a lease whose facts the table cannot hold: the state
// files are the daemon's own, in a directory nobody else may write, but
// are decoded as strictly as anything read.
func (s *leaseSnapshot) check() error {
	switch _, ok := ownerOf(s.Owner); {
	case s.Name == "" || s.OwnerID == "" || s.SessionID == "":
		return errors.New("a lease without a name, an owner id or a session")
	case !ok:
		return fmt.Errorf("lease %q: owner %q", s.Name, s.Owner)
	case s.Limit < 0 || s.Limit > ipc.MaxLimit:
		return fmt.Errorf("lease %q: limit %d", s.Name, s.Limit)
	case s.Holders < 0 || s.Holders > math.MaxUint32 || s.UID < 0 || s.UID > math.MaxUint32:
		return fmt.Errorf("lease %q: holders %d, uid %d", s.Name, s.Holders, s.UID)
	case s.TTLNs <= 0:
		return fmt.Errorf("lease %q: term %d ns", s.Name, s.TTLNs)
	case s.ToldNs < 0:
		return fmt.Errorf("lease %q: told deadline %d ns", s.Name, s.ToldNs)
	}
	return nil
}

// follower reports whether the lease's deadline follows its session's
// renewals.
func (s *leaseSnapshot) follower() bool { return !s.NoRenew && !s.Lapsing }

// tableKey is the lease's key in the table.
func (s *leaseSnapshot) tableKey() string {
	if s.Key == "" {
		return s.Name
	}
	return s.Key
}

// logHeader is the lease log's first line.
type logHeader struct {
	Version int `json:"version"`
}

// logRecord is a line of the lease log: a put or a del of one table key.
type logRecord struct {
	Seq uint64         `json:"seq"`
	Put *leaseSnapshot `json:"put,omitempty"`
	// Del is the table key of a lease that left the table; Token its
	// token (a del ends only the grant it names).
	Del   string `json:"del,omitempty"`
	Token uint64 `json:"token,omitempty"`
}

// writeSessions writes the sessions file atomically: a new file renamed
// over the old one. Neither file is synced to disk: a process's end loses
// nothing written, and what a crash of the host loses does not matter, as
// a state from another boot is discarded (and the default directory is
// under /run, in memory).
func writeSessions(dir string, sr *sessionsRecord) error {
	b, err := json.Marshal(sr)
	if err != nil {
		return err
	}
	return writeFileAtomic(dir, sessionsFileName, b)
}

// writeFileAtomic writes b and a newline as the file name in dir: a new
// file renamed over the old one.
func writeFileAtomic(dir, name string, b []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + ".new"
	os.Remove(tmp)
	f, err := safefs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// newLeaseLog starts a lease log in dir holding recs: a new file, renamed
// over the old one once written, and returned open for appending.
func newLeaseLog(dir string, recs []logRecord) (*os.File, error) {
	path := filepath.Join(dir, leaseLogName)
	tmp := path + ".new"
	os.Remove(tmp)
	f, err := safefs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriterSize(f, 64<<10)
	err = json.NewEncoder(w).Encode(logHeader{Version: stateVersion})
	if err == nil {
		err = appendRecords(w, recs)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	return f, nil
}

// appendRecords writes recs to w, a line each, and flushes it.
func appendRecords(w *bufio.Writer, recs []logRecord) error {
	enc := json.NewEncoder(w)
	for i := range recs {
		if err := enc.Encode(&recs[i]); err != nil {
			return err
		}
	}
	return w.Flush()
}

// loadState reads the state in dir: the sessions file and the lease log,
// or else format 1's file. It returns (nil, nil) when there is none, and
// how many log lines at the end were cut short (ignored).
func loadState(dir string) (st *stateRecord, torn int, err error) {
	b, err := readSmall(filepath.Join(dir, sessionsFileName))
	if errors.Is(err, os.ErrNotExist) {
		st, err := readStateV1(filepath.Join(dir, stateFileNameV1))
		return st, 0, err
	}
	if err != nil {
		return nil, 0, err
	}
	var sr sessionsRecord
	if err := decodeStrict(b, &sr); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", sessionsFileName, err)
	}
	if sr.Version != stateVersion {
		return nil, 0, fmt.Errorf("%s: format version %d, this daemon reads %d (and %d)", sessionsFileName, sr.Version, stateVersion, stateVersionV1)
	}
	// Format 1's file beside these, and newer (of the same boot: another
	// boot's instants do not compare): a daemon of that format ran after
	// this version's last write (a rollback, undone) and knew nothing of
	// these files. Its state is the host's; the next log's seqs come
	// after every one these files cover (review rev1, finding 4).
	if v1, err := readStateV1(filepath.Join(dir, stateFileNameV1)); err == nil && v1 != nil && v1.BootID == sr.BootID && sr.BoottimeOffsetNs == 0 && v1.WrittenNs > sr.WrittenNs {
		v1.lastSeq = sr.Covered
		return v1, 0, nil
	}
	live, last, torn, err := readLeaseLog(filepath.Join(dir, leaseLogName))
	if err != nil {
		return nil, 0, err
	}
	st = &stateRecord{Version: stateVersion, BootID: sr.BootID, BoottimeOffsetNs: sr.BoottimeOffsetNs, WrittenNs: sr.WrittenNs, Session: sr.Session,
		Start: sr.Start, Detached: sr.Detached, Sessions: sr.Sessions, lastSeq: max(sr.Covered, last)}
	byID := map[string]*sessionState{}
	for i := range sr.Sessions {
		byID[sr.Sessions[i].ID] = &sr.Sessions[i]
	}
	for _, r := range live {
		l := *r.Put
		if l.follower() && r.Seq <= sr.Covered {
			// The deadline rule (above).
			l.T0Ns, l.DeadlineNs = 0, 0
			if s := byID[l.SessionID]; s != nil {
				l.T0Ns, l.DeadlineNs = s.T0Ns, s.DeadlineNs
			}
		}
		st.Leases = append(st.Leases, l)
	}
	return st, torn, nil
}

// readLeaseLog reads the lease log: the live puts, in the order of their
// seqs, the highest seq, and how many lines at the end were cut short. No
// log is an empty one.
func readLeaseLog(path string) (live []*logRecord, last uint64, torn int, err error) {
	f, err := safefs.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, 0, nil
	}
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	byKey := map[string]*logRecord{}
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			if len(line) > 0 {
				torn = 1 // cut short: never acknowledged
			}
			break
		}
		if err != nil {
			return nil, 0, 0, err
		}
		if n == 1 {
			var h logHeader
			if err := decodeStrict(line, &h); err != nil || h.Version != stateVersion {
				return nil, 0, 0, fmt.Errorf("%s: not a lease log of format version %d: %q", leaseLogName, stateVersion, bytes.TrimSpace(line))
			}
			continue
		}
		rec := &logRecord{}
		if err := decodeStrict(line, rec); err != nil || (rec.Put == nil) == (rec.Del == "") {
			return nil, 0, 0, fmt.Errorf("%s: line %d is not a put or a del: %v", leaseLogName, n, err)
		}
		if rec.Put != nil {
			if err := rec.Put.check(); err != nil {
				return nil, 0, 0, fmt.Errorf("%s: line %d: %w", leaseLogName, n, err)
			}
		}
		last = max(last, rec.Seq)
		if rec.Put != nil {
			byKey[rec.Put.tableKey()] = rec
		} else if old := byKey[rec.Del]; old != nil && old.Put.Token == rec.Token {
			delete(byKey, rec.Del)
		}
	}
	for _, rec := range byKey {
		live = append(live, rec)
	}
	slices.SortFunc(live, func(a, b *logRecord) int { return cmp.Compare(a.Seq, b.Seq) })
	return live, last, torn, nil
}

// readSmall reads a state file that is rewritten whole, refusing one
// larger than a sessions file can be.
func readSmall(path string) ([]byte, error) {
	f, err := safefs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20+1))
	if err == nil && len(b) > 1<<20 {
		err = fmt.Errorf("%s: larger than 1 MiB", path)
	}
	return b, err
}

// decodeStrict decodes one JSON value of b into v, refusing unknown
// fields and anything after the value.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one value")
	}
	return nil
}

// readStateV1 reads format 1's state file; (nil, nil) when there is
// none.
func readStateV1(path string) (*stateRecord, error) {
	f, err := safefs.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st stateRecord
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if st.Version != stateVersionV1 {
		return nil, fmt.Errorf("%s: format version %d, this daemon reads %d there", path, st.Version, stateVersionV1)
	}
	for _, s := range st.Sessions {
		if s.T0Ns != 0 || s.DeadlineNs != 0 {
			return nil, fmt.Errorf("%s: a session of format 1 with a deadline", path)
		}
	}
	for i := range st.Leases {
		if err := st.Leases[i].check(); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return &st, nil
}

// removeState removes every state file in dir.
func removeState(dir string) {
	for _, name := range []string{sessionsFileName, leaseLogName, stateFileNameV1, timingFileName} {
		os.Remove(filepath.Join(dir, name))
	}
}

// ownerCounters is the highest process number (Start) and detached
// number in the owner ids of leases: a line of the log written before a
// sessions file that counts it (a crash between the two) must not have
// its owner id given again.
func ownerCounters(leases []leaseSnapshot) (start, detached uint64) {
	for _, l := range leases {
		if rest, ok := strings.CutPrefix(l.OwnerID, "detached:"); ok {
			if v, err := strconv.ParseUint(rest, 10, 64); err == nil {
				detached = max(detached, v)
			}
		}
		if rest, ok := strings.CutPrefix(l.OwnerID, "conn:"); ok {
			s, _, _ := strings.Cut(rest, ".")
			if v, err := strconv.ParseUint(s, 10, 64); err == nil {
				start = max(start, v)
			}
		}
	}
	return start, detached
}
