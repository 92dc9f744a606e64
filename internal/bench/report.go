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
	// Unit is "/s", "ms", "µs", "s", "B/lease", "MiB", "cores", "x" (a ratio)
	// or "" for a count.
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

// Add appends a figure without a target.
func (r *Result) Add(name string, value float64, unit string) {
	r.Figures = append(r.Figures, Figure{Name: name, Value: value, Unit: unit})
}

// addTarget adds a figure with a target and whether it is met.
func (r *Result) addTarget(name string, value float64, unit, op string, target float64) {
	r.Add(name, value, unit)
	r.SetTarget(name, op, target)
}

// SetTarget gives the figure named name a target, Value compared with op
// (">=", "<=" or "<"), and records whether it is met. It panics if there
// is no such figure or op is unknown: both are the caller's bug.
func (r *Result) SetTarget(name, op string, target float64) {
	i := slices.IndexFunc(r.Figures, func(f Figure) bool { return f.Name == name })
	if i < 0 {
		panic("bench: no figure " + name)
	}
	f := &r.Figures[i]
	var met bool
	switch op {
	case ">=":
		met = f.Value >= target
	case "<=":
		met = f.Value <= target
	case "<":
		met = f.Value < target
	default:
		panic("bench: unknown target op " + op)
	}
	f.Target, f.Met = &Target{Op: op, Value: target}, &met
}

// Note adds a line of words: a check that passed, or a caveat.
func (r *Result) Note(s string) { r.Notes = append(r.Notes, s) }

// Latencies collects durations and reports percentiles in milliseconds.
type Latencies []time.Duration

// Merge returns all of parts in one sorted Latencies.
func Merge(parts []Latencies) Latencies {
	var all Latencies
	for _, p := range parts {
		all = append(all, p...)
	}
	slices.Sort(all)
	return all
}

// MS returns the q-quantile (0 < q <= 1) of sorted l, nearest rank, in
// milliseconds; 0 for an empty l.
func (l Latencies) MS(q float64) float64 {
	if len(l) == 0 {
		return 0
	}
	i := int(float64(len(l))*q+0.999999999) - 1
	i = max(0, min(i, len(l)-1))
	return float64(l[i]) / float64(time.Millisecond)
}
