package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leaseside/leaseside/internal/bench"
)

// Line is one figure of one workload compared in one pair: what
// `vsetcd pair` prints (a JSON object a line) and `vsetcd chart` reads.
type Line struct {
	Workload string `json:"workload"`
	Metric   string `json:"metric"`
	Pair     int    `json:"pair"`
	// Leaseside and Etcd are the two sides' figures, in Unit; Etcd holds
	// the echo's for the socket workload (Against says which).
	Leaseside float64 `json:"leaseside"`
	Etcd      float64 `json:"etcd"`
	Ratio     float64 `json:"ratio"` // Leaseside / Etcd
	Unit      string  `json:"unit"`
	// Better is "higher" or "lower": which way a ratio is good.
	Better  string `json:"better"`
	Against string `json:"against"`
	// Target is issue 13's target for Ratio, if it has one, and Met
	// whether Ratio meets it.
	Target *bench.Target `json:"target,omitempty"`
	Met    *bool         `json:"met,omitempty"`
	// LoadAvg is the machine's 1-minute load average before the pair ran
	// and after.
	LoadAvg [2]float64 `json:"load_avg"`
	Commit  string     `json:"commit,omitempty"`
	Time    time.Time  `json:"time"`
}

// comparison is one figure compared: how to read it from a result.
type comparison struct {
	metric string
	unit   string
	better string
	target *bench.Target
	// figure names the figure; perOp, if set, names a rate figure and
	// the value is then leader CPU (µs) per one of it.
	figure, perOp string
}

// pairing says which workloads of the two sides' reports are compared,
// and how.
type pairing struct {
	against             string // "etcd" or "echo"
	leaseside, etcdSide string // the workload names in the reports
	comparisons         []comparison
}

func atLeast(v float64) *bench.Target { return &bench.Target{Op: ">=", Value: v} }
func atMost(v float64) *bench.Target  { return &bench.Target{Op: "<=", Value: v} }

// pairings are vs-etcd.sh's workloads, with issue 13's targets.
var pairings = map[string]pairing{
	"locks64": lockPairing(atLeast(3), atMost(0.4)),
	"locks16": lockPairing(nil, nil),
	"handoffs": {against: "etcd", leaseside: "handoffs", etcdSide: "handoffs", comparisons: []comparison{
		{metric: "handoffs/s", unit: "/s", better: "higher", target: atLeast(8), figure: "handoffs/s"},
		{metric: "handoff p50", unit: "ms", better: "lower", target: atMost(0.25), figure: "handoff latency p50"},
		{metric: "leader CPU per handoff", unit: "µs", better: "lower", perOp: "handoffs/s"},
	}},
	"keepalives": {against: "etcd", leaseside: "keepalives", etcdSide: "keepalives", comparisons: []comparison{
		{metric: "messages/s", unit: "/s", better: "higher", target: atLeast(1.5), figure: "keepalive messages/s"},
		{metric: "renewals/s", unit: "/s", better: "higher", target: atLeast(100), figure: "lease renewals/s"},
		{metric: "leader CPU per message", unit: "µs", better: "lower", target: atMost(1), perOp: "keepalive messages/s"},
	}},
	"memory": {against: "etcd", leaseside: "memory", etcdSide: "memory", comparisons: []comparison{
		{metric: "leader RSS per live lease", unit: "B", better: "lower", target: atMost(0.2), figure: "leader RSS per live lease"},
	}},
	"socket": {against: "echo", leaseside: "socket", etcdSide: "socket", comparisons: []comparison{
		{metric: "round trips/s", unit: "/s", better: "higher", target: atLeast(0.8), figure: "round trips/s"},
		{metric: "round trip p50", unit: "ms", better: "lower", figure: "round trip p50"},
	}},
	"shell":     shellPairing("shell", "acquire --detached + release, time"),
	"shell-run": shellPairing("shell-run", "run -- true, time"),
}

func lockPairing(cycles, p50 *bench.Target) pairing {
	return pairing{against: "etcd", leaseside: "grants", etcdSide: "locks", comparisons: []comparison{
		{metric: "cycles/s", unit: "/s", better: "higher", target: cycles, figure: "grants/s (each with its release)"},
		{metric: "acquire p50", unit: "ms", better: "lower", target: p50, figure: "acquire latency p50"},
		{metric: "leader CPU per cycle", unit: "µs", better: "lower", perOp: "grants/s (each with its release)"},
	}}
}

// shellPairing compares the time of leaseside's shell commands (metric)
// with `etcdctl lock NAME -- true`'s.
func shellPairing(leaseside, metric string) pairing {
	return pairing{against: "etcd", leaseside: leaseside, etcdSide: "shell", comparisons: []comparison{
		{metric: metric, unit: "ms", better: "lower", figure: "time per cycle mean"},
	}}
}

