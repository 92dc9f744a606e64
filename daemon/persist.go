package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/internal/safefs"
	"github.com/leaseside/leaseside/ipc"
)

// A restart keeps the host's leases (issue 24.1). The daemon writes what
// a new process needs to go on where it stopped into its state directory
// (Config.StateDir), atomically (a new file renamed over the old one),
// whenever the table changes and after renewals (a grant is answered only
// once the file holds it: persisted): its grantor sessions
// (ids, terms, the last request seq used), and every lease told to a
// caller with its owner, token, term, t0 and deadline. Deadlines are on
// CLOCK_BOOTTIME, which a process restart does not reset, so they carry
// over unchanged: the new process tells nobody a lease is held past the
// deadline the old one computed from the grantor's promise, and extends
// none before a renewal of its own (restored leases are renewed at once).
// A state whose boot id is not this boot's (the host rebooted: BOOTTIME
// started again) is refused and discarded, and so is one in which every
// deadline has passed.

// stateFileName is the state file's name in the state directory.
const stateFileName = "sidecar-state.json"

// stateVersion is the state file's format; another is refused.
const stateVersion = 1

// seqJump is how far the request seq of a restored session jumps past the
// one last written: requests numbered after the last write (a kill -9
// leaves no final write) must never be numbered again, as the grantor
// refuses a seq below its floor and answers a reused one from its record.
const seqJump = 1 << 32

// resumeGrace is how long a restored lease whose owner was a connection
// waits for its client to come back (op resume) before it is released as
// the owner's end.
const resumeGrace = 10 * time.Second

// stateRecord is the state file.
type stateRecord struct {
	Version int `json:"version"`
	// BootID is /proc/sys/kernel/random/boot_id when it was written.
	BootID string `json:"boot_id"`
	// WrittenNs is when it was written, on CLOCK_BOOTTIME.
	WrittenNs int64 `json:"written_boottime_ns"`
	// Session is the daemon's session id, which its grantor sessions'
	// ids start with.
	Session string `json:"session"`
	// Start counts the daemon processes that used these sessions: it
	// keeps connection owners of one process apart from another's.
	Start    uint64          `json:"start"`
	Detached uint64          `json:"detached"`
	Sessions []sessionState  `json:"sessions"`
	Leases   []leaseSnapshot `json:"leases"`
}

// sessionState is one grantor session.
type sessionState struct {
	ID    string `json:"id"`
	TTLNs int64  `json:"ttl_ns"`
	Seq   uint64 `json:"seq"`
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
	Renewals    int64  `json:"renewals,omitempty"`
	Resume      string `json:"resume,omitempty"`
	// Lapsing: no longer renewed, as its owner process was stopped too
	// long.
	Lapsing bool `json:"lapsing,omitempty"`
}

// persister writes the state file; nil when the daemon keeps no state.
type persister struct {
	path  string
	dirty chan struct{}
	// want counts the changes asked to be written (persistLater, under
	// d.mu); done is the count the last write took in, and written is
	// closed and replaced after each write; both under mu.
	want    atomic.Uint64
	mu      sync.Mutex
	done    uint64
	written chan struct{}
	// start is this process's number among those of the sessions.
	start uint64
	// awaiting holds the restored leases whose connection owner has not
	// resumed them yet, under d.mu.
	awaiting map[*lease]bool
}

// persistLater asks for the state file to be written soon.
func (d *Daemon) persistLater() {
	if d.ps == nil {
		return
	}
	d.ps.want.Add(1)
	select {
	case d.ps.dirty <- struct{}{}:
	default:
	}
}

