package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/leaseside/leaseside/internal/bench"
)

// figureOf reads figure name of the first result in a recorded report
// file, as plain JSON (not through bench.Report), for the tests to check
// compare against.
func figureOf(t *testing.T, file, name string) float64 {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var rep struct {
			Results []struct {
				Figures []struct {
					Name  string
					Value float64
				}
			}
		}
		if err := dec.Decode(&rep); err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Results {
			for _, f := range r.Figures {
				if f.Name == name {
					return f.Value
				}
			}
		}
	}
	t.Fatalf("%s has no figure %q", file, name)
	return 0
}

func mustRead(t *testing.T, file string) []*bench.Result {
	t.Helper()
	rs, err := readReports(file)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// Every workload pairs the recorded reports of a real run (testdata) into
// its metrics, each ratio the leaseside figure over the other's.
func TestCompareRecorded(t *testing.T) {
	fixture := map[string]string{"locks64": "locks", "locks16": "locks", "shell-run": "shell"}
	want := map[string][]string{
		"locks64":    {"cycles/s", "acquire p50", "leader CPU per cycle"},
		"locks16":    {"cycles/s", "acquire p50", "leader CPU per cycle"},
		"handoffs":   {"handoffs/s", "handoff p50", "leader CPU per handoff"},
		"keepalives": {"messages/s", "renewals/s", "leader CPU per message"},
		"memory":     {"leader RSS per live lease"},
		"shell":      {"acquire --detached + release, time"},
		"shell-run":  {"run -- true, time"},
		"socket":     {"round trips/s", "round trip p50"},
	}
	for _, w := range workloads {
		t.Run(w, func(t *testing.T) {
			name := w
			if f, ok := fixture[w]; ok {
				name = f
			}
			lsFile := filepath.Join("testdata", name+"-leaseside.json")
			etFile := filepath.Join("testdata", name+"-etcd.json")
			lines, err := compare(w, mustRead(t, lsFile), mustRead(t, etFile))
			if err != nil {
				t.Fatal(err)
			}
			var metrics []string
			for _, l := range lines {
				metrics = append(metrics, l.Metric)
				if l.Workload != w || l.Against == "" || (l.Better != "higher" && l.Better != "lower") {
					t.Errorf("line %+v: workload, against or better wrong", l)
				}
				if math.Abs(l.Ratio-l.Leaseside/l.Etcd) > 1e-12*l.Ratio {
					t.Errorf("%s: ratio %v, want %v / %v", l.Metric, l.Ratio, l.Leaseside, l.Etcd)
				}
				if (l.Target == nil) != (l.Met == nil) {
					t.Errorf("%s: target %v and met %v go together", l.Metric, l.Target, l.Met)
				}
			}
			if !slices.Equal(metrics, want[w]) {
				t.Errorf("metrics %v, want %v", metrics, want[w])
			}
			// The first metric is a figure of both reports as recorded.
			first := map[string]string{
				"locks64": "grants/s (each with its release)", "locks16": "grants/s (each with its release)",
				"handoffs": "handoffs/s", "keepalives": "keepalive messages/s", "memory": "leader RSS per live lease",
				"shell": "time per cycle mean", "socket": "round trips/s",
			}[w]
			if first == "" {
				return // shell-run reads the same etcd figure as shell
			}
			if got, want := lines[0].Leaseside, figureOf(t, lsFile, first); got != want {
				t.Errorf("leaseside %s = %v, want %v from %s", first, got, want, lsFile)
			}
			etFigure := first
			if w == "locks64" || w == "locks16" {
				etFigure = "grants/s (each with its release)"
			}
			if got, want := lines[0].Etcd, figureOf(t, etFile, etFigure); got != want {
				t.Errorf("etcd %s = %v, want %v from %s", etFigure, got, want, etFile)
			}
		})
	}
}

// result is a one-workload result with figures given as name, value pairs.
func result(workload string, figs ...any) *bench.Result {
	r := &bench.Result{Workload: workload}
	for i := 0; i < len(figs); i += 2 {
		r.Add(figs[i].(string), figs[i+1].(float64), "")
	}
	return r
}

func TestCompareTargets(t *testing.T) {
	for _, tc := range []struct {
		name              string
		lsCycles, lsP50   float64
		wantCycles, wantP bool
	}{
		{name: "both met at the edge", lsCycles: 3000, lsP50: 4, wantCycles: true, wantP: true},
		{name: "both missed", lsCycles: 2999, lsP50: 4.01},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls := result("grants", "grants/s (each with its release)", tc.lsCycles, "acquire latency p50", tc.lsP50, "leader CPU", 0.5)
			et := result("locks", "grants/s (each with its release)", 1000.0, "acquire latency p50", 10.0, "leader CPU", 0.5)
			lines, err := compare("locks64", []*bench.Result{ls}, []*bench.Result{et})
			if err != nil {
				t.Fatal(err)
			}
			if *lines[0].Met != tc.wantCycles || *lines[1].Met != tc.wantP {
				t.Errorf("met %v %v (ratios %v %v), want %v %v", *lines[0].Met, *lines[1].Met, lines[0].Ratio, lines[1].Ratio, tc.wantCycles, tc.wantP)
			}
		})
	}
}

