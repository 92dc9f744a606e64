package cli

import (
	"log/slog"
	"os"
	"time"

	"github.com/leaseside/leaseside/internal/gctune"
)

// grantorGC is a grantor's collection policy (internal/gctune), in
// `leaseside grantor` and in dev's process, unless GOGC is set in the
// environment. What a grantor keeps is small beside what it allocates: a
// leader at about 4,000 lock cycles a second allocated 63 MB/s (15.7 KB a
// cycle: gRPC and protobuf, the audit line, the lessor, raft) over a live
// heap of a few MiB, so at GOGC 100, whose smallest heap goal is 4 MiB, it
// collected 12 times a second, and the collector took 6.3% of its CPU
// (docs/performance.md, "Issue 25: lock cycles, round 2").
//
// So the heap may grow by what the grantor allocates in 500 ms at the
// rate it allocated since the previous collection, within 4 and 64 MiB
// (4 MiB until a collection gives a rate: a grantor that starts under
// load does not make its first collection wait for 64 MiB), and never by
// less than GOGC 100 allows: a busy leader collects about
// twice a second until its allocation passes 128 MiB/s, an idle grantor
// as at GOGC 100. The heap goal is then at most 64 MiB above GOGC 100's,
// which is what the tuner can add to a grantor's RSS (docs/limits.md); a
// soft memory limit (--memory-limit, GOMEMLIMIT, the cgroup's) still
// holds.
var grantorGC = gctune.Policy{
	LiveShare:   1,
	Interval:    500 * time.Millisecond,
	MinGrowth:   gctune.GoHeapMinimum,
	MaxGrowth:   64 << 20,
	StartGrowth: gctune.GoHeapMinimum,
	MinPercent:  100,
}

// tuneGrantorGCProcess starts the grantor's collection tuner in this
// process unless GOGC is set in the environment, and logs which.
func tuneGrantorGCProcess(log *slog.Logger) {
	if gctune.StartProcess(grantorGC) {
		log.Info("grantor: collections tuned from the live heap and the allocation rate (set GOGC to choose a fixed target)",
			"interval", grantorGC.Interval, "max_growth_bytes", grantorGC.MaxGrowth, "min_gogc", grantorGC.MinPercent)
	} else if v := os.Getenv("GOGC"); v != "" {
		log.Info("grantor: collections at GOGC from the environment", "gogc", v)
	}
}
