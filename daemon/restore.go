package daemon

// Restoring a previous process's state (persist.go writes it): whether
// it may be resumed, the sessions and leases taken back in, their owners
// watched again, and the grace a connection's client has to come back.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// A restored session's request seqs start at the process's start on
// CLOCK_BOOTTIME in ns (restoredSeq): requests numbered after the last
// write (a kill -9 leaves no final write; a process whose writes all
// failed leaves none) must never be numbered again, as the grantor
// refuses a seq below its floor and answers a reused one from its record.
// A process numbers fewer requests than the ns it runs, so every seq it
// used is below the start of any later process of this boot (no state of
// another is restored).
//
// seqJump is how far the seq jumps past the one written when that is not
// below the start: a state of a daemon that numbered from the written seq
// plus seqJump (before the rule above), whose seqs may run ahead of the
// clock.
const seqJump = 1 << 32

// restoredSeq is the last seq taken as used in a restored session whose
// written seq is written, by a process started at start (ns).
func restoredSeq(written, start uint64) uint64 {
	if written < start {
		return start
	}
	return written + seqJump
}

// resumeGrace is how long a restored lease whose owner was a connection
// waits for its client to come back (op resume) before it is released as
// the owner's end.
const resumeGrace = 10 * time.Second

// unresumable says why st cannot be resumed now, or "".
func (d *Daemon) unresumable(st *stateRecord, boot bootClock) string {
	if st.BootID != boot.ID {
		return fmt.Sprintf("the host rebooted since it was written (boot id %s, now %s): CLOCK_BOOTTIME started again, so its deadlines mean nothing", st.BootID, boot.ID)
	}
	if st.BoottimeOffsetNs != boot.OffsetNs {
		return fmt.Sprintf("it was written in a time namespace with another CLOCK_BOOTTIME offset (%v, now %v), so its deadlines are not this process's instants",
			time.Duration(st.BoottimeOffsetNs), time.Duration(boot.OffsetNs))
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
// request seqs start at this process's start, restoredSeq), and its leases that are still valid,
// each due for renewal at once. A pid owner is watched again if it is the
// same process (pid and start time), and its lease ends as the owner's
// end otherwise; a connection owner has resumeGrace to resume its lease.
func (d *Daemon) restore(st *stateRecord) {
	g := d.g
	now := d.clock.Now()
	floor := uint64(max(now.Nanoseconds(), 0))
	g.mu.Lock()
	g.session = st.Session
	byID := map[string]*gsession{}
	for _, s := range st.Sessions {
		gs := &gsession{id: s.ID, ttl: time.Duration(s.TTLNs), seq: restoredSeq(s.Seq, floor), inflight: map[uint64]struct{}{}}
		g.sessions[gs.ttl] = gs
		byID[gs.id] = gs
	}
	g.mu.Unlock()
	// Owner ids must never be given twice in these sessions: a grantor
	// asked by a session's owner for a name that owner holds ends that
	// grant and makes a new one, while its first holder may still believe
	// it. A process whose writes failed told grants (persisted counts a
	// failed write) under ids no file holds, and the next one restores
	// the older state: so both counters start at least at this process's
	// start on CLOCK_BOOTTIME in ns, later than any earlier process's of
	// this boot (no state of another is restored), which gave fewer ids
	// than the nanoseconds it ran (review rev1, finding 1).
	start, detached := ownerCounters(st.Leases)
	d.ps.start = max(st.Start, start, floor) + 1
	d.detached.Store(max(st.Detached, detached, floor))
	d.previous = &previousOwners{start: now, detached: d.detached.Load(), conn: d.ps.start, restored: map[grantKey]bool{}, told: map[grantKey]clockwatch.Instant{}}
	d.ps.seq = st.lastSeq // the new log's lines come after every old one

	var kept, lapsed, gone int
	var ended []*lease
	d.mu.Lock()
	// Grants the previous process made and did not write (a reply it did
	// not live to see, a grant told while its writes failed) and those
	// that lapse here are not ended now: an owner may still act on one
	// until the deadline it was told (issue 22 item 3). Once that has
	// passed, the keepalive listings end those of a previous process's
	// owners (orphans.go).
	for _, r := range st.Leases {
		sess := byID[r.SessionID]
		dl := clockwatch.Instant(r.DeadlineNs)
		if sess != nil && r.T0Ns != 0 {
			// No later than the timing floor gives from its t0: a
			// deadline shortened by a drift and told before its line
			// was written (floorfile.go; review rev1 open finding 1).
			dl = min(dl, d.floor.get().HolderDeadline(clockwatch.Instant(r.T0Ns), time.Duration(r.TTLNs)))
		}
		// The latest deadline its owner may have been told: the one a
		// previous process wrote, or one it took over from the process
		// before it and still held the release back for.
		if written := max(clockwatch.Instant(r.DeadlineNs), clockwatch.Instant(r.ToldNs)); dl.Before(written) {
			d.previous.told[grantKey{r.Name, r.Token}] = written // orphans.go, heldBack
		}
		if sess == nil || !now.Before(dl) {
			lapsed++
			d.log.Warn("a lease lapsed while no daemon ran; not resuming it", "lease", r.Name, "token", r.Token,
				"late", now.Sub(dl).Round(time.Millisecond))
			continue
		}
		owner, _ := ownerOf(r.Owner) // loadState checked it
		l := &lease{name: r.Name, key: r.Key, token: r.Token, ttl: time.Duration(r.TTLNs), limit: int32(r.Limit), holders: uint32(r.Holders), shared: r.Shared, value: r.Value,
			sess: sess, owner: owner, ownerID: r.OwnerID, ownerPID: r.OwnerPID, uid: uint32(r.UID), lockDelay: time.Duration(r.LockDelayNs),
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
		d.previous.restored[grantKey{l.name, l.token}] = true
		switch l.owner {
		case ownerProcess:
			if err := d.watchAgainLocked(l); err != nil {
				d.log.Info("a restored lease's owner process is gone", "lease", l.name, "token", l.token, "pid", l.ownerPID, "why", err)
				ended = append(ended, l)
				gone++
			}
		case ownerConnection:
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
