package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/internal/safefs"
)

// A restart keeps the host's leases (issue 24.1). The daemon writes what
// a new process needs to go on where it stopped into its state directory
// (Config.StateDir; the files and their rules: statefile.go): its grantor
// sessions (ids, terms, the last request seq used, the deadline their
// leases were renewed to), and every lease told to a caller with its
// owner, token, term, t0 and deadline, when it is told and when it ends. A
// grant is answered only once written (persisted). Deadlines are on
// CLOCK_BOOTTIME, which a process restart does not reset, so they carry
// over (the earliest of a session's, at most the one a lease had): the
// new process tells nobody a lease is held past the deadline the old one
// computed from the grantor's promise, and extends none before a renewal
// of its own (restored leases are renewed at once). A state whose boot id
// is not this boot's (the host rebooted: BOOTTIME started again) is
// refused and discarded, and so is one in which every deadline has
// passed.

// stateLockName is the file in the state directory a daemon holds an
// exclusive flock on, with its pid in it, from New until Run returns.
const stateLockName = "sidecar.lock"

// ErrStateDirInUse is returned by New when another process holds the
// state directory: two daemons on one directory would share grantor
// sessions and request seqs, and write over each other's files.
var ErrStateDirInUse = errors.New("daemon: state dir in use")

// persister writes the state files; nil when the daemon keeps no state.
type persister struct {
	dir   string
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

	// Under d.mu: queue holds the log lines not written yet, seq is the
	// last line's seq (it only grows, across processes too), rebuild asks
	// the next write to start a new log from the table (a process's first
	// write, a compaction, after a failed write), and inLog counts the
	// lines of the log with those queued.
	queue   []logRecord
	seq     uint64
	rebuild bool
	inLog   int

	// boot is the CLOCK_BOOTTIME the files are written under.
	boot bootClock
	// floorMu serialises the writes of the timing floor's file
	// (floorfile.go); floorHigh, under it, is the highest floor the
	// file has held or was to hold in this process's life (the one
	// restored, or raised since): the file never goes below it; and
	// floorUnwritten says the last write of it failed.
	floorMu        sync.Mutex
	floorHigh      clockwatch.Timing
	floorUnwritten bool

	// lock holds the state directory's lock (stateLockName) while open.
	lock *os.File

	// Of persistLoop's: the log open for appending, its writer, and
	// whether format 1's file is still to be removed.
	logf     *os.File
	logw     *bufio.Writer
	removeV1 bool
}

// persistLater asks for the state to be written soon.
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

// persisted waits until the state files hold every change made so far
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

// snapshotLocked is l's line in the log: with the deadline a previous
// process wrote of it, when later than l's (orphans.go, heldBack), so
// that a process after this one holds its owner's end back as this one
// does. The caller holds d.mu.
func (d *Daemon) snapshotLocked(l *lease) *leaseSnapshot {
	s := &leaseSnapshot{Name: l.name, Key: l.key, Token: l.token, TTLNs: int64(l.ttl), Limit: int(l.limit),
		Holders: int(l.holders), Shared: l.shared, Value: l.value, SessionID: l.sess.id, Owner: l.owner.String(), OwnerID: l.ownerID, OwnerPID: l.ownerPID,
		UID: int(l.uid), LockDelayNs: int64(l.lockDelay), NoRenew: l.noRenew, T0Ns: l.t0.Nanoseconds(), DeadlineNs: l.deadline.Nanoseconds(),
		Renewals: l.renewals, Resume: l.resume, Lapsing: l.state == stateLapsing}
	if p := d.previous; p != nil {
		if told := p.told[grantKey{l.name, l.token}]; told.After(l.deadline) {
			s.ToldNs = told.Nanoseconds()
		}
	}
	return s
}

// follower reports whether l's deadline follows its session's renewals.
func (l *lease) follower() bool { return !l.noRenew && l.state != stateLapsing }

// logPutLocked queues l's facts as they are now for the log: when it is
// told as held, and when a fact changes. The caller holds d.mu.
func (d *Daemon) logPutLocked(l *lease) {
	if d.ps == nil {
		return
	}
	d.ps.seq++
	d.ps.queue = append(d.ps.queue, logRecord{Seq: d.ps.seq, Put: d.snapshotLocked(l)})
	d.persistLater()
}

