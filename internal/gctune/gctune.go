// Package gctune sets the Go collector's target, GOGC, after every
// collection, from the heap the collection left live and the rate the
// process allocated at since the one before, within the bounds of a
// Policy. The sidecar and the grantor each run one with a policy of
// their own (cmd/leaseside/cli: daemon_gc.go, grantor_gc.go).
//
// The runtime's heap goal at GOGC p is max(4 MiB·p/100, live +
// (live+roots)·p/100), roots being the stacks and globals it scans
// (runtime mgcpacer.go, gcControllerState.commit): at a fixed GOGC a
// process with a small live heap collects after every few MiB it
// allocates, however fast it allocates them, and one with a large live
// heap keeps as much again in garbage. The tuner aims the goal at live +
// growth instead, growth being what the process allocates in the
// policy's interval at its latest rate, within the policy's bounds.
//
// A policy may also have the tuner give the kernel back, once the process
// is idle again, the free heap a burst left behind (ReturnAbove): the
// runtime's own scavenger returns it gradually, and keeps some for good.
//
// A soft memory limit (GOMEMLIMIT, debug.SetMemoryLimit) still holds: the
// runtime collects before it whatever GOGC is. GOGC set in the
// environment wins: Start then starts nothing.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// GoHeapMinimum is the runtime's smallest heap goal at GOGC 100 (runtime
// defaultHeapMinimum); at GOGC p it is GoHeapMinimum*p/100.
const GoHeapMinimum = 4 << 20

// HeapGoal is the Go runtime's heap goal at GOGC p after a collection
// that left live bytes of heap and roots bytes of stacks and globals
// (runtime mgcpacer.go, gcControllerState.commit): what Percent inverts.
func HeapGoal(p int, live, roots uint64) uint64 {
	return max(GoHeapMinimum*uint64(p)/100, live+(live+roots)*uint64(p)/100)
}

// Policy bounds the growth the tuner allows before the next collection:
// max(clamp(allocation rate × Interval, MinGrowth, MaxGrowth),
// live/LiveShare) (StartGrowth for clamp(...) until the rate is known),
// and then never a GOGC below MinPercent.
type Policy struct {
	// LiveShare: the heap may always grow by live/LiveShare (4: as GOGC
	// 25 lets it; 1: as GOGC 100 does, less the roots).
	LiveShare uint64
	// Interval is the least time between two collections the tuner aims
	// at while the process allocates steadily.
	Interval time.Duration
	// MinGrowth and MaxGrowth bound the growth the allocation rate asks
	// for.
	MinGrowth, MaxGrowth uint64
	// StartGrowth stands for the rate's growth until the rate is known:
	// at the tuner's first Tune, before a collection was seen.
	StartGrowth uint64
	// MinPercent is the least GOGC set, whatever the growth (at least 10:
	// GOGC 0 would collect without end).
	MinPercent int
	// ReturnAbove, when not 0, has the heap's free pages given back to
	// the kernel (debug.FreeOSMemory) after a collection that finds the
	// process idle (it allocates at a rate that asks for no more than
	// MinGrowth) and keeping more than growth + ReturnAbove of heap
	// beyond what is live (the objects the collection found dead, not
	// swept yet, and the pages already free): what a burst left behind,
	// which the runtime's scavenger returns gradually and in part. At
	// most once a ReturnEvery (FreeOSMemory collects, and the collection
	// is followed by a Tune of its own); off while either is 0.
	ReturnAbove uint64
	ReturnEvery time.Duration
}

// Growth returns how much the heap may grow before the next collection,
// after one that left live bytes, when allocated bytes were allocated in
// the elapsed time since the one before (elapsed 0: not known yet, which
// allows StartGrowth).
func (p Policy) Growth(live, allocated uint64, elapsed time.Duration) uint64 {
	byRate := p.StartGrowth
	if r := p.rateGrowth(allocated, elapsed); r > 0 {
		byRate = min(max(r, p.MinGrowth), p.MaxGrowth)
	}
	return max(byRate, live/max(p.LiveShare, 1))
}

// rateGrowth is what allocated bytes in elapsed time make in the policy's
// interval, unbounded, and at least 1; 0 when elapsed is 0 (not known).
func (p Policy) rateGrowth(allocated uint64, elapsed time.Duration) uint64 {
	if elapsed <= 0 {
		return 0
	}
	return max(uint64(float64(allocated)*float64(p.Interval)/float64(elapsed)), 1)
}

// Return reports whether the heap kept beyond what is live, surplus bytes
// (dead objects and free pages), should be given back after a collection
// that allowed growth, when the process allocates at a rate that asks for
// byRate (rateGrowth: unbounded; 0 when not known yet) and the last
// return was since ago (0: never).
func (p Policy) Return(surplus, growth, byRate uint64, since time.Duration) bool {
	if p.ReturnAbove == 0 || p.ReturnEvery <= 0 || byRate == 0 || byRate > p.MinGrowth {
		return false // off, the rate not known yet, or busy
	}
	if since != 0 && since < p.ReturnEvery {
		return false
	}
	return surplus > growth+p.ReturnAbove
}

