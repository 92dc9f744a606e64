package chaos

import (
	"cmp"
	"encoding/json"
	"os"
	"slices"
	"time"
)

// Report is what a run writes to report.json: how to replay it, what
// ran, what was counted and measured, and what the checkers found.
type Report struct {
	Seed     uint64   `json:"seed"`
	Replay   string   `json:"replay"`
	Config   Config   `json:"config"`
	Schedule Schedule `json:"schedule"`
	Faults   []Fault  `json:"faults"`
	Counts   Counts   `json:"counts"`
	Figures  Figures  `json:"figures"`
	// Violations are every violation found (the first few hundred).
	Violations []Violation `json:"violations"`
	// Unchecked lists the names whose linearizability check ran out of
	// time (neither passed nor failed); such a run fails.
	Unchecked []string `json:"unchecked,omitempty"`
}

// Counts are what happened in a run.
type Counts struct {
	// Operations counts the clients' records by kind (acq, acq_ok, rel,
	// chk, run, ...).
	Operations map[string]int `json:"operations"`
	Grants     int            `json:"grants"`
	// Writes to the fenced register, and how many it accepted, refused
	// for a stale token, refused for arriving after the writer's deadline.
	Writes      int `json:"writes"`
	Accepted    int `json:"writes_accepted"`
	Stale       int `json:"writes_stale"`
	Late        int `json:"writes_late"`
	ClientExits int `json:"client_exits"`
	// Faults counts the faults that ran, by kind; Skipped those that
	// could not be made here.
	Faults  map[Kind]int `json:"faults"`
	Skipped map[Kind]int `json:"faults_skipped,omitempty"`
	// Events counts what the sidecars told watchers, by event.
	Events map[string]int `json:"sidecar_events"`
}

// Figures are what a run measured.
type Figures struct {
	Violations map[string]int `json:"violations_by_checker"`
	// Recovery after each cluster fault ended: until the next grant of
	// each name.
	Recoveries    int     `json:"recoveries"`
	RecoveryP50Ms float64 `json:"recovery_p50_ms"`
	RecoveryMaxMs float64 `json:"recovery_max_ms"`
	NotRecovered  int     `json:"not_recovered"`
	// Grants per second over the whole run, while a cluster fault was
	// active, and while none was.
	Seconds             float64 `json:"seconds"`
	FaultSeconds        float64 `json:"fault_seconds"`
	GrantsPerSecond     float64 `json:"grants_per_second"`
	GrantsPerSecFaults  float64 `json:"grants_per_second_under_faults"`
	GrantsPerSecQuiet   float64 `json:"grants_per_second_without_faults"`
	ProbeMaxMs          float64 `json:"final_probe_max_ms"`
	LinearizableChecked int     `json:"linearizable_names_checked"`
	// LoadAvg is the machine's one-minute load average over the run
	// (mean and highest of samples every 10 s): other programs on the
	// machine slow everything down, and the figures with it.
	LoadAvgMean float64 `json:"load_avg_mean"`
	LoadAvgMax  float64 `json:"load_avg_max"`
}

// maxReported bounds the violations a report lists.
const maxReported = 300

// makeReport counts and measures.
func makeReport(cfg Config, sched Schedule, h *History, gs []*Grant, vs []Violation, unknown []string) *Report {
	r := &Report{Seed: cfg.Seed, Replay: cfg.replay(), Config: cfg, Schedule: sched, Faults: h.Faults,
		Violations: vs[:min(len(vs), maxReported)], Unchecked: unknown}
	c := Counts{Operations: map[string]int{}, Faults: map[Kind]int{}, Skipped: map[Kind]int{}, Events: map[string]int{}}
	for _, rec := range h.Records {
		c.Operations[rec.Kind]++
	}
	c.Grants = len(gs)
	for _, w := range h.Writes {
		c.Writes++
		switch {
		case w.Accepted:
			c.Accepted++
		case w.Reason == "stale":
			c.Stale++
		case w.Reason == "late":
			c.Late++
		}
	}
	c.ClientExits = len(h.Exits)
	for _, f := range h.Faults {
		if f.Skipped != "" {
			c.Skipped[f.Kind]++
		} else {
			c.Faults[f.Kind]++
		}
	}
	for _, e := range h.Events {
		c.Events[e.Event.Event]++
	}
	r.Counts = c

	f := Figures{Violations: map[string]int{}}
	for _, v := range vs {
		f.Violations[v.Checker]++
	}
	names := cfg.allNames()
	ds, none := recoveries(h, gs, names)
	f.Recoveries, f.NotRecovered = len(ds), none
	f.RecoveryP50Ms = ms(percentile(ds, 50))
	if len(ds) > 0 {
		f.RecoveryMaxMs = ms(ds[len(ds)-1])
	}
	f.Seconds = time.Duration(h.End - h.Start).Seconds()
	faultNs := faultTime(h)
	f.FaultSeconds = time.Duration(faultNs).Seconds()
	inFault := 0
	for _, g := range gs {
		if underFault(h, g.Start) {
			inFault++
		}
	}
	if f.Seconds > 0 {
		f.GrantsPerSecond = float64(len(gs)) / f.Seconds
	}
	if f.FaultSeconds > 0 {
		f.GrantsPerSecFaults = float64(inFault) / f.FaultSeconds
	}
	if quiet := f.Seconds - f.FaultSeconds; quiet > 0 {
		f.GrantsPerSecQuiet = float64(len(gs)-inFault) / quiet
	}
	for _, p := range h.Probes {
		f.ProbeMaxMs = max(f.ProbeMaxMs, ms(time.Duration(p.Return-p.Call)))
	}
	f.LinearizableChecked = len(names) - len(unknown)
	if cfg.semaphore() != "" {
		f.LinearizableChecked-- // the semaphore is not checked
	}
	for _, l := range h.Load {
		f.LoadAvgMean += l / float64(len(h.Load))
		f.LoadAvgMax = max(f.LoadAvgMax, l)
	}
	r.Figures = f
	return r
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// underFault reports whether a cluster fault was active at an instant.
func underFault(h *History, at int64) bool {
	for _, f := range h.Faults {
		if clusterFault(f) && f.Start <= at && at <= f.End {
			return true
		}
	}
	return false
}

// faultTime is the time, within the run, during which some cluster fault
// was active (overlaps counted once).
func faultTime(h *History) int64 {
	var spans [][2]int64
	for _, f := range h.Faults {
		if clusterFault(f) && f.End > f.Start {
			spans = append(spans, [2]int64{max(f.Start, h.Start), min(f.End, h.End)})
		}
	}
	slices.SortFunc(spans, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var total, reach int64
	for _, s := range spans {
		if s[1] <= reach {
			continue
		}
		total += s[1] - max(s[0], reach)
		reach = s[1]
	}
	return total
}

// write writes the report as indented JSON.
func (r *Report) write(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
