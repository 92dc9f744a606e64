package daemon

import (
	"sync"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

// grantorTiming is what the grantors said of their timing model (TEAM.md
// decision 2): every grant and renewal reply states the grantor's rho and
// epsilon, and the holder computes with the larger of its own and the
// largest any grantor stated in the daemon's life, so that both sides
// compute with the same numbers or the holder with safer ones.
type grantorTiming struct {
	mu sync.Mutex
	// max is the largest rho and the largest epsilon stated so far.
	max clockwatch.Timing
	// last is the last stated pair that differed from the daemon's own;
	// mismatch says whether the latest reply differed.
	last     clockwatch.Timing
	mismatch bool
}

// learnTiming takes in a grantor's stated timing model; rho 0 and eps 0
// mean a grantor too old to state it. A pair that differs from the
// daemon's own is logged once per distinct pair.
func (d *Daemon) learnTiming(rho float64, epsNs int64) {
	if rho == 0 && epsNs == 0 {
		return
	}
	stated := clockwatch.Timing{Rho: rho, Epsilon: time.Duration(epsNs)}
	own := d.cfg.Timing
	g := &d.gTiming
	g.mu.Lock()
	g.max.Rho = max(g.max.Rho, stated.Rho)
	g.max.Epsilon = max(g.max.Epsilon, stated.Epsilon)
	g.mismatch = stated != own
	warn := g.mismatch && stated != g.last
	if g.mismatch {
		g.last = stated
	}
	g.mu.Unlock()
	if warn {
		d.log.Warn("the grantor's timing model differs from this sidecar's; deadlines use the larger of each",
			"grantor_rho", stated.Rho, "grantor_epsilon", stated.Epsilon, "rho", own.Rho, "epsilon", own.Epsilon)
	}
}

// timingMismatch reports whether the latest grantor reply stated a timing
// model other than the daemon's own.
func (d *Daemon) timingMismatch() bool {
	d.gTiming.mu.Lock()
	defer d.gTiming.mu.Unlock()
	return d.gTiming.mismatch
}

// withGrantorTiming raises t's rho and epsilon to the largest any grantor
// stated.
func (d *Daemon) withGrantorTiming(t clockwatch.Timing) clockwatch.Timing {
	d.gTiming.mu.Lock()
	defer d.gTiming.mu.Unlock()
	t.Rho = max(t.Rho, d.gTiming.max.Rho)
	t.Epsilon = max(t.Epsilon, d.gTiming.max.Epsilon)
	return t
}
