package cli

import (
	"bufio"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// The grantor's soft memory limit (runtime/debug.SetMemoryLimit): the Go
// collector runs before the memory the runtime holds passes it, so the
// garbage of a flood of calls (docs/limits.md, "The floods of issue 21")
// is collected before the process's RSS grows far, instead of when the
// collector next catches up. It is soft: a live heap above it is kept
// (the collector then takes at most about half the CPU), never an error.
//
// --memory-limit (config key memory_limit) takes a size (536870912,
// 512MiB, 2GiB) or "none". Without it, GOMEMLIMIT is used as the Go
// runtime read it; without that, 90% of the cgroup's memory limit
// (cgroup v2 memory.max, v1 memory.limit_in_bytes) when one is set, so
// the collector works hard before the kernel's OOM killer would; else
// none.

// memLimitShare is the share of the cgroup's limit the default takes: the
// rest is for what the Go runtime does not count (the page cache of the
// raft log charged to the cgroup, memory mapped files).
const memLimitShare = 0.9

// cgroupRoot is where the cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// parseMemoryLimit reads --memory-limit: a byte count with an optional
// KiB, MiB or GiB suffix, or "none" (0, no limit).
func parseMemoryLimit(s string) (int64, error) {
	if s == "none" {
		return 0, nil
	}
	num, mult := s, int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("--memory-limit %q: want a positive size such as 536870912, 512MiB or 2GiB, or none", s)
	}
	return n * mult, nil
}

// applyMemoryLimit sets the grantor's soft memory limit from flag (see
// the top of this file; "" when not given) and logs it and where it came
// from.
func applyMemoryLimit(flag string, log *slog.Logger) error {
	var limit int64
	var from string
	switch {
	case flag != "":
		n, err := parseMemoryLimit(flag)
		if err != nil {
			return usagef("grantor: %v", err)
		}
		limit, from = n, "--memory-limit"
	case os.Getenv("GOMEMLIMIT") != "":
		log.Info("grantor: soft memory limit", "bytes", debug.SetMemoryLimit(-1), "from", "GOMEMLIMIT")
		return nil
	default:
		if max, path := cgroupMemoryMax(); max > 0 {
			limit, from = int64(float64(max)*memLimitShare), fmt.Sprintf("90%% of %s (%d)", path, max)
		}
	}
	if limit == 0 {
		debug.SetMemoryLimit(math.MaxInt64)
		log.Info("grantor: no soft memory limit (set --memory-limit, GOMEMLIMIT or a cgroup memory limit; docs/limits.md)")
		return nil
	}
	debug.SetMemoryLimit(limit)
	log.Info("grantor: soft memory limit", "bytes", limit, "from", from)
	return nil
}

// cgroupMemoryMax returns this process's cgroup memory limit and the
// file it was read from, or 0 when none is set or none can be read.
func cgroupMemoryMax() (int64, string) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return 0, ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controllers:path; v2 is "0::path".
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var candidates []string
		switch {
		case parts[0] == "0" && parts[1] == "":
			candidates = []string{filepath.Join(cgroupRoot, parts[2], "memory.max")}
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			// Inside a container the v1 hierarchy is often mounted at
			// its own cgroup.
			candidates = []string{filepath.Join(cgroupRoot, "memory", parts[2], "memory.limit_in_bytes"),
				filepath.Join(cgroupRoot, "memory", "memory.limit_in_bytes")}
		}
		for _, p := range candidates {
			if n := readCgroupLimit(p); n > 0 {
				return n, p
			}
		}
	}
	return 0, ""
}

// readCgroupLimit reads a cgroup memory limit file: 0 for "max", for a
// v1 "unlimited" (a value near MaxInt64) or when it cannot be read.
func readCgroupLimit(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	s := strings.TrimSpace(string(b))
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= math.MaxInt64/2 {
		return 0
	}
	return n
}
