package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

// The timing floor (rho.go) outlives a process (review rev1 open finding
// 1). A drift found late raises it and shortens every deadline already
// handed out; the owners are told at once, and the shortened deadlines'
// log lines are written after. A process killed between the two left
// lines with the deadlines from before, and the next one, which started
// from the configured timing, restored them, told them to a client that
// resumed or checked its lease, and renewed with the smaller drift rate.
//
// So the floor is written, synchronously, to its own small file
// (timingFileName) before any deadline is shortened (shortenDeadlines),
// and a restoring process raises its floor to it and restores no lease
// later than the floor gives from the lease's t0 (restore): exactly what
// a shortening computed, or earlier (a restored t0 is never later than
// the lease's: a session's is the earliest of its followers'). An older
// daemon does not read the file and restores as it did.

// timingFileName is the timing floor's file in the state directory.
const timingFileName = "sidecar-timing.json"

// timingRecord is the timing floor's file.
type timingRecord struct {
	Version int `json:"version"`
	// BootID and BoottimeOffsetNs: as the sessions file's; a file of
	// another boot or time namespace is ignored (its state is refused).
	BootID           string  `json:"boot_id"`
	BoottimeOffsetNs int64   `json:"boottime_offset_ns,omitempty"`
	Rho              float64 `json:"rho"`
	EpsilonNs        int64   `json:"epsilon_ns"`
}

// writeFloor writes t as the timing floor's file, before anyone is told a
// deadline computed with it, each part raised to the highest the file
// must hold (floorHigh): the file never goes lower, not after the
// operator's reset_rho, nor when two raises race (the lower one's write
// coming last), because a deadline shortened with the higher floor may
// have been told and not yet written (review rev3).
//
// A failed write removes the sessions file (and format 1's), so that a
// restart now resumes nothing rather than deadlines from before the
// floor; writeState writes the sessions file again only once the floor's
// file is written (sessionsWithFloor). The owners are told all the same
// (an earlier deadline told late is worse).
func (d *Daemon) writeFloor(t clockwatch.Timing) {
	if d.ps == nil {
		return
	}
	d.ps.floorMu.Lock()
	defer d.ps.floorMu.Unlock()
	d.ps.floorHigh.Rho, d.ps.floorHigh.Epsilon = max(d.ps.floorHigh.Rho, t.Rho), max(d.ps.floorHigh.Epsilon, t.Epsilon)
	d.ps.floorUnwritten = true
	if err := d.writeFloorFileLocked(); err != nil {
		for _, name := range []string{sessionsFileName, stateFileNameV1} {
			if rerr := os.Remove(filepath.Join(d.ps.dir, name)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				err = errors.Join(err, rerr)
			}
		}
		d.log.Error("writing the timing floor failed: the state is set aside until it is written (a restart now resumes no lease)", "dir", d.ps.dir, "err", err)
	}
}

// writeFloorFileLocked writes floorHigh as the timing floor's file, and
// clears floorUnwritten once it is. The caller holds ps.floorMu.
func (d *Daemon) writeFloorFileLocked() error {
	h := d.ps.floorHigh
	b, err := json.Marshal(&timingRecord{Version: stateVersion, BootID: d.ps.boot.ID, BoottimeOffsetNs: d.ps.boot.OffsetNs,
		Rho: h.Rho, EpsilonNs: int64(h.Epsilon)})
	if err == nil {
		err = writeFileAtomic(d.ps.dir, timingFileName, b)
	}
	if err == nil {
		d.ps.floorUnwritten = false
	}
	return err
}

// sessionsWithFloor writes the sessions file sr, after the timing floor's
// file when a write of that failed (writeFloor): never a sessions file
// beside a floor's file lower than a deadline told was shortened with.
// Under ps.floorMu, so that a failed floor write's removal of the
// sessions file is never undone by a write that raced it.
func (d *Daemon) sessionsWithFloor(sr *sessionsRecord) error {
	d.ps.floorMu.Lock()
	defer d.ps.floorMu.Unlock()
	if d.ps.floorUnwritten {
		if err := d.writeFloorFileLocked(); err != nil {
			return fmt.Errorf("the timing floor's file (the sessions file is not written without it): %w", err)
		}
	}
	return writeSessions(d.ps.dir, sr)
}

// restoreFloor raises the floor to the one in the state directory's
// timing file, when it is of boot. A file that cannot be read refuses
// the state.
func (d *Daemon) restoreFloor(boot bootClock) error {
	t, ok, err := readFloor(d.ps.dir, boot)
	if err != nil || !ok {
		return err
	}
	d.floor.raise(t)
	d.ps.floorHigh = t // before anything is served: no write races it
	return nil
}

// readFloor reads the timing floor's file in dir; ok is false when there
// is none of boot.
func readFloor(dir string, boot bootClock) (t clockwatch.Timing, ok bool, err error) {
	b, err := readSmall(filepath.Join(dir, timingFileName))
	if errors.Is(err, os.ErrNotExist) {
		return t, false, nil
	}
	if err != nil {
		return t, false, err
	}
	var tr timingRecord
	switch err := decodeStrict(b, &tr); {
	case err != nil:
		return t, false, fmt.Errorf("%s: %w", timingFileName, err)
	case tr.Version != stateVersion:
		return t, false, fmt.Errorf("%s: format version %d, this daemon reads %d", timingFileName, tr.Version, stateVersion)
	case math.IsNaN(tr.Rho) || tr.Rho < 0 || tr.Rho > clockwatch.MaxObservedRho || tr.EpsilonNs < 0:
		return t, false, fmt.Errorf("%s: rho %v, epsilon %d ns", timingFileName, tr.Rho, tr.EpsilonNs)
	case tr.BootID != boot.ID || tr.BoottimeOffsetNs != boot.OffsetNs:
		return t, false, nil
	}
	return clockwatch.Timing{Rho: tr.Rho, Epsilon: time.Duration(tr.EpsilonNs)}, true, nil
}
