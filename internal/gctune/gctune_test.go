package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

// testPolicy is the sidecar's policy of cmd/leaseside/cli, whose figures
// the tables below were first written with.
var testPolicy = Policy{LiveShare: 4, Interval: 200 * time.Millisecond, MinGrowth: 1 << 20, MaxGrowth: 8 << 20, StartGrowth: 8 << 20, MinPercent: 10}

// TestStart: a tuner starts unless GOGC is set, which it leaves alone.
func TestStart(t *testing.T) {
	tests := []struct {
		name string
		gogc string
		want bool
	}{
		{name: "unset", gogc: "", want: true},
		{name: "set by the environment", gogc: "200", want: false},
		{name: "off by the environment", gogc: "off", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			started := false
			got := Start(func(k string) string {
				if k == "GOGC" {
					return tc.gogc
				}
				return ""
			}, func() { started = true })
			if got != tc.want || started != tc.want {
				t.Fatalf("GOGC=%q: started %v (reported %v), want %v", tc.gogc, started, got, tc.want)
			}
		})
	}
}

// TestGrowth: the heap may grow by what is allocated in the interval at
// the latest rate, within the bounds, or by live/LiveShare, whichever is
// more; StartGrowth until a rate is known. (A policy of other figures
// than the sidecar's, whose own table is cmd/leaseside/cli's.)
func TestGrowth(t *testing.T) {
	const MiB = 1 << 20
	pol := Policy{LiveShare: 2, Interval: 100 * time.Millisecond, MinGrowth: 2 * MiB, MaxGrowth: 16 * MiB, StartGrowth: 4 * MiB, MinPercent: 10}
	tests := []struct {
		name            string
		live, allocated uint64
		elapsed         time.Duration
		want            uint64
	}{
		{name: "nothing known yet", live: 2 * MiB, want: 4 * MiB},
		{name: "idle: the least", live: 2 * MiB, allocated: 100 << 10, elapsed: 2 * time.Minute, want: 2 * MiB},
		{name: "idle with much live", live: 40 * MiB, allocated: 1 * MiB, elapsed: 2 * time.Minute, want: 20 * MiB},
		{name: "busy: 40 MiB/s", live: 3 * MiB, allocated: 4 * MiB, elapsed: 100 * time.Millisecond, want: 4 * MiB},
		{name: "busy: 30 MiB/s over 200 ms", live: 3 * MiB, allocated: 6 * MiB, elapsed: 200 * time.Millisecond, want: 3 * MiB},
		{name: "very busy: capped", live: 3 * MiB, allocated: 1000 * MiB, elapsed: time.Second, want: 16 * MiB},
		{name: "busy with much live", live: 80 * MiB, allocated: 4 * MiB, elapsed: 100 * time.Millisecond, want: 40 * MiB},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := pol.Growth(tc.live, tc.allocated, tc.elapsed); got != tc.want {
				t.Fatalf("growth %d, want %d", got, tc.want)
			}
		})
	}
}

// TestPercent: the GOGC chosen is the largest whose heap goal does not
// pass live + growth, or the policy's least.
func TestPercent(t *testing.T) {
	const MiB = 1 << 20
	tests := []struct {
		name                string
		minPercent          int
		live, roots, growth uint64
		wantPercent         int // 0: only check the goal
	}{
		{name: "nothing live yet", live: 0, roots: 0, growth: 4 * MiB, wantPercent: 100},
		{name: "small heap", live: 2 * MiB, roots: 300 << 10, growth: 4 * MiB},
		{name: "heap minimum decides", live: 1 * MiB, roots: 100 << 10, growth: 4 * MiB, wantPercent: 125},
		{name: "small growth", live: 2 * MiB, roots: 300 << 10, growth: 1 * MiB},
		{name: "a quarter", live: 16 * MiB, roots: 0, growth: 4 * MiB, wantPercent: 25},
		{name: "large heap", live: 400 * MiB, roots: 2 * MiB, growth: 100 * MiB},
		{name: "huge roots", live: 8 * MiB, roots: 2048 * MiB, growth: 4 * MiB, wantPercent: 10},
		{name: "the policy's least", minPercent: 100, live: 16 * MiB, roots: 0, growth: 4 * MiB, wantPercent: 100},
		{name: "never below 10", minPercent: 5, live: 8 * MiB, roots: 2048 * MiB, growth: 4 * MiB, wantPercent: 10},
		{name: "above the policy's least", minPercent: 100, live: 4 * MiB, roots: 0, growth: 30 * MiB},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pol := testPolicy
			if tc.minPercent != 0 {
				pol.MinPercent = tc.minPercent
			}
			p := pol.Percent(tc.live, tc.roots, tc.growth)
			if tc.wantPercent != 0 && p != tc.wantPercent {
				t.Fatalf("GOGC %d, want %d", p, tc.wantPercent)
			}
			if p == max(pol.MinPercent, 10) {
				return // the least it sets, whatever the goal
			}
			target := tc.live + tc.growth
			if got := HeapGoal(p, tc.live, tc.roots); got > target {
				t.Fatalf("GOGC %d: heap goal %d passes the target %d", p, got, target)
			}
			if next := HeapGoal(p+1, tc.live, tc.roots); next <= target {
				t.Fatalf("GOGC %d: %d would still meet the target %d (goal %d)", p, p+1, target, next)
			}
		})
	}
}

