package daemon

import (
	"sync"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// timingFloor is the largest drift rate (rho) and safety margin
// (epsilon) deadlines have been computed with in the daemon's life: the
// configured ones, raised by the drift observed against the grantor and
// by what grantors stated (grantortiming.go). It only ever rises: a new
// grantor leader (whose clock needs new samples before its rate is known)
// or a quieter stretch of samples does not lengthen deadlines back. Only
// the operator lowers it (the reset_rho op), to what is known then.
type timingFloor struct {
	mu sync.Mutex
	t  clockwatch.Timing
}

// raise lifts the floor to t, each part on its own, and reports whether
// either rose.
func (f *timingFloor) raise(t clockwatch.Timing) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	rose := t.Rho > f.t.Rho || t.Epsilon > f.t.Epsilon
	f.t.Rho, f.t.Epsilon = max(f.t.Rho, t.Rho), max(f.t.Epsilon, t.Epsilon)
	return rose
}

func (f *timingFloor) get() clockwatch.Timing {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *timingFloor) set(t clockwatch.Timing) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = t
}

// current is the timing model known now, without the floor: the
// configured one with rho raised to the observed drift plus margin, and
// rho and epsilon to the largest a grantor stated.
func (d *Daemon) current() clockwatch.Timing {
	return d.withGrantorTiming(d.watcher.EffectiveTiming(d.cfg.Timing))
}

// timing is the timing model deadlines are computed with now: the floor,
// raised to what is known now. It can only make deadlines earlier. When
// it rises, every deadline already handed out is shortened to what the
// new model gives (shortenDeadlines), so the caller must not hold d.mu.
func (d *Daemon) timing() clockwatch.Timing {
	if t := d.current(); d.floor.raise(t) {
		d.shortenDeadlines(d.floor.get())
	}
	return d.floor.get()
}

// atLeastFloorLocked is t with each part raised to the floor now. A
// caller reads the timing (timing) before it takes d.mu, and a drift
// found in between raises the floor and shortens every deadline then:
// a deadline it sets after must not be later than the raised floor gives
// (review rev3). The caller holds d.mu.
func (d *Daemon) atLeastFloorLocked(t clockwatch.Timing) clockwatch.Timing {
	f := d.floor.get()
	t.Rho, t.Epsilon = max(t.Rho, f.Rho), max(t.Epsilon, f.Epsilon)
	return t
}

// shortenDeadlines recomputes every held lease's deadline with t, from the
// t0 of the request that set it, and moves it earlier where that is
// shorter: a drift found late applies to the deadlines already told. The
// owner and watchers get a shortened event; a lease whose new deadline
// has passed is lost at the renew loop's next pass, which this wakes.
func (d *Daemon) shortenDeadlines(t clockwatch.Timing) {
	d.writeFloor(t) // before anyone is told (floorfile.go)
	now := d.clock.Now()
	d.mu.Lock()
	for _, l := range d.leases {
		if !l.state.valid() || l.t0 == 0 {
			continue
		}
		dl := t.HolderDeadline(l.t0, l.ttl)
		if !dl.Before(l.deadline) {
			continue
		}
		l.deadline = dl
		d.stepLocked(l, evShortened, ipc.ReasonDrift, now)
	}
	d.mu.Unlock()
	d.wake()
}

// resetRho lowers the floor to what is configured, observed and stated
// now (the operator's reset_rho), and returns the new value. Deadlines
// already handed out stay as they are. The timing floor's file keeps the
// higher floor (floorfile.go): a restarted process starts from it again,
// which is only ever earlier.
func (d *Daemon) resetRho() clockwatch.Timing {
	t := d.current()
	d.floor.set(t)
	d.log.Warn("drift bound reset by the operator", "rho_ppm", t.Rho*1e6, "epsilon", t.Epsilon)
	return t
}
