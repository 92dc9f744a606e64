package daemon

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/internal/safefs"
)

// driftTo has d find a drift that raises its timing floor to rho and
// shorten its deadlines by it, as the clock watcher's event does, and
// returns the floor raised to.
func driftTo(d *Daemon, rho float64) clockwatch.Timing {
	raised := d.floor.get()
	raised.Rho = rho
	d.floor.raise(raised)
	d.shortenDeadlines(d.floor.get())
	return raised
}

// TestShortenedThenCrashBeforeWrite (review rev1 open finding 1): a drift
// found late shortens a follower lease's and a no_renew lease's deadlines
// and tells their owners at once; the process dies before the log lines
// of the shortening are written (the crash point: no write after
// shortenDeadlines). The next process restores neither later than the
// shortened deadline the owners were told (a resume or a check would hand
// it out before any renewal), and renews with the raised floor. Fails
// without the timing floor's file: restored 1 s and 1.6 s later (terms of
// 9 s and 15 s at rho 20%), and the floor back at the configured 500 ppm.
func TestShortenedThenCrashBeforeWrite(t *testing.T) {
	r := newStateDirRig(t)
	d := r.d
	follower := r.grant(r.sess[0], false, false)
	noRenew := r.grant(r.sess[1], true, false)
	r.clock.Advance(time.Second)
	r.renew(r.sess[0])
	if err := d.writeState(d.ps.boot); err != nil {
		t.Fatal(err)
	}
	before := map[string]clockwatch.Instant{follower.name: follower.deadline, noRenew.name: noRenew.deadline}

	raised := driftTo(d, 0.2)
	told := map[string]clockwatch.Instant{}
	d.mu.Lock()
	for name := range before {
		told[name] = d.leases[name].deadline
		if !told[name].Before(before[name]) {
			t.Fatalf("%s: not shortened (%v, before %v)", name, told[name], before[name])
		}
	}
	d.mu.Unlock()

	d.unlockState() // the crash: nothing written after the shortening
	d2, err := New(d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d2.stop(); d2.unlockState() })
	if got := d2.floor.get().Rho; got < raised.Rho {
		t.Errorf("the restored floor's rho is %v, want at least %v", got, raised.Rho)
	}
	for name, want := range told {
		l := d2.leases[name]
		if l == nil {
			t.Fatalf("%s not restored", name)
		}
		if l.deadline.After(want) {
			t.Errorf("%s restored with a deadline %v later than the shortened one its owner was told", name, l.deadline.Sub(want))
		}
	}
}

// TestFloorFileNeverLowered (review rev3): the timing floor's file only
// ever rises in a process's life. A drift shortens deadlines at rho 20%
// and their owners are told; the operator's reset_rho lowers the floor;
// a drift found again raises it to 10%, which shortens nothing (the told
// deadlines are earlier already) but wrote the file; the process dies
// before any log line of the first shortening is written. The next
// process must restore nothing later than the owners were told. Fails
// without the file's own high-water mark: the file said 10%, and the
// leases were restored later than told.
func TestFloorFileNeverLowered(t *testing.T) {
	r := newStateDirRig(t)
	d := r.d
	l := r.grant(r.sess[0], true, false)
	if err := d.writeState(d.ps.boot); err != nil {
		t.Fatal(err)
	}
	high := driftTo(d, 0.2)
	d.mu.Lock()
	told := d.leases[l.name].deadline
	d.mu.Unlock()

	d.resetRho()
	driftTo(d, 0.1)

	d.unlockState() // the crash: no log line written since the shortening
	d2, err := New(d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d2.stop(); d2.unlockState() })
	if got := d2.floor.get().Rho; got < high.Rho {
		t.Errorf("the restored floor's rho is %v, want at least %v", got, high.Rho)
	}
	if rl := d2.leases[l.name]; rl == nil {
		t.Fatalf("%s not restored", l.name)
	} else if rl.deadline.After(told) {
		t.Errorf("restored with a deadline %v later than the shortened one its owner was told", rl.deadline.Sub(told))
	}
}

// TestFloorWriteFailedSetsStateAside (review rev3): a drift shortens a
// lease's deadline and its owner is told, but the timing floor's file
// cannot be written; the process dies before the log line of the
// shortening is written. The next process must not restore the deadline
// from before the shortening: the sessions file was set aside, so it
// resumes nothing. Once the floor's file can be written again, a state
// write writes it and the sessions file, and a restart resumes the lease
// no later than told. Fails without setting the state aside: restored
// 1 s later than told (rho 20%, 9 s term).
func TestFloorWriteFailedSetsStateAside(t *testing.T) {
	r := newStateDirRig(t)
	d := r.d
	l := r.grant(r.sess[0], true, false)
	if err := d.writeState(d.ps.boot); err != nil {
		t.Fatal(err)
	}
	// The floor's file cannot be written: its temporary name is a
	// directory that is not empty.
	block := filepath.Join(r.dir, timingFileName+".new")
	if err := os.MkdirAll(filepath.Join(block, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	driftTo(d, 0.2)
	d.mu.Lock()
	told := d.leases[l.name].deadline
	d.mu.Unlock()

	restart := func() *Daemon {
		t.Helper()
		d.unlockState() // the crash
		d2, err := New(d.cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d2.stop(); d2.unlockState() })
		return d2
	}
	d2 := restart()
	if rl := d2.leases[l.name]; rl != nil && rl.deadline.After(told) {
		t.Fatalf("restored with a deadline %v later than the shortened one its owner was told", rl.deadline.Sub(told))
	}
	d2.stop()
	d2.unlockState()

	// Written again once it can be: the floor's file first. (The first
	// process takes its state dir back for this.)
	lock, err := safefs.Lock(filepath.Join(r.dir, stateLockName))
	if err != nil {
		t.Fatal(err)
	}
	d.ps.lock = lock
	os.RemoveAll(block)
	if err := d.writeState(d.ps.boot); err != nil {
		t.Fatal(err)
	}
	d3 := restart()
	rl := d3.leases[l.name]
	if rl == nil {
		t.Fatalf("%s not restored once the state was written", l.name)
	}
	if rl.deadline.After(told) {
		t.Fatalf("restored with a deadline %v later than told", rl.deadline.Sub(told))
	}
}