// logStepLocked queues what a transition of l from state from means for
// the log (stepLocked): a put as it becomes valid or lapses, a del as it
// stops being valid. The caller holds d.mu.
func (d *Daemon) logStepLocked(l *lease, from leaseState, ev leaseEvent) {
	switch to := l.state; {
	case d.ps == nil:
	case !from.valid() && to.valid(), to == stateLapsing && from != stateLapsing:
		d.logPutLocked(l)
	case from.valid() && !to.valid():
		d.ps.seq++
		d.ps.queue = append(d.ps.queue, logRecord{Seq: d.ps.seq, Del: l.tableKey(), Token: l.token})
		d.persistLater()
	case ev == evShortened:
		// Its deadline, earlier, on a line of its own: a follower's last
		// line may be covered by a sessions file written before, whose
		// deadline for the session a crash before the next one would
		// restore (review rev1, finding 3).
		d.logPutLocked(l)
	}
}

// takeLocked takes what the next write holds: the log lines queued (or
// the whole table, for a new log), the last seq given, and for each
// session the earliest t0 and the earliest deadline of its follower
// leases. Leases nobody was told of (pending) have no line. The caller
// holds d.mu.
func (d *Daemon) takeLocked() (recs []logRecord, fresh bool, covered uint64, earliest map[*gsession][2]clockwatch.Instant) {
	ps := d.ps
	valid := 0
	earliest = map[*gsession][2]clockwatch.Instant{}
	for _, l := range d.leases {
		if !l.state.valid() {
			continue
		}
		valid++
		if !l.follower() {
			continue
		}
		if e, ok := earliest[l.sess]; !ok {
			earliest[l.sess] = [2]clockwatch.Instant{l.t0, l.deadline}
		} else {
			earliest[l.sess] = [2]clockwatch.Instant{min(e[0], l.t0), min(e[1], l.deadline)}
		}
	}
	fresh = ps.rebuild || ps.inLog+len(ps.queue) > max(2*valid, compactMin)
	if fresh {
		ps.queue, ps.inLog = ps.queue[:0], 0
		for _, l := range d.leases {
			if l.state.valid() {
				ps.seq++
				ps.queue = append(ps.queue, logRecord{Seq: ps.seq, Put: d.snapshotLocked(l)})
			}
		}
	}
	recs, covered = ps.queue, ps.seq
	ps.inLog += len(recs)
	ps.queue, ps.rebuild = nil, false
	return recs, fresh, covered, earliest
}

// writeState writes the log lines queued and then the sessions file
// (statefile.go). A failed log write starts a new log at the next write.
func (d *Daemon) writeState(boot bootClock) error {
	now := d.clock.Now()
	d.mu.Lock()
	recs, fresh, covered, earliest := d.takeLocked()
	sr := &sessionsRecord{Version: stateVersion, BootID: boot.ID, BoottimeOffsetNs: boot.OffsetNs, WrittenNs: now.Nanoseconds(), Session: d.g.session,
		Start: d.ps.start, Detached: d.detached.Load(), Covered: covered}
	deadlines := make(map[*gsession][2]int64, len(earliest))
	for s, e := range earliest {
		deadlines[s] = [2]int64{e[0].Nanoseconds(), e[1].Nanoseconds()}
	}
	d.mu.Unlock()
	d.g.mu.Lock()
	for _, s := range d.g.sessions {
		dl := deadlines[s]
		sr.Sessions = append(sr.Sessions, sessionState{ID: s.id, TTLNs: int64(s.ttl), Seq: s.seq, T0Ns: dl[0], DeadlineNs: dl[1]})
	}
	d.g.mu.Unlock()

	err := d.writeLog(recs, fresh)
	if err != nil {
		d.mu.Lock()
		d.ps.rebuild = true
		d.mu.Unlock()
		return err
	}
	if err := d.sessionsWithFloor(sr); err != nil { // floorfile.go
		return err
	}
	if d.ps.removeV1 {
		d.ps.removeV1 = false
		os.Remove(filepath.Join(d.ps.dir, stateFileNameV1))
	}
	return nil
}