// persisted waits until the state file holds every change made so far
// (a write failed counts: it was logged), or ctx ends. A grant is told
// only after it: a kill -9 right after the reply must not leave a grant
// its holder was told of unknown to the next process, which would give
// it back before the deadline the holder was told.
func (d *Daemon) persisted(ctx context.Context) {
	if d.ps == nil {
		return
	}
	gen := d.ps.want.Load()
	for {
		d.ps.mu.Lock()
		done, ch := d.ps.done, d.ps.written
		d.ps.mu.Unlock()
		if done >= gen {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// bootID reads this boot's id.
func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// snapshot is the state as it is now. Leases nobody was told of (pending)
// are left out: a new process gives them back when the grantor lists
// them.
func (d *Daemon) snapshot(boot string) *stateRecord {
	now := d.clock.Now()
	d.mu.Lock()
	st := &stateRecord{Version: stateVersion, BootID: boot, WrittenNs: now.Nanoseconds(), Session: d.g.session,
		Start: d.ps.start, Detached: d.detached.Load()}
	if len(d.leases) > 0 {
		st.Leases = make([]leaseSnapshot, 0, len(d.leases))
	}
	for _, l := range d.leases {
		if !l.state.valid() || !now.Before(l.deadline) {
			continue
		}
		st.Leases = append(st.Leases, leaseSnapshot{Name: l.name, Key: l.key, Token: l.token, TTLNs: int64(l.ttl), Limit: l.limit,
			Holders: l.holders, Shared: l.shared, Value: l.value, SessionID: l.sess.id, Owner: l.owner, OwnerID: l.ownerID, OwnerPID: l.ownerPID,
			UID: l.uid, LockDelayNs: int64(l.lockDelay), NoRenew: l.noRenew, T0Ns: l.t0.Nanoseconds(), DeadlineNs: l.deadline.Nanoseconds(),
			Renewals: l.renewals, Resume: l.resume, Lapsing: l.state == stateLapsing})
	}
	d.mu.Unlock()
	if len(st.Leases) == 0 {
		st.Leases = nil // "leases": null, as before
	}
	d.g.mu.Lock()
	for _, s := range d.g.sessions {
		st.Sessions = append(st.Sessions, sessionState{ID: s.id, TTLNs: int64(s.ttl), Seq: s.seq})
	}
	d.g.mu.Unlock()
	return st
}

// writeState writes st to the state file atomically: a new file renamed
// over the old one. It is not synced to disk: a process's end loses
// nothing written, and what a crash of the host loses does not matter, as
// a state from another boot is discarded (and the default directory is
// under /run, in memory).
func writeState(path string, st *stateRecord) error {
	tmp := path + ".new"
	os.Remove(tmp)
	f, err := safefs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 64<<10)
	err = encodeState(w, st)
	if err == nil {
		err = w.Flush()
	}
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

// encodeState writes st as json.Marshal would, but for a newline after
// each lease, one lease at a time: the state is written after every
// renewal round, and json.Marshal of 10,000 leases built a few MB of
// output in memory each time (and kept the largest buffer in its pool),
// which doubled the sidecar's heap at 10,000 leases (docs/performance.md,
// "The collector's share of a round trip").
func encodeState(w io.Writer, st *stateRecord) error {
	head := *st
	head.Leases = nil
	b, err := json.Marshal(&head)
	if err != nil {
		return err
	}
	// Leases is stateRecord's last field.
	const last = `"leases":null}`
	if len(st.Leases) == 0 || !bytes.HasSuffix(b, []byte(last)) {
		if len(st.Leases) > 0 {
			return errors.New("state file: leases is not the last field")
		}
		_, err = w.Write(b)
		return err
	}
	if _, err := w.Write(b[:len(b)-len("null}")]); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	sep := []byte("[")
	for i := range st.Leases {
		if _, err := w.Write(sep); err != nil {
			return err
		}
		sep = []byte(",")
		if err := enc.Encode(&st.Leases[i]); err != nil {
			return err
		}
	}
	_, err = w.Write([]byte("]}"))
	return err
}

// readState reads the state file; (nil, nil) when there is none.
func readState(path string) (*stateRecord, error) {
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
	if st.Version != stateVersion {
		return nil, fmt.Errorf("%s: format version %d, this daemon reads %d", path, st.Version, stateVersion)
	}
	return &st, nil
}

// persistLoop writes the state file when asked, and once more when ctx
// ends. Changes made while a write runs go in the next one, together.
func (d *Daemon) persistLoop(ctx context.Context, boot string) {
	write := func() {
		gen := d.ps.want.Load() // the snapshot holds every change up to it
		if err := writeState(d.ps.path, d.snapshot(boot)); err != nil {
			d.log.Error("writing the state file failed: a restart now would not keep every lease", "path", d.ps.path, "err", err)
		}
		d.ps.mu.Lock()
		d.ps.done = max(d.ps.done, gen)
		close(d.ps.written)
		d.ps.written = make(chan struct{})
		d.ps.mu.Unlock()
	}
	for {
		select {
		case <-ctx.Done():
			write()
			return
		case <-d.ps.dirty:
		}
		write()
	}
}

// openState prepares the state directory and restores what a previous
// process left in it. It is called by New, before anything is served.
func (d *Daemon) openState() error {
	dir := d.cfg.StateDir
	if err := safefs.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	d.ps = &persister{path: filepath.Join(dir, stateFileName), dirty: make(chan struct{}, 1), written: make(chan struct{}), start: 1, awaiting: map[*lease]bool{}}
	boot, err := bootID()
	if err != nil {
		return fmt.Errorf("state dir: reading the boot id: %w", err)
	}
	st, err := readState(d.ps.path)
	if err != nil {
		d.log.Error("the state file cannot be read; starting without the leases it held (they lapse at the grantors)", "err", err)
		os.Remove(d.ps.path)
		return nil
	}
	if st == nil {
		return nil
	}
	if why := d.unresumable(st, boot); why != "" {
		d.log.Warn("not resuming the previous daemon's leases: "+why+"; the state file is discarded", "path", d.ps.path,
			"leases", len(st.Leases), "session", st.Session)
		os.Remove(d.ps.path)
		return nil
	}
	d.restore(st)
	return nil
}

// unresumable says why st cannot be resumed now, or "".
func (d *Daemon) unresumable(st *stateRecord, boot string) string {
	if st.BootID != boot {
		return fmt.Sprintf("the host rebooted since it was written (boot id %s, now %s): CLOCK_BOOTTIME started again, so its deadlines mean nothing", st.BootID, boot)
	}
	now := d.clock.Now()
	if now.Nanoseconds() < st.WrittenNs {
		return "it was written later than now by CLOCK_BOOTTIME (not this boot's)"
	}
	if len(st.Leases) == 0 {
		// No lease to keep: the sessions are reused only while the
		// grantors may still keep them.
		shortest := time.Duration(0)
		for _, s := range st.Sessions {
			if shortest == 0 || time.Duration(s.TTLNs) < shortest {
				shortest = time.Duration(s.TTLNs)
			}
		}
		if now.Sub(clockwatch.Instant(st.WrittenNs)) > shortest {
			return "it holds no lease, and its sessions' terms ran out"
		}
		return ""
	}
	for _, l := range st.Leases {
		if now.Before(clockwatch.Instant(l.DeadlineNs)) {
			return ""
		}
	}
	return fmt.Sprintf("every lease's deadline passed while no daemon ran (the last %v ago)", now.Sub(clockwatch.Instant(st.WrittenNs)).Round(time.Millisecond))
}

// restore takes in the state of a previous process: its sessions (their
// request seqs jump ahead, seqJump), and its leases that are still valid,
// each due for renewal at once. A pid owner is watched again if it is the
// same process (pid and start time), and its lease ends as the owner's
// end otherwise; a connection owner has resumeGrace to resume its lease.
func (d *Daemon) restore(st *stateRecord) {
	g := d.g
	g.mu.Lock()
	g.session = st.Session
	byID := map[string]*gsession{}
	for _, s := range st.Sessions {
		gs := &gsession{id: s.ID, ttl: time.Duration(s.TTLNs), seq: s.Seq + seqJump, inflight: map[uint64]struct{}{}}
		g.sessions[gs.ttl] = gs
		byID[gs.id] = gs
	}
	g.mu.Unlock()
	d.ps.start = st.Start + 1
	d.detached.Store(st.Detached)

	now := d.clock.Now()
	var kept, lapsed, gone int
	var ended []*lease
	d.mu.Lock()
	// Grants the previous process made and never listed (a reply it did
	// not live to see, a release it did not send, a grant it named untold
	// and did not see ended) are not ended by this one: it cannot tell
	// them from grants whose owner may still act (issue 22 item 3): they
	// stand while the session is renewed, until it ends at the grantor.
	for _, r := range st.Leases {
		sess := byID[r.SessionID]
		dl := clockwatch.Instant(r.DeadlineNs)
		if sess == nil || !now.Before(dl) {
			lapsed++
			d.log.Warn("a lease lapsed while no daemon ran; not resuming it", "lease", r.Name, "token", r.Token,
				"late", now.Sub(dl).Round(time.Millisecond))
			continue
		}
		l := &lease{name: r.Name, key: r.Key, token: r.Token, ttl: time.Duration(r.TTLNs), limit: r.Limit, holders: r.Holders, shared: r.Shared, value: r.Value,
			sess: sess, owner: r.Owner, ownerID: r.OwnerID, ownerPID: r.OwnerPID, uid: r.UID, lockDelay: time.Duration(r.LockDelayNs),
			noRenew: r.NoRenew, t0: clockwatch.Instant(r.T0Ns), deadline: dl, renewals: r.Renewals, resume: r.Resume,
			stopWatch: func() {}}
		l.renewAt = 0 // a renewal of this process's own before anything is extended
		if l.noRenew {
			l.renewAt = never
		}
		if d.leases[l.tableKey()] != nil {
			continue // a duplicate in the file: keep the first
		}
		d.stepLocked(l, evGranted, "", now) // held, as the previous process held it
		if r.Lapsing {
			d.stepLocked(l, evOwnerStopped, ipc.ReasonOwnerStopped, now)
		}
		kept++
		switch l.owner {
		case ipc.OwnerPID:
			if err := d.watchAgainLocked(l); err != nil {
				d.log.Info("a restored lease's owner process is gone", "lease", l.name, "token", l.token, "pid", l.ownerPID, "why", err)
				ended = append(ended, l)
				gone++
			}
		case ipc.OwnerConnection:
			d.ps.awaiting[l] = true
		}
	}
	for _, l := range ended {
		d.ownerEndedLocked(l, ipc.ReasonOwnerExited)
	}
	d.mu.Unlock()
	d.log.Info("resumed the previous daemon's leases", "session", st.Session, "leases", kept, "lapsed", lapsed, "owner_gone", gone,
		"awaiting_resume", len(d.ps.awaiting), "down", now.Sub(clockwatch.Instant(st.WrittenNs)).Round(time.Millisecond))
}

// watchAgainLocked watches the owner process of a restored pid-owned
// lease, if it is the same process that acquired it: the same pid with
// the same start time (a reused pid is another process). The caller holds
// d.mu.
func (d *Daemon) watchAgainLocked(l *lease) error {
	want, ok := ownerStart(l.ownerID)
	if !ok {
		return fmt.Errorf("owner id %q names no process", l.ownerID)
	}
	stop, err := watchPID(l.ownerPID, func() { d.ownerEnded(l, ipc.ReasonOwnerExited) })
	if err != nil {
		return err
	}
	// Read after the pidfd is open: the pidfd names the process that had
	// the pid then, and this is its start time.
	start, _, err := processIdentity(l.ownerPID)
	if err != nil || start != want {
		stop()
		if err == nil {
			err = fmt.Errorf("pid %d is another process now (started at %d, the owner at %d)", l.ownerPID, start, want)
		}
		return err
	}
	l.stopWatch = stop
	return nil
}

// ownerStart is the start time in a pid owner's id ("pid:PID:START").
func ownerStart(ownerID string) (uint64, bool) {
	rest, ok := strings.CutPrefix(ownerID, "pid:")
	if !ok {
		return 0, false
	}
	_, start, ok := strings.Cut(rest, ":")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(start, 10, 64)
	return v, err == nil
}

// resumeGraceTimer starts the restored connection owners' resumeGrace, or
// returns nil when no restored lease awaits its owner. Run calls it before
// it serves the socket, so that the grace counts from the start, however
// late awaitResumes' goroutine runs: one that made its timer only once it
// ran could start the grace after a client had already resumed (and a
// test on the fake clock, advancing it by the grace once the client was
// back, could advance it before the timer existed, so it never fired).
func (d *Daemon) resumeGraceTimer() clockwatch.Timer {
	d.mu.Lock()
	n := len(d.ps.awaiting)
	d.mu.Unlock()
	if n == 0 {
		return nil
	}
	return d.clock.NewTimer(resumeGrace)
}

// awaitResumes releases, when the grace timer t (resumeGraceTimer) fires,
// every restored lease whose connection owner has not resumed it. A nil t
// means none awaits.
func (d *Daemon) awaitResumes(ctx context.Context, t clockwatch.Timer) {
	if t == nil {
		return
	}
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C():
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for l := range d.ps.awaiting {
		delete(d.ps.awaiting, l)
		if l.conn == nil {
			d.log.Info("a restored lease's client did not resume it in time", "lease", l.name, "token", l.token, "grace", resumeGrace)
			d.ownerEndedLocked(l, ipc.ReasonOwnerDisconnected)
		}
	}
}