// TestTunerSetsTheRuntimesGoal: after a collection, the tuner makes the
// runtime's own heap goal live + its growth (here, with an hour between
// collections, max(1 MiB, live/4)), and it tunes again after later
// collections.
func TestTunerSetsTheRuntimesGoal(t *testing.T) {
	sets := make(chan int, 100)
	tuner := NewTuner(testPolicy, hourly(), func(p int) int {
		select {
		case sets <- p:
		default:
		}
		return 100
	})
	defer tuner.Stop()
	// The tuner in the runtime: no other test of the package changes
	// GOGC in this process.
	real := NewTuner(testPolicy, hourly(), setGCPercentRestoring(t))
	samples := []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/live:bytes"},
		{Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}, {Name: "/gc/heap/goal:bytes"},
	}
	real.Tune() // an hour before the first collection below
	var keep [][]byte
	for _, liveMiB := range []int{0, 64} {
		keep = append(keep, make([]byte, liveMiB<<20))
		checked := false
		for try := 0; try < 20 && !checked; try++ {
			runtime.GC()
			metrics.Read(samples[:1])
			cycle := samples[0].Value.Uint64()
			real.Tune()
			metrics.Read(samples)
			if samples[0].Value.Uint64() != cycle {
				continue // another collection ended in between: again
			}
			live, roots := samples[1].Value.Uint64(), samples[2].Value.Uint64()+samples[3].Value.Uint64()
			goal := samples[4].Value.Uint64()
			target := live + max(testPolicy.MinGrowth, live/testPolicy.LiveShare)
			// The percent is whole: the goal is at most one percent of
			// the scanned bytes (or of the heap minimum) under the target.
			slack := max(live+roots, GoHeapMinimum)/100 + 1
			if goal > target || goal+slack < target {
				t.Fatalf("%d MiB kept live: the runtime's heap goal is %d with live %d and roots %d, want %d (within %d under)",
					liveMiB, goal, live, roots, target, slack)
			}
			checked = true
		}
		if !checked {
			t.Fatalf("%d MiB kept live: other collections ended during every one of 20 tries", liveMiB)
		}
	}
	runtime.KeepAlive(keep)
	keep = nil

	// The test's own tuner, armed: it tunes after a collection, and again
	// after later ones (64 MiB live lowers the percent it sets).
	runtime.GC()
	tuner.Tune() // an hour ago, with little live
	tuner.Arm()
	first := waitTunerSet(t, sets)
	keep = append(keep, make([]byte, 64<<20))
	for {
		if p := waitTunerSet(t, sets); p < first {
			break
		}
	}
	runtime.KeepAlive(keep)
}

// hourly is a clock that moves an hour at every reading.
func hourly() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Hour)
		return t
	}
}

