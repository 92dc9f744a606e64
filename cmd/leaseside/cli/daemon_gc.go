package cli

import (
	"time"

	"github.com/leaseside/leaseside/internal/gctune"
)

// sidecarGC is the sidecar's collection policy (internal/gctune), unless
// GOGC is set in its environment. A sidecar's heap is mostly its lease
// table, which lives long, and Go's default (GOGC 100: the heap may grow
// to twice what is live before a collection) showed as resident memory,
// 1.47 KiB a lease at 10,000 detached leases against about 350 B live;
// GOGC 25 made it 0.94 KiB, but a fixed 25 also lowers the runtime's
// smallest heap goal from 4 MiB to 1 MiB, so a sidecar holding few
// leases collected about three times as often as at 100 and spent about
// 15% more CPU a socket round trip (docs/performance.md, "The
// collector's share of a round trip").
//
// So the heap may grow by a quarter of the live heap the collection left
// (as at GOGC 25, which keeps a large lease table's memory down), or by
// what the sidecar allocates in 200 ms at the rate it allocated since the
// previous collection, within 1 and 8 MiB (8 MiB until a collection
// gives a rate), whichever is more. A busy sidecar then collects at most
// about five times a second while its growth allows, whatever it holds,
// and an idle one keeps 25% above live.
//
// Once idle again (allocating less than 1 MiB in 200 ms), a sidecar gives
// the kernel back, at most once a minute, the heap it keeps beyond what
// is live and its next cycle's growth, when that is more than 1 MiB: what
// a burst of acquires or a large status left, which the runtime's
// scavenger returned gradually and kept some of for good
// (docs/performance.md, "The sidecar's memory per lease").
var sidecarGC = gctune.Policy{
	LiveShare:   4,
	Interval:    200 * time.Millisecond,
	MinGrowth:   1 << 20, // GOGC 25's smallest heap goal
	MaxGrowth:   8 << 20, // what a busy sidecar may hold above live
	StartGrowth: 8 << 20,
	MinPercent:  10,
	ReturnAbove: 1 << 20,
	ReturnEvery: time.Minute,
}

// tuneSidecarGCProcess starts the sidecar's collection tuner in this
// process unless GOGC is set in the environment.
func tuneSidecarGCProcess() { gctune.StartProcess(sidecarGC) }