// Leader CPU per message is leader CPU over the message rate, in µs.
func TestComparePerOp(t *testing.T) {
	ls := result("keepalives", "keepalive messages/s", 1000.0, "lease renewals/s", 100000.0, "leader CPU", 0.5)
	et := result("keepalives", "keepalive messages/s", 4000.0, "lease renewals/s", 4000.0, "leader CPU", 0.2)
	lines, err := compare("keepalives", []*bench.Result{ls}, []*bench.Result{et})
	if err != nil {
		t.Fatal(err)
	}
	cpu := lines[2]
	if cpu.Leaseside != 500 || cpu.Etcd != 50 || cpu.Ratio != 10 || cpu.Unit != "µs" || *cpu.Met {
		t.Errorf("leader CPU per message %+v, want 500 µs against 50 µs, ratio 10, missed", cpu)
	}
}

func TestCompareRefuses(t *testing.T) {
	good := result("handoffs", "handoffs/s", 100.0, "handoff latency p50", 1.0, "leader CPU", 0.1)
	for _, tc := range []struct {
		name     string
		workload string
		ls, et   *bench.Result
		usage    bool
	}{
		{name: "unknown workload", workload: "naps", ls: good, et: good, usage: true},
		{name: "no such result", workload: "handoffs", ls: result("grants"), et: good},
		{name: "a figure missing", workload: "handoffs", ls: good, et: result("handoffs", "handoffs/s", 100.0)},
		{name: "no leader CPU", workload: "handoffs", ls: good, et: result("handoffs", "handoffs/s", 100.0, "handoff latency p50", 1.0)},
		{name: "a zero rate", workload: "handoffs", ls: good, et: result("handoffs", "handoffs/s", 0.0, "handoff latency p50", 1.0, "leader CPU", 0.1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := compare(tc.workload, []*bench.Result{tc.ls}, []*bench.Result{tc.et})
			if err == nil || errors.Is(err, errUsage) != tc.usage {
				t.Errorf("compare = %v, want an error (usage: %v)", err, tc.usage)
			}
		})
	}
}

func TestReadReports(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	two := write("two", `{"results":[{"workload":"shell","figures":[{"name":"a","value":1,"unit":""}]}]}
{"results":[{"workload":"shell-run","figures":[]}]}`)
	rs, err := readReports(two)
	if err != nil || len(rs) != 2 || rs[0].Workload != "shell" || rs[1].Workload != "shell-run" {
		t.Errorf("two reports: %v, %v", rs, err)
	}
	for name, s := range map[string]string{
		"empty":         "",
		"no results":    `{"results":[]}`,
		"unknown field": `{"results":[{"workload":"x","figures":[],"extra":1}]}`,
		"not json":      `workload x`,
	} {
		if _, err := readReports(write(strings.ReplaceAll(name, " ", "-"), s)); err == nil {
			t.Errorf("%s: read without error", name)
		}
	}
}