// Workloads lists vs-etcd.sh's workloads in the order it runs them.
var workloads = []string{"locks64", "locks16", "handoffs", "keepalives", "memory", "shell", "shell-run", "socket"}

func runPair(_ context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("pair")
	workload := fs.String("workload", "", "the workload compared: "+strings.Join(workloads, ", "))
	pair := fs.Int("pair", 1, "the pair's number")
	lsFile := fs.String("leaseside", "", "leaseside's reports (`leaseside bench --json` or `vsetcd socket|shell` output)")
	etcdFile := fs.String("etcd", "", "etcd's (or the echo's) reports (`vsetcd etcd|socket|shell` output)")
	loadBefore := fs.Float64("load-before", 0, "the 1-minute load average before the pair ran")
	commit := fs.String("commit", "", "the leaseside commit measured")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	if *lsFile == "" || *etcdFile == "" {
		return fmt.Errorf("%w: --leaseside and --etcd are required", errUsage)
	}
	ls, err := readReports(*lsFile)
	if err != nil {
		return err
	}
	et, err := readReports(*etcdFile)
	if err != nil {
		return err
	}
	loadAfter, err := loadAvg()
	if err != nil {
		return err
	}
	lines, err := compare(*workload, ls, et)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	for _, l := range lines {
		l.Pair, l.LoadAvg, l.Commit, l.Time = *pair, [2]float64{*loadBefore, loadAfter}, *commit, time.Now().UTC().Truncate(time.Second)
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	return nil
}

// compare returns the lines of workload from the two sides' results.
func compare(workload string, ls, et []*bench.Result) ([]Line, error) {
	p, ok := pairings[workload]
	if !ok {
		return nil, fmt.Errorf("%w: unknown workload %q (%s)", errUsage, workload, strings.Join(workloads, ", "))
	}
	lr, err := find(ls, p.leaseside, "leaseside")
	if err != nil {
		return nil, err
	}
	er, err := find(et, p.etcdSide, p.against)
	if err != nil {
		return nil, err
	}
	var lines []Line
	for _, c := range p.comparisons {
		lv, err := c.value(lr)
		if err != nil {
			return nil, fmt.Errorf("leaseside %s: %w", p.leaseside, err)
		}
		ev, err := c.value(er)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", p.against, p.etcdSide, err)
		}
		if !(ev > 0) || !(lv > 0) {
			return nil, fmt.Errorf("%s %s: leaseside %v, %s %v: both must be positive to compare", workload, c.metric, lv, p.against, ev)
		}
		l := Line{Workload: workload, Metric: c.metric, Leaseside: lv, Etcd: ev, Ratio: lv / ev, Unit: c.unit, Better: c.better, Against: p.against, Target: c.target}
		if c.target != nil {
			met := l.Ratio >= c.target.Value
			if c.target.Op == "<=" {
				met = l.Ratio <= c.target.Value
			}
			l.Met = &met
		}
		lines = append(lines, l)
	}
	return lines, nil
}

// value reads c's figure from r.
func (c comparison) value(r *bench.Result) (float64, error) {
	if c.perOp == "" {
		f, ok := r.Figure(c.figure)
		if !ok {
			return 0, fmt.Errorf("no figure %q", c.figure)
		}
		return f.Value, nil
	}
	cpu, ok := r.Figure("leader CPU")
	if !ok {
		return 0, errors.New(`no figure "leader CPU" (was the leader's pid given?)`)
	}
	rate, ok := r.Figure(c.perOp)
	if !ok || !(rate.Value > 0) {
		return 0, fmt.Errorf("no positive figure %q", c.perOp)
	}
	return cpu.Value / rate.Value * 1e6, nil
}

// find returns the result of workload in rs.
func find(rs []*bench.Result, workload, side string) (*bench.Result, error) {
	i := slices.IndexFunc(rs, func(r *bench.Result) bool { return r.Workload == workload })
	if i < 0 {
		return nil, fmt.Errorf("%s: no result of workload %q", side, workload)
	}
	return rs[i], nil
}

// readReports reads the results of the reports (one JSON object each,
// one after the other) in file.
func readReports(file string) ([]*bench.Result, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var rs []*bench.Result
	for {
		var rep bench.Report
		err := dec.Decode(&rep)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not a bench report: %w", file, err)
		}
		rs = append(rs, rep.Results...)
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%s: no results", file)
	}
	return rs, nil
}

// loadAvg reads the 1-minute load average.
func loadAvg() (float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, errors.New("/proc/loadavg is empty")
	}
	return strconv.ParseFloat(f[0], 64)
}