// waitTunerSet collects until the tuner sets a percent, and returns it.
func waitTunerSet(t *testing.T, sets <-chan int) int {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		runtime.GC()
		select {
		case p := <-sets:
			return p
		case <-deadline:
			t.Fatal("the tuner set no GOGC within 30 s of collections")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// setGCPercentRestoring is debug.SetGCPercent, with the percent of
// before restored when the test ends.
func setGCPercentRestoring(t *testing.T) func(int) int {
	var old = -2
	t.Cleanup(func() {
		if old != -2 {
			debug.SetGCPercent(old)
		}
	})
	return func(p int) int {
		prev := debug.SetGCPercent(p)
		if old == -2 {
			old = prev
		}
		return prev
	}
}

// TestReturn: the heap kept beyond what is live goes back to the kernel
// only when the policy asks for it, the process is idle (its rate asks for
// no more than MinGrowth), it is more than the growth the next cycle
// uses and ReturnAbove, and the last return is at least ReturnEvery ago.
func TestReturn(t *testing.T) {
	const MiB = 1 << 20
	pol := testPolicy
	pol.ReturnAbove, pol.ReturnEvery = 2*MiB, time.Minute
	tests := []struct {
		name                    string
		policy                  Policy
		surplus, growth, byRate uint64
		since                   time.Duration
		want                    bool
	}{
		{name: "idle after a burst", policy: pol, surplus: 12 * MiB, growth: MiB, byRate: 1, want: true},
		{name: "idle, returned long ago", policy: pol, surplus: 4 * MiB, growth: MiB, byRate: 100 << 10, since: 2 * time.Minute, want: true},
		{name: "at the least growth's rate", policy: pol, surplus: 4 * MiB, growth: MiB, byRate: pol.MinGrowth, want: true},
		{name: "off", policy: testPolicy, surplus: 100 * MiB, growth: MiB, byRate: 1, want: false},
		{name: "no ReturnEvery: off", policy: Policy{MinGrowth: MiB, ReturnAbove: 2 * MiB}, surplus: 100 * MiB, growth: MiB, byRate: 1, want: false},
		{name: "rate not known yet", policy: pol, surplus: 100 * MiB, growth: MiB, byRate: 0, want: false},
		{name: "busy", policy: pol, surplus: 100 * MiB, growth: MiB, byRate: pol.MinGrowth + 1, want: false},
		{name: "what the next cycle uses", policy: pol, surplus: 3 * MiB, growth: MiB, byRate: 1, want: false},
		{name: "a large live heap's growth", policy: pol, surplus: 12 * MiB, growth: 10 * MiB, byRate: 1, want: false},
		{name: "returned a moment ago", policy: pol, surplus: 100 * MiB, growth: MiB, byRate: 1, since: 59 * time.Second, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.policy.Return(tc.surplus, tc.growth, tc.byRate, tc.since); got != tc.want {
				t.Fatalf("Return(surplus %d, growth %d, byRate %d, since %v) = %v, want %v", tc.surplus, tc.growth, tc.byRate, tc.since, got, tc.want)
			}
		})
	}
}

// TestTunerReturnsWhatABurstLeft: after a collection that found a burst's
// 64 MiB dead, an idle process's tuner gives the heap back (through its
// release, here a stand-in that counts), once: not again at the next
// collection within ReturnEvery, not while busy, and never with the policy
// off. The runtime's figures are the test's (the runtime's scavenger
// would return pages of its own meanwhile).
func TestTunerReturnsWhatABurstLeft(t *testing.T) {
	const MiB = 1 << 20
	pol := testPolicy
	pol.ReturnAbove, pol.ReturnEvery = 8*MiB, time.Hour
	clock := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	var f figures
	released := make(chan string, 4)
	tuner := func(p Policy, name string) *Tuner {
		tu := NewTuner(p, now, func(int) int { return 100 })
		tu.read = func(out *figures) { *out = f }
		tu.release = func() { released <- name }
		return tu
	}
	on, off := tuner(pol, "on"), tuner(testPolicy, "off")
	step := func(d time.Duration, allocated, objects, free uint64) {
		clock = clock.Add(d)
		f.allocated += allocated
		f.objects, f.free = objects, free
		off.Tune()
		on.Tune()
	}
	f.live = 4 * MiB
	step(0, 8*MiB, 8*MiB, 0)
	step(100*time.Millisecond, 72*MiB, 40*MiB, 36*MiB) // busy: the burst
	step(30*time.Minute, 64*MiB, 20*MiB, 50*MiB)       // idle: 64 MiB in half an hour
	select {
	case who := <-released:
		if who != "on" {
			t.Fatal("the tuner of a policy without ReturnAbove gave the heap back")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the idle process's tuner did not give back what the burst left")
	}
	step(time.Minute, MiB, 20*MiB, 50*MiB) // idle again, within ReturnEvery
	step(2*time.Hour, MiB, 5*MiB, 2*MiB)   // idle, little kept beyond live
	step(time.Millisecond, 64*MiB, 40*MiB, 50*MiB)
	select {
	case who := <-released:
		t.Fatalf("%s: given back again (within ReturnEvery, with little kept, or while busy)", who)
	default:
	}
}

// TestRuntimeFigures: the tuner reads every figure from the runtime: a
// heap of 64 MiB kept live shows in live and objects, and the rest are
// there.
func TestRuntimeFigures(t *testing.T) {
	keep := make([]byte, 64<<20)
	runtime.GC()
	var f figures
	NewTuner(testPolicy, time.Now, func(int) int { return 100 }).readRuntime(&f)
	runtime.KeepAlive(keep)
	if f.live < 64<<20 || f.objects < 64<<20 || f.allocated < 64<<20 || f.stacks == 0 || f.globals == 0 {
		t.Fatalf("the runtime's figures with 64 MiB live: %+v", f)
	}
}
