package chaos

import (
	"fmt"
	"slices"
	"time"

	"github.com/leaseside/leaseside/internal/chaos/workload"
)

// clusterFault reports whether a fault is of the cluster track (after
// whose end, a heal, recovery is measured).
func clusterFault(f Fault) bool {
	return f.Kind != StopClient && f.Kind != KillClient && f.Skipped == ""
}

// recoveries measures, after every cluster fault ended (a heal, a
// restart, a SIGCONT), the time until the next grant of each name was
// read. It returns those times and how many (fault, name) pairs saw no
// grant before the run's end.
func recoveries(h *History, gs []*Grant, names []string) ([]time.Duration, int) {
	starts := map[string][]int64{}
	for _, g := range gs {
		starts[g.Name] = append(starts[g.Name], g.Start)
	}
	for _, s := range starts {
		slices.Sort(s)
	}
	var ds []time.Duration
	none := 0
	for _, f := range h.Faults {
		if !clusterFault(f) || f.End == 0 || f.End > h.End {
			continue
		}
		for _, n := range names {
			s := starts[n]
			i, _ := slices.BinarySearch(s, f.End)
			if i == len(s) || s[i] > h.End {
				none++
				continue
			}
			ds = append(ds, time.Duration(s[i]-f.End))
		}
	}
	slices.Sort(ds)
	return ds, none
}

// checkProbes checks the final probes: once the clients have stopped
// (h.End), every lease is free within bound, so the suite's own acquire
// of each name is granted in that time, counted from the clients' stop.
func checkProbes(h *History, names []string, bound time.Duration) []Violation {
	var vs []Violation
	got := map[string]bool{}
	for _, p := range h.Probes {
		got[p.Name] = true
		took := time.Duration(p.Return - min(h.End, p.Call))
		switch {
		case p.Err != "":
			vs = append(vs, Violation{Checker: CheckLiveness, Name: p.Name, At: p.Call,
				Message: fmt.Sprintf("once the clients stopped, %s was not free within %v: acquire from %s: %s", p.Name, bound, p.Sidecar, p.Err)})
		case took > bound:
			vs = append(vs, Violation{Checker: CheckLiveness, Name: p.Name, At: p.Call,
				Message: fmt.Sprintf("once the clients stopped, %s took %v to be granted (bound %v)", p.Name, took, bound)})
		}
	}
	for _, n := range names {
		if !got[n] {
			vs = append(vs, Violation{Checker: CheckLiveness, Name: n, At: h.End, Message: "no final probe of " + n})
		}
	}
	return vs
}

// checkRecovery checks that every name the clients kept asking for is
// granted within bound after a heal: bound counts only the time with no
// fault active (a fault that starts before the name recovers, a client
// stopped while it holds the name, pause the count). A (heal, name) is
// checked when an acquire of the name was called in the second half of
// the bound, with no grant since the heal: live clients still wanted it.
func checkRecovery(h *History, gs []*Grant, names []string, bound time.Duration) []Violation {
	var vs []Violation
	starts := map[string][]int64{}
	for _, g := range gs {
		starts[g.Name] = append(starts[g.Name], g.Start)
	}
	calls := map[string][]int64{}
	for _, r := range h.Records {
		if r.Kind == workload.KindAcquire || r.Kind == workload.KindRun {
			calls[r.Name] = append(calls[r.Name], r.At)
		}
	}
	for n := range starts {
		slices.Sort(starts[n])
	}
	for n := range calls {
		slices.Sort(calls[n])
	}
	// quiet is the time in [from, to) with no fault active.
	quiet := func(from, to int64) time.Duration {
		q := to - from
		for _, f := range h.Faults {
			if f.Skipped != "" {
				continue
			}
			end := f.End
			if end == 0 {
				end = h.End
			}
			if s, e := max(f.Start, from), min(end, to); e > s {
				q -= e - s
			}
		}
		return time.Duration(max(q, 0))
	}
	for _, f := range h.Faults {
		if !clusterFault(f) || f.End == 0 || f.End > h.End {
			continue
		}
		for _, n := range names {
			next := h.End // no grant before the clients stopped
			s := starts[n]
			if i, _ := slices.BinarySearch(s, f.End); i < len(s) && s[i] < h.End {
				next = s[i]
			}
			if quiet(f.End, next) <= bound {
				continue
			}
			// An acquire called in the second half of the bound.
			var asked int64
			for _, c := range calls[n] {
				if q := quiet(f.End, c); c >= f.End && c < next && q >= bound/2 && q <= bound {
					asked = c
					break
				}
			}
			if asked == 0 {
				continue
			}
			vs = append(vs, Violation{Checker: CheckLiveness, Name: n, At: asked,
				Message: fmt.Sprintf("after %s ended, %s was asked for (at +%v) and not granted for %v (%v of it with no fault; bound %v)",
					f.Kind, n, time.Duration(asked-f.End), time.Duration(next-f.End), quiet(f.End, next), bound)})
		}
	}
	return vs
}

// percentile returns the p-th percentile (0 to 100) of sorted ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(float64(len(ds)-1) * p / 100)
	return ds[i]
}