// writeLog appends recs to the log, or starts a new one with them.
func (d *Daemon) writeLog(recs []logRecord, fresh bool) error {
	ps := d.ps
	if fresh || ps.logf == nil {
		if ps.logf != nil {
			ps.logf.Close()
			ps.logf = nil
		}
		if !fresh {
			return fmt.Errorf("the lease log is not open")
		}
		f, err := newLeaseLog(ps.dir, recs)
		if err != nil {
			return err
		}
		ps.logf = f
		if ps.logw == nil {
			ps.logw = bufio.NewWriterSize(f, 16<<10)
		}
		ps.logw.Reset(f)
		return nil
	}
	if len(recs) == 0 {
		return nil
	}
	err := appendRecords(ps.logw, recs)
	if err != nil {
		ps.logf.Close()
		ps.logf = nil
	}
	return err
}

// persistLoop writes the state when asked, and once more when ctx ends.
// Changes made while a write runs go in the next one, together.
func (d *Daemon) persistLoop(ctx context.Context, boot bootClock) {
	write := func() {
		gen := d.ps.want.Load() // the write holds every change up to it
		if err := d.writeState(boot); err != nil {
			d.log.Error("writing the state failed: a restart now would not keep every lease", "dir", d.ps.dir, "err", err)
		}
		d.ps.mu.Lock()
		d.ps.done = max(d.ps.done, gen)
		close(d.ps.written)
		d.ps.written = make(chan struct{})
		d.ps.mu.Unlock()
	}
	defer func() {
		if d.ps.logf != nil {
			d.ps.logf.Close()
			d.ps.logf = nil
		}
	}()
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
	lock, err := lockStateDir(dir)
	if err != nil {
		return err
	}
	// The first write starts a new log, from the table as restored.
	d.ps = &persister{dir: dir, dirty: make(chan struct{}, 1), written: make(chan struct{}), start: 1, awaiting: map[*lease]bool{}, rebuild: true, lock: lock}
	d.persistLater()
	boot, err := readBootClock()
	if err != nil {
		return fmt.Errorf("state dir: reading the boot id and time namespace offsets: %w", err)
	}
	d.ps.boot = boot
	st, torn, err := loadState(dir)
	if err == nil && st != nil {
		err = d.restoreFloor(boot)
	}
	if err != nil {
		d.log.Error("the state cannot be read; starting without the leases it held (they lapse at the grantors)", "err", err)
		removeState(dir)
		return nil
	}
	if st == nil {
		return nil
	}
	if torn > 0 {
		d.log.Warn("the lease log ends in a line cut short (a write the previous daemon did not finish, told to nobody); ignoring it", "dir", dir)
	}
	d.ps.removeV1 = true // read, or older than these files: stale once written
	if why := d.unresumable(st, boot); why != "" {
		d.log.Warn("not resuming the previous daemon's leases: "+why+"; the state is discarded", "dir", dir,
			"leases", len(st.Leases), "session", st.Session)
		removeState(dir)
		return nil
	}
	d.restore(st)
	return nil
}

// lockStateDir takes dir for this process (safefs.Lock on
// stateLockName): one held by another process fails at once with
// ErrStateDirInUse, naming the dir and the holder's pid.
func lockStateDir(dir string) (*os.File, error) {
	f, err := safefs.Lock(filepath.Join(dir, stateLockName))
	var held *safefs.LockedError
	switch {
	case errors.As(err, &held):
		who := "another process"
		if held.PID > 0 {
			who = "pid " + strconv.Itoa(held.PID)
		}
		return nil, fmt.Errorf("%w: %s is in use by %s (another leaseside daemon keeps its state there; give each daemon its own --state-dir)",
			ErrStateDirInUse, dir, who)
	case err != nil:
		return nil, fmt.Errorf("state dir: %w", err)
	}
	return f, nil
}

// unlockState lets the state directory go: Run calls it once the last
// write is done.
func (d *Daemon) unlockState() {
	if d.ps != nil && d.ps.lock != nil {
		d.ps.lock.Close()
		d.ps.lock = nil
	}
}
