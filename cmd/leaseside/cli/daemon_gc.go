package cli

import (
	"os"
	"runtime/debug"
)

// sidecarGCPercent is the sidecar's garbage collection target, used
// unless GOGC is set in its environment. A sidecar's heap is mostly its
// lease table, which lives long, and Go's default (100: the heap may
// grow to twice what is live before a collection) showed as resident
// memory: 1.47 KiB a lease at 10,000 detached leases against about
// 350 B live. At 25 it is under 1 KiB, at no measurable cost in CPU at
// idle or in socket round trips (docs/performance.md, "The sidecar's
// memory per lease").
const sidecarGCPercent = 25

// tuneSidecarGC sets the sidecar's collection target with setGCPercent
// unless the environment (getenv("GOGC")) chose one; it reports whether
// it set it.
func tuneSidecarGC(getenv func(string) string, setGCPercent func(int) int) bool {
	if getenv("GOGC") != "" {
		return false
	}
	setGCPercent(sidecarGCPercent)
	return true
}

// tuneSidecarGCProcess is tuneSidecarGC for this process.
func tuneSidecarGCProcess() { tuneSidecarGC(os.Getenv, debug.SetGCPercent) }
