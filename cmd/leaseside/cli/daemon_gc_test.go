package cli

import "testing"

// TestSidecarGCPercent: the sidecar collects at sidecarGCPercent unless
// GOGC is set, which it leaves alone.
func TestSidecarGCPercent(t *testing.T) {
	tests := []struct {
		name    string
		gogc    string
		wantSet int // -1: not set
	}{
		{name: "unset", gogc: "", wantSet: sidecarGCPercent},
		{name: "set by the environment", gogc: "200", wantSet: -1},
		{name: "off by the environment", gogc: "off", wantSet: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := -1
			set := tuneSidecarGC(func(k string) string {
				if k == "GOGC" {
					return tc.gogc
				}
				return ""
			}, func(p int) int { got = p; return 100 })
			if got != tc.wantSet || set != (tc.wantSet >= 0) {
				t.Fatalf("GOGC=%q: set %d (reported %v), want %d", tc.gogc, got, set, tc.wantSet)
			}
		})
	}
}