// Percent returns the GOGC that makes the runtime's next heap goal live +
// growth, or just under it, after a collection that left live bytes of
// heap and roots bytes of stacks and globals to scan; never below
// p.MinPercent. Both terms of the runtime's goal grow with GOGC, so the
// GOGC that meets the target is the smaller of the two that meet it
// alone.
func (p Policy) Percent(live, roots, growth uint64) int {
	pc := 100 * (live + growth) / GoHeapMinimum
	if scanned := live + roots; scanned > 0 {
		pc = min(pc, 100*growth/scanned)
	}
	return int(max(pc, uint64(max(p.MinPercent, 10))))
}

// Tuner sets GOGC after every collection with its policy. Tune is called
// from one goroutine at a time (the cleanup Arm registers, or a test).
type Tuner struct {
	policy  Policy
	samples []metrics.Sample // the runtime's figures, in a figures' order
	// read fills in the runtime's figures (readRuntime; a test's own).
	read func(*figures)
	now  func() time.Time
	set  func(int) int // debug.SetGCPercent
	// release gives the free heap back to the kernel (debug.FreeOSMemory,
	// which collects first); Tune runs it on a goroutine of its own.
	release func()
	// Only Tune touches these.
	last      int       // the GOGC set last
	allocated uint64    // bytes allocated in all, at the last Tune
	at        time.Time // when
	returned  time.Time // when release was last started
	stopped   atomic.Bool
}

// figures are what Tune reads of the runtime, in bytes: the live heap,
// the stacks and globals scanned, the bytes allocated in all, the heap's
// objects (live, and dead not swept yet) and its free pages kept from the
// kernel.
type figures struct {
	live, stacks, globals, allocated, objects, free uint64
}

// NewTuner returns a tuner with policy p that reads the time with now and
// sets the collection target with set.
func NewTuner(p Policy, now func() time.Time, set func(int) int) *Tuner {
	t := &Tuner{
		policy: p,
		samples: []metrics.Sample{
			{Name: "/gc/heap/live:bytes"},
			{Name: "/gc/scan/stack:bytes"},
			{Name: "/gc/scan/globals:bytes"},
			{Name: "/gc/heap/allocs:bytes"},
			{Name: "/memory/classes/heap/objects:bytes"},
			{Name: "/memory/classes/heap/free:bytes"},
		},
		now:     now,
		set:     set,
		release: debug.FreeOSMemory,
	}
	t.read = t.readRuntime
	return t
}

// readRuntime reads f from the runtime's metrics.
func (t *Tuner) readRuntime(f *figures) {
	metrics.Read(t.samples)
	var v [6]uint64
	for i, s := range t.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	*f = figures{live: v[0], stacks: v[1], globals: v[2], allocated: v[3], objects: v[4], free: v[5]}
}

// Tune reads what the latest collection left and what was allocated
// since the previous Tune, and sets GOGC from them when it changed; it
// returns the GOGC in force. When the policy says so (Policy.Return), it
// starts giving the free heap back to the kernel.
func (t *Tuner) Tune() int {
	var f figures
	t.read(&f)
	now := t.now()
	var elapsed time.Duration
	if !t.at.IsZero() {
		elapsed = max(now.Sub(t.at), 1)
	}
	allocated := f.allocated - min(t.allocated, f.allocated)
	growth := t.policy.Growth(f.live, allocated, elapsed)
	t.allocated, t.at = f.allocated, now
	var since time.Duration
	if !t.returned.IsZero() {
		since = max(now.Sub(t.returned), 1)
	}
	kept := f.objects + f.free
	if t.policy.Return(kept-min(f.live, kept), growth, t.policy.rateGrowth(allocated, elapsed), since) {
		t.returned = now
		go t.release()
	}
	if p := t.policy.Percent(f.live, f.stacks+f.globals, growth); p != t.last {
		t.set(p)
		t.last = p
	}
	return t.last
}

// sentinel is an object made only to be collected: its cleanup runs
// after the collection that found it unreachable. It holds a pointer so
// that the runtime's tiny allocator never batches it with other objects.
type sentinel struct {
	_ *byte
	_ [8]byte
}

// Arm has t Tune after the next collection, and Arm itself again then,
// until Stop.
func (t *Tuner) Arm() {
	runtime.AddCleanup(new(sentinel), func(t *Tuner) {
		if t.stopped.Load() {
			return
		}
		t.Tune()
		t.Arm()
	}, t)
}

// Stop ends the tuning after the next collection (for tests: a process
// tunes until it exits).
func (t *Tuner) Stop() { t.stopped.Store(true) }

// Start calls start unless the environment (getenv("GOGC")) chose a
// target; it reports whether it called it.
func Start(getenv func(string) string, start func()) bool {
	if getenv("GOGC") != "" {
		return false
	}
	start()
	return true
}

// processOnce starts the process's tuner once, however many servers a
// process (a test) runs.
var processOnce sync.Once

// StartProcess tunes this process's collections with policy p, from the
// heap of now and again after every collection, unless GOGC is set in
// the environment or a tuner already runs; it reports whether it started
// one.
func StartProcess(p Policy) bool {
	started := false
	Start(os.Getenv, func() {
		processOnce.Do(func() {
			t := NewTuner(p, time.Now, debug.SetGCPercent)
			t.Tune()
			t.Arm()
			started = true
		})
	})
	return started
}
