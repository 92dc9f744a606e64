package chaos

import (
	"fmt"
	"slices"
	"time"
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

// checkProbes checks the final probes: once the clients have stopped,
// every lease is free within bound, so the suite's own acquire of each
// name is granted in that time.
func checkProbes(h *History, names []string, bound time.Duration) []Violation {
	var vs []Violation
	got := map[string]bool{}
	for _, p := range h.Probes {
		got[p.Name] = true
		took := time.Duration(p.Return - p.Call)
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
			vs = append(vs, Violation{Checker: CheckLiveness, Name: n, Message: "no final probe of " + n})
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
