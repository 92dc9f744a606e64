package daemon

import (
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

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

	raised := d.floor.get()
	raised.Rho = 0.2
	d.floor.raise(raised)
	d.shortenDeadlines(d.floor.get())
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
