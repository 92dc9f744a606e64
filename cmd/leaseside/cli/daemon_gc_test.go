package cli

import (
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/internal/gctune"
)

// TestSidecarGCGrowth: the heap may grow by what the sidecar allocates
// in 200 ms at its latest rate, within 1 and 8 MiB, or by a quarter of
// what is live, whichever is more.
func TestSidecarGCGrowth(t *testing.T) {
	const MiB = 1 << 20
	tests := []struct {
		name            string
		live, allocated uint64
		elapsed         time.Duration
		want            uint64
	}{
		{name: "nothing known yet", live: 2 * MiB, want: 8 * MiB},
		{name: "idle", live: 2 * MiB, allocated: 100 << 10, elapsed: 2 * time.Minute, want: 1 * MiB},
		{name: "idle with many leases", live: 40 * MiB, allocated: 1 * MiB, elapsed: 2 * time.Minute, want: 10 * MiB},
		{name: "busy: 20 MB/s", live: 3 * MiB, allocated: 4 * MiB, elapsed: 200 * time.Millisecond, want: 4 * MiB},
		{name: "busy: 15 MiB/s over 100 ms", live: 3 * MiB, allocated: 3 * MiB / 2, elapsed: 100 * time.Millisecond, want: 3 * MiB},
		{name: "very busy: capped", live: 3 * MiB, allocated: 100 * MiB, elapsed: time.Second, want: 8 * MiB},
		{name: "busy with many leases", live: 80 * MiB, allocated: 4 * MiB, elapsed: 200 * time.Millisecond, want: 20 * MiB},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sidecarGC.Growth(tc.live, tc.allocated, tc.elapsed); got != tc.want {
				t.Fatalf("growth %d, want %d", got, tc.want)
			}
			if p := sidecarGC.Percent(tc.live, 0, tc.want); p < 10 {
				t.Fatalf("GOGC %d, below 10", p)
			}
		})
	}
}

// TestSidecarGCReturnsWhatABurstLeft: an idle sidecar (less than 1 MiB
// allocated in 200 ms) gives back the heap it keeps beyond what is live
// when that is more than 1 MiB over its next cycle's growth, at most once
// a minute; a busy one keeps it for its next cycles.
func TestSidecarGCReturnsWhatABurstLeft(t *testing.T) {
	const MiB = 1 << 20
	idle, busy := uint64(100<<10), uint64(2*MiB)
	if !sidecarGC.Return(12*MiB, MiB, idle, 0) || !sidecarGC.Return(3*MiB, MiB, idle, 5*time.Minute) {
		t.Fatal("an idle sidecar kept what a burst left")
	}
	if sidecarGC.Return(12*MiB, MiB, busy, 0) {
		t.Fatal("a busy sidecar gave back the heap its next cycles use")
	}
	if sidecarGC.Return(2*MiB, MiB, idle, 0) || sidecarGC.Return(12*MiB, MiB, idle, 30*time.Second) {
		t.Fatal("returned 1 MiB or less over the growth, or twice within a minute")
	}
}

