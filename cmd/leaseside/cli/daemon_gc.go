package cli

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
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
// So the sidecar tunes GOGC after every collection: the heap may grow by
// live/sidecarGCShare over the live heap the collection left (as at GOGC
// 25, which keeps a large lease table's memory down), or by what the
// sidecar allocates in sidecarGCInterval at the rate it allocated since
// the previous collection, whichever is more, within sidecarGCMinGrowth
// and sidecarGCMaxGrowth. A busy sidecar then collects at most about
// five times a second while its growth allows, whatever it holds, and
// an idle one keeps 25% above live, as before.
const (
	// sidecarGCShare: the heap may grow by at least live/sidecarGCShare.
	sidecarGCShare = 4
	// sidecarGCInterval is the least time between two collections the
	// tuner aims at while the sidecar allocates steadily.
	sidecarGCInterval = 200 * time.Millisecond
	// sidecarGCMinGrowth and sidecarGCMaxGrowth bound the growth that
	// the allocation rate asks for: GOGC 25's smallest heap goal, and
	// what a busy sidecar may hold above live.
	sidecarGCMinGrowth = 1 << 20
	sidecarGCMaxGrowth = 8 << 20
	// goHeapMinimum is the runtime's smallest heap goal at GOGC 100
	// (runtime defaultHeapMinimum); at GOGC p it is goHeapMinimum*p/100.
	goHeapMinimum = 4 << 20
)

// sidecarGCGrowth returns how much the heap may grow before the next
// collection, after one that left live bytes, when allocated bytes were
// allocated in the elapsed time since the one before (elapsed 0: not
// known yet, which allows sidecarGCMaxGrowth).
func sidecarGCGrowth(live, allocated uint64, elapsed time.Duration) uint64 {
	byRate := uint64(sidecarGCMaxGrowth)
	if elapsed > 0 {
		byRate = uint64(float64(allocated) * float64(sidecarGCInterval) / float64(elapsed))
	}
	byRate = min(max(byRate, sidecarGCMinGrowth), sidecarGCMaxGrowth)
	return max(byRate, live/sidecarGCShare)
}

// sidecarGCPercent returns the GOGC that makes the runtime's next heap
// goal live + growth, or just under it, after a collection that left live
// bytes of heap and roots bytes of stacks and globals to scan. The
// runtime's goal at GOGC p is max(goHeapMinimum*p/100, live +
// (live+roots)*p/100) (runtime mgcpacer.go, gcControllerState.commit);
// both grow with p, so the p that meets the target is the smaller of the
// two that meet it alone.
func sidecarGCPercent(live, roots, growth uint64) int {
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
	samples []metrics.Sample // live heap, stacks, globals, bytes allocated
	now     func() time.Time
	set     func(int) int // debug.SetGCPercent
	// Only tune touches these.
	last      int         // the GOGC set last
	allocated uint64      // bytes allocated in all, at the last tune
	at        time.Time   // when
	stopped   atomic.Bool // no more tuning after the next collection
}

// newGCTuner returns a tuner that reads the time with now and sets the
// collection target with set.
func newGCTuner(now func() time.Time, set func(int) int) *gcTuner {
	return &gcTuner{
		samples: []metrics.Sample{
			{Name: "/gc/heap/live:bytes"},
			{Name: "/gc/scan/stack:bytes"},
			{Name: "/gc/scan/globals:bytes"},
			{Name: "/gc/heap/allocs:bytes"},
		},
		now: now,
		set: set,
	}
}

// tune reads what the latest collection left and what was allocated
// since the previous tune, and sets GOGC from them when it changed; it
// returns the GOGC in force.
func (t *gcTuner) tune() int {
	metrics.Read(t.samples)
	now := t.now()
	var v [4]uint64
	for i, s := range t.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	var elapsed time.Duration
	if !t.at.IsZero() {
		elapsed = max(now.Sub(t.at), 1)
	}
	growth := sidecarGCGrowth(v[0], v[3]-min(t.allocated, v[3]), elapsed)
	t.allocated, t.at = v[3], now
	if p := sidecarGCPercent(v[0], v[1]+v[2], growth); p != t.last {
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
			t := newGCTuner(time.Now, debug.SetGCPercent)
			t.tune()
			t.arm()
		})
	})
}
