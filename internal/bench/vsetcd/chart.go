package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// runChart draws the ratios of the lines in the files given (`vsetcd
// pair` output) as a PNG.
func runChart(_ context.Context, args []string, _ io.Writer) error {
	fs := newFlags("chart")
	out := fs.String("out", "", "the PNG to write (required)")
	title := fs.String("title", "leaseside / etcd, interleaved pairs on one machine", "the chart's title")
	if err := parse(fs, args, true); err != nil {
		return err
	}
	if *out == "" || fs.NArg() == 0 {
		return fmt.Errorf("%w: vsetcd chart --out FILE.png LINES...", errUsage)
	}
	var lines []Line
	for _, f := range fs.Args() {
		ls, err := readLines(f)
		if err != nil {
			return err
		}
		lines = append(lines, ls...)
	}
	p, err := chart(lines, *title)
	if err != nil {
		return err
	}
	return p.Save(9*vg.Inch, vg.Length(1.2+0.36*float64(len(groups(lines))))*vg.Inch, *out)
}

// readLines reads the JSON lines of file; blank lines are skipped.
func readLines(file string) ([]Line, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []Line
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		var l Line
		if err := dec.Decode(&l); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", file, n, err)
		}
		if l.Workload == "" || l.Metric == "" || !(l.Ratio > 0) {
			return nil, fmt.Errorf("%s:%d: a line needs a workload, a metric and a positive ratio", file, n)
		}
		lines = append(lines, l)
	}
	return lines, sc.Err()
}

// group is one workload's metric: a row of the chart.
type group struct {
	workload, metric, better, against string
	target                            *float64
	ratios                            []float64
}

func (g group) label() string {
	w := g.workload
	if g.against != "etcd" {
		w += " vs " + g.against
	}
	return fmt.Sprintf("%s: %s (%s is better)", w, g.metric, g.better)
}

// groups collects the ratios of lines by workload and metric, in the order
// they first appear.
func groups(lines []Line) []group {
	var gs []group
	for _, l := range lines {
		i := slices.IndexFunc(gs, func(g group) bool { return g.workload == l.Workload && g.metric == l.Metric })
		if i < 0 {
			g := group{workload: l.Workload, metric: l.Metric, better: l.Better, against: l.Against}
			if l.Target != nil {
				v := l.Target.Value
				g.target = &v
			}
			gs = append(gs, g)
			i = len(gs) - 1
		}
		gs[i].ratios = append(gs[i].ratios, l.Ratio)
	}
	return gs
}

// chart plots one row per group, top to bottom in the order of lines: a
// point per pair's ratio on a log scale, the target as a red tick
// and 1 (parity) as a grey line.
func chart(lines []Line, title string) (*plot.Plot, error) {
	gs := groups(lines)
	if len(gs) == 0 {
		return nil, errors.New("chart: no lines")
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "leaseside / etcd (socket: / bare JSON echo), log scale"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = ratioTicks{}
	labels := make([]string, len(gs))
	var points, targets plotter.XYs
	var ranges plotter.XYLabels
	lo, hi := 1.0, 1.0
	for i, g := range gs {
		y := float64(len(gs) - 1 - i) // first group on top
		labels[len(gs)-1-i] = g.label()
		for _, r := range g.ratios {
			points = append(points, plotter.XY{X: r, Y: y})
			lo, hi = min(lo, r), max(hi, r)
		}
		if g.target != nil {
			targets = append(targets, plotter.XY{X: *g.target, Y: y})
			lo, hi = min(lo, *g.target), max(hi, *g.target)
		}
		ranges.XYs = append(ranges.XYs, plotter.XY{Y: y})
		ranges.Labels = append(ranges.Labels, ratioRange(g.ratios))
	}
	p.NominalY(labels...)
	// The range labels in a column right of every point and target, and
	// a row on top for the legend.
	for i := range ranges.XYs {
		ranges.XYs[i].X = hi * 1.5
	}
	p.X.Min, p.X.Max = lo/1.5, hi*6
	p.Y.Max = float64(len(gs)) + 0.5
	parity, err := plotter.NewLine(plotter.XYs{{X: 1, Y: -0.5}, {X: 1, Y: float64(len(gs)) - 0.5}})
	if err != nil {
		return nil, err
	}
	parity.Color = color.Gray{Y: 150}
	parity.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(plotter.NewGrid(), parity)
	if len(targets) > 0 {
		t, err := plotter.NewScatter(targets)
		if err != nil {
			return nil, err
		}
		t.GlyphStyle = draw.GlyphStyle{Shape: draw.BoxGlyph{}, Color: color.RGBA{R: 200, A: 255}, Radius: vg.Points(2.5)}
		p.Add(t)
		p.Legend.Add("target (issue 13)", t)
	}
	s, err := plotter.NewScatter(points)
	if err != nil {
		return nil, err
	}
	s.GlyphStyle = draw.GlyphStyle{Shape: draw.CircleGlyph{}, Color: color.RGBA{B: 180, A: 255}, Radius: vg.Points(3.5)}
	p.Add(s)
	rl, err := plotter.NewLabels(ranges)
	if err != nil {
		return nil, err
	}
	for i := range rl.TextStyle {
		rl.TextStyle[i].XAlign = draw.XLeft
		rl.TextStyle[i].YAlign = draw.YCenter
	}
	p.Add(rl)
	p.Legend.Add("ratio, one point per pair", s)
	p.Legend.Add("parity", parity)
	p.Legend.Top = true
	return p, nil
}

// ratioRange prints the ratios' range: "1.36x" or "0.39-0.83x".
func ratioRange(rs []float64) string {
	lo, hi := slices.Min(rs), slices.Max(rs)
	f := func(v float64) string {
		if v >= 10 {
			return fmt.Sprintf("%.0f", v)
		}
		return fmt.Sprintf("%.2f", v)
	}
	if f(lo) == f(hi) {
		return f(lo) + "x"
	}
	return f(lo) + "-" + f(hi) + "x"
}

// ratioTicks marks 1, 2 and 5 times the powers of ten on a log axis, and
// labels them.
type ratioTicks struct{}

func (ratioTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(min)); e <= math.Ceil(math.Log10(max)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v < min || v > max {
				continue
			}
			ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
		}
	}
	return ts
}