// TestGrantorGCBounds: a grantor's heap goal is never below GOGC 100's
// (collections never more often than at Go's default), never more than
// 64 MiB above it, and a busy grantor collects at most about every
// 500 ms of its allocation while that allows.
func TestGrantorGCBounds(t *testing.T) {
	const MiB = 1 << 20
	tests := []struct {
		name              string
		live, roots       uint64
		rate              uint64 // bytes a second since the last collection
		wantGrowthAtLeast uint64 // 0: not checked
	}{
		{name: "idle, small", live: 3 * MiB, roots: 400 << 10, rate: 10 << 10},
		{name: "idle, large", live: 300 * MiB, roots: 1 * MiB, rate: 10 << 10, wantGrowthAtLeast: 300 * MiB},
		{name: "lock cycles: 63 MB/s over 5 MiB", live: 5 * MiB, roots: 500 << 10, rate: 63e6, wantGrowthAtLeast: 31e6},
		{name: "128 MiB/s: at the cap", live: 5 * MiB, roots: 500 << 10, rate: 128 * MiB, wantGrowthAtLeast: 64 * MiB},
		{name: "1 GiB/s: capped", live: 5 * MiB, roots: 500 << 10, rate: 1024 * MiB, wantGrowthAtLeast: 64 * MiB},
		{name: "busy, large", live: 200 * MiB, roots: 2 * MiB, rate: 63e6, wantGrowthAtLeast: 200 * MiB},
		{name: "huge roots", live: 8 * MiB, roots: 512 * MiB, rate: 63e6},
		{name: "nothing live", live: 0, roots: 0, rate: 63e6, wantGrowthAtLeast: 31e6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			elapsed := time.Second
			growth := grantorGC.Growth(tc.live, tc.rate, elapsed)
			if growth < tc.wantGrowthAtLeast {
				t.Fatalf("growth %d, want at least %d", growth, tc.wantGrowthAtLeast)
			}
			p := grantorGC.Percent(tc.live, tc.roots, growth)
			goal, gogc100 := gctune.HeapGoal(p, tc.live, tc.roots), gctune.HeapGoal(100, tc.live, tc.roots)
			if p < 100 || goal < gogc100 {
				t.Fatalf("GOGC %d: heap goal %d below GOGC 100's %d", p, goal, gogc100)
			}
			if goal > max(gogc100, tc.live+64*MiB) {
				t.Fatalf("GOGC %d: heap goal %d more than 64 MiB above live %d and above GOGC 100's %d", p, goal, tc.live, gogc100)
			}
			// Within its cap, the heap goal leaves 500 ms of allocation
			// at the rate, less one percent (GOGC is whole).
			slack := max(tc.live+tc.roots, gctune.GoHeapMinimum)/100 + 1
			if want := min(tc.rate/2, 64*MiB); goal-tc.live+slack < want {
				t.Fatalf("GOGC %d: heap goal %d leaves %d above live, under 500 ms at %d B/s", p, goal, goal-tc.live, tc.rate)
			}
		})
	}
	// Before a collection gives a rate: 4 MiB, not the 64 MiB cap, so a
	// grantor that starts under load collects early.
	if got := grantorGC.Growth(2*MiB, 0, 0); got != 4*MiB {
		t.Fatalf("growth before a rate is known: %d, want 4 MiB", got)
	}
}

// TestGrantorGCTuner: a `leaseside grantor` tunes its collections, at
// GOGC 100 or above, unless GOGC is set in its environment, which it
// keeps.
func TestGrantorGCTuner(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	tests := []struct {
		name     string
		gogc     string
		wantLine string
	}{
		{name: "unset", gogc: "", wantLine: "grantor: collections tuned"},
		{name: "set by the environment", gogc: "250", wantLine: "grantor: collections at GOGC from the environment"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOGC", tc.gogc)
			g := startProc(t, "grantor", "grantor", "--node-id", "g1", "--bootstrap-expect", "1", "--data-dir", filepath.Join(t.TempDir(), "g"),
				"--rpc-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0")
			g.waitLine(t, tc.wantLine)
			resp, err := http.Get(field(g.waitLine(t, "serving metrics"), "addr"))
			if err != nil {
				t.Fatalf("metrics: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var gogc float64
			for _, l := range strings.Split(string(body), "\n") {
				if v, ok := strings.CutPrefix(l, "go_gc_gogc_percent "); ok {
					gogc, _ = strconv.ParseFloat(v, 64)
				}
			}
			if (tc.gogc == "" && gogc < 100) || (tc.gogc != "" && strconv.FormatFloat(gogc, 'f', -1, 64) != tc.gogc) {
				t.Fatalf("GOGC=%q in the environment: go_gc_gogc_percent %v", tc.gogc, gogc)
			}
		})
	}
}
