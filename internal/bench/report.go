package bench

import (
	"slices"
	"time"
)

// Report is what Run measured.
type Report struct {
	// Grantors are the addresses the bench was given; Leader the one that
	// answered.
	Grantors []string `json:"grantors"`
	Leader   string   `json:"leader"`
	// Started is when the run began.
	Started time.Time `json:"started"`
	// Results holds one entry per workload that finished.
	Results []*Result `json:"results"`
}

// Result is one workload's figures.
type Result struct {
	Workload string `json:"workload"`
	// Setup says, in words, what was run (sizes, duration).
	Setup   string   `json:"setup"`
	Figures []Figure `json:"figures"`
	// Notes are checks that passed and caveats, in words.
	Notes []string `json:"notes,omitempty"`
	// Elapsed is the workload's wall time, setup and cleanup included.
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Figure is one measured number, with its target if it has one.
type Figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	// Unit is "/s", "ms", "B/lease", "MiB", "cores" or "" for a count.
	Unit   string  `json:"unit"`
	Target *Target `json:"target,omitempty"`
	// Met says whether Value meets Target; absent without a target.
	Met *bool `json:"met,omitempty"`
}

// Target is a figure's goal: Value compared with Op (">=", "<=", "<").
type Target struct {
	Op    string  `json:"op"`
	Value float64 `json:"value"`
}

// Figure returns the figure named name, or false.
func (r *Result) Figure(name string) (Figure, bool) {
	for _, f := range r.Figures {
		if f.Name == name {
			return f, true
		}
	}
	return Figure{}, false
}

// Misses lists the figures of every result that miss their target.
func (r *Report) Misses() []string {
	var out []string
	for _, res := range r.Results {
		for _, f := range res.Figures {
			if f.Met != nil && !*f.Met {
				out = append(out, res.Workload+": "+f.Name)
			}
		}
	}
	return out
}

func (r *Result) add(name string, value float64, unit string) {
	r.Figures = append(r.Figures, Figure{Name: name, Value: value, Unit: unit})
}

// addTarget adds a figure with a target and whether it is met.
func (r *Result) addTarget(name string, value float64, unit, op string, target float64) {
	var met bool
	switch op {
	case ">=":
		met = value >= target
	case "<=":
		met = value <= target
	case "<":
		met = value < target
	default:
		panic("bench: unknown target op " + op)
	}
	r.Figures = append(r.Figures, Figure{Name: name, Value: value, Unit: unit, Target: &Target{Op: op, Value: target}, Met: &met})
}

func (r *Result) note(s string) { r.Notes = append(r.Notes, s) }

// latencies collects durations and reports percentiles in milliseconds.
type latencies []time.Duration

func merge(parts []latencies) latencies {
	var all latencies
	for _, p := range parts {
		all = append(all, p...)
	}
	slices.Sort(all)
	return all
}

// ms returns the q-quantile (0 < q <= 1) of sorted l, nearest rank, in
// milliseconds; 0 for an empty l.
func (l latencies) ms(q float64) float64 {
	if len(l) == 0 {
		return 0
	}
	i := int(float64(len(l))*q+0.999999999) - 1
	i = max(0, min(i, len(l)-1))
	return float64(l[i]) / float64(time.Millisecond)
}

// window is the measured part of a timed workload: from the end of the
// warmup to the end.
type window struct {
	start, end time.Time
}

func newWindow(warmup, d time.Duration) window {
	start := time.Now().Add(warmup)
	return window{start: start, end: start.Add(d)}
}

// holds reports whether an operation from t0 to t1 lies in w.
func (w window) holds(t0, t1 time.Time) bool {
	return !t0.Before(w.start) && !t1.After(w.end)
}

// rate is n per second of w.
func (w window) rate(n int) float64 {
	return float64(n) / w.end.Sub(w.start).Seconds()
}
