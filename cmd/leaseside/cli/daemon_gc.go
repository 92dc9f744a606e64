package cli

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// The sidecar's garbage collection target, unless GOGC is set in its
// environment. A sidecar's heap is mostly its lease table, which lives
// long, and Go's default (GOGC 100: the heap may grow to twice what is
// live before a collection) showed as resident memory, 1.47 KiB a lease
// at 10,000 detached leases against about 350 B live; GOGC 25 made it
// 0.94 KiB, but a fixed 25 also lowers the runtime's smallest heap goal
// from 4 MiB to 1 MiB, so a sidecar holding few leases collected about
// three times as often as at 100 and spent about 15% more CPU a socket
// round trip (docs/performance.md, "The collector's share of a round
// trip").
//
// So the sidecar tunes GOGC after every collection: the heap may grow
// by max(sidecarGCFloor, live/sidecarGCShare) over the live heap the
// collection left, that is as much as at Go's default while little is
// live, and 25% of it once much is. The floor is paid once per process,
// not per lease.
const (
	// sidecarGCFloor is the least the heap may grow between two
	// collections: Go's default smallest heap goal.
	sidecarGCFloor = 4 << 20
	// sidecarGCShare: the heap may grow by at least live/sidecarGCShare.
	sidecarGCShare = 4
	// goHeapMinimum is the runtime's smallest heap goal at GOGC 100
	// (runtime defaultHeapMinimum); at GOGC p it is goHeapMinimum*p/100.
	goHeapMinimum = 4 << 20
)

// sidecarGCPercent returns the GOGC that makes the runtime's next heap
// goal live + max(sidecarGCFloor, live/sidecarGCShare), or just under it,
// after a collection that left live bytes of heap and roots bytes of
// stacks and globals to scan. The runtime's goal at GOGC p is
// max(goHeapMinimum*p/100, live + (live+roots)*p/100) (runtime
// mgcpacer.go, gcControllerState.commit); both grow with p, so the p
// that meets the target is the smaller of the two that meet it alone.
func sidecarGCPercent(live, roots uint64) int {
	growth := max(uint64(sidecarGCFloor), live/sidecarGCShare)
	byMinimum := 100 * (live + growth) / goHeapMinimum
	p := byMinimum
	if scanned := live + roots; scanned > 0 {
		p = min(p, 100*growth/scanned)
	}
	// GOGC 0 would collect without end; a goal this close to live is
	// reached only with roots far beyond the live heap.
	return int(max(p, 10))
}

// gcTuner sets GOGC after every collection with sidecarGCPercent.
type gcTuner struct {
	samples []metrics.Sample // live heap, stacks, globals
	set     func(int) int    // debug.SetGCPercent
	last    int              // the GOGC set last; only tune touches it
	stopped atomic.Bool      // no more tuning after the next collection
}

// newGCTuner returns a tuner that sets the collection target with set.
func newGCTuner(set func(int) int) *gcTuner {
	return &gcTuner{
		samples: []metrics.Sample{
			{Name: "/gc/heap/live:bytes"},
			{Name: "/gc/scan/stack:bytes"},
			{Name: "/gc/scan/globals:bytes"},
		},
		set: set,
	}
}

// tune reads what the latest collection left and sets GOGC from it when
// it changed; it returns the GOGC in force.
func (t *gcTuner) tune() int {
	metrics.Read(t.samples)
	var v [3]uint64
	for i, s := range t.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	if p := sidecarGCPercent(v[0], v[1]+v[2]); p != t.last {
		t.set(p)
		t.last = p
	}
	return t.last
}

// gcSentinel is an object made only to be collected: its cleanup runs
// after the collection that found it unreachable. It holds a pointer so
// that the runtime's tiny allocator never batches it with other objects.
type gcSentinel struct {
	_ *byte
	_ [8]byte
}

// arm has t tune after the next collection, and arm itself again then,
// until stop.
func (t *gcTuner) arm() {
	runtime.AddCleanup(new(gcSentinel), func(t *gcTuner) {
		if t.stopped.Load() {
			return
		}
		t.tune()
		t.arm()
	}, t)
}

// stop ends the tuning (for tests: a sidecar tunes until it exits).
func (t *gcTuner) stop() { t.stopped.Store(true) }

// sidecarGCOnce starts the process's tuner once, however many daemons a
// process (a test) runs.
var sidecarGCOnce sync.Once

// tuneSidecarGC starts the sidecar's collection tuner with start unless
// the environment (getenv("GOGC")) chose a target; it reports whether it
// started it.
func tuneSidecarGC(getenv func(string) string, start func()) bool {
	if getenv("GOGC") != "" {
		return false
	}
	start()
	return true
}

// tuneSidecarGCProcess is tuneSidecarGC for this process: the tuner
// sets GOGC from the heap of now, and again after every collection.
func tuneSidecarGCProcess() {
	tuneSidecarGC(os.Getenv, func() {
		sidecarGCOnce.Do(func() {
			t := newGCTuner(debug.SetGCPercent)
			t.tune()
			t.arm()
		})
	})
}
