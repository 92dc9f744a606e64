package chaos

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The timeline picture of a run: one row per lease name with each holder
// as a bar from reading its grant to the end of its belief, coloured by
// token (and labelled with it where it fits); the cluster faults as
// shaded bands over every row, coloured by kind; the client faults as
// marks in a row of their own (black: kill -9, grey: SIGSTOP); violations
// in red.

// rect is a filled rectangle in data coordinates, optionally labelled.
type rect struct {
	x0, x1, y0, y1 float64
	fill           color.Color
	label          string
}

// rects draws rectangles (a plot.Plotter and plot.DataRanger).
type rects struct {
	items []rect
	text  draw.TextStyle
}

// Plot draws the rectangles, and each label that fits in its rectangle.
func (r rects) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for _, it := range r.items {
		x0, x1, y0, y1 := trX(it.x0), trX(it.x1), trY(it.y0), trY(it.y1)
		if x1-x0 < 1 {
			x1 = x0 + 1 // a bar too short to see is drawn a point wide
		}
		pts := []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}
		c.FillPolygon(it.fill, c.ClipPolygonXY(pts))
		if it.label != "" && r.text.Width(it.label) < x1-x0-2 {
			c.FillText(r.text, vg.Point{X: (x0 + x1) / 2, Y: (y0 + y1) / 2}, it.label)
		}
	}
}

// DataRange is the rectangles' extent.
func (r rects) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, ymin = math.Inf(1), math.Inf(1)
	xmax, ymax = math.Inf(-1), math.Inf(-1)
	for _, it := range r.items {
		xmin, xmax = min(xmin, it.x0), max(xmax, it.x1)
		ymin, ymax = min(ymin, it.y0), max(ymax, it.y1)
	}
	return
}

// swatch is a legend entry's coloured square.
type swatch struct{ c color.Color }

// Thumbnail draws the square.
func (s swatch) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(s.c, []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}})
}

// tokenColors colour holders' bars, by token.
var tokenColors = []color.Color{
	color.NRGBA{31, 119, 180, 255}, color.NRGBA{44, 160, 44, 255}, color.NRGBA{255, 127, 14, 255},
	color.NRGBA{148, 103, 189, 255}, color.NRGBA{140, 86, 75, 255}, color.NRGBA{23, 190, 207, 255},
	color.NRGBA{188, 189, 34, 255}, color.NRGBA{127, 127, 127, 255},
}

// faultColor shades a kind of cluster fault.
func faultColor(k Kind) color.Color {
	switch k {
	case Partition, OneWay, Split, LeaderAlone, SidecarAlone, Flapping:
		return color.NRGBA{70, 130, 220, 55} // the network: blue
	case KillGrantor, StopGrantor, TimeNamespace:
		return color.NRGBA{240, 160, 40, 60} // grantor processes: orange
	case KillSidecar, StopSidecar, StallSidecar:
		return color.NRGBA{160, 90, 200, 55} // sidecars: purple
	case StarveCPU, SlowDisk:
		return color.NRGBA{60, 170, 90, 55} // resources: green
	case ClockStep:
		return color.NRGBA{150, 110, 60, 60} // the clock: brown
	}
	return color.NRGBA{120, 120, 120, 55} // membership, rolling restarts: grey
}

var violationColor = color.NRGBA{220, 20, 20, 210}

// faultGroups are the legend's entries for fault colours.
var faultGroups = []struct {
	label string
	kind  Kind
}{
	{"network fault", Partition}, {"grantor killed/stopped", KillGrantor}, {"sidecar killed/stopped", KillSidecar},
	{"CPU/disk starved", StarveCPU}, {"clock stepped", ClockStep}, {"membership/rolling", Rolling},
}

// segmentLength is how much of a run one strip of the picture shows: a
// long run is wrapped into strips, one under the other, so that a term of
// a second or two stays wide enough to see.
func segmentLength(d time.Duration) time.Duration {
	if d <= 2*time.Minute {
		return max(d, time.Second)
	}
	return 2 * time.Minute
}

// drawTimeline writes the picture of a run to path (PNG).
func drawTimeline(path string, cfg Config, h *History, gs []*Grant, vs []Violation) error {
	names := cfg.allNames()
	for _, g := range gs {
		if !slices.Contains(names, g.Name) {
			names = append(names, g.Name)
		}
	}
	slices.Sort(names)
	row := map[string]float64{}
	var ticks []string
	ticks = append(ticks, "client faults")
	for i := len(names) - 1; i >= 0; i-- {
		row[names[i]] = float64(len(ticks))
		ticks = append(ticks, names[i])
	}
	top := float64(len(ticks)) - 0.5
	sec := func(at int64) float64 { return time.Duration(at - h.Start).Seconds() }
	text := draw.TextStyle{Color: color.White, Font: font.From(plot.DefaultFont, vg.Points(7)), Handler: plot.DefaultTextHandler,
		XAlign: draw.XCenter, YAlign: draw.YCenter}

	bands, bars, marks, bad := rects{text: text}, rects{text: text}, rects{text: text}, rects{text: text}
	seen := map[color.Color]bool{}
	for _, f := range h.Faults {
		if f.Skipped != "" {
			continue
		}
		end := f.End
		if end < f.Start {
			end = h.End // not undone before the run ended
		}
		if clusterFault(f) {
			bands.items = append(bands.items, rect{x0: sec(f.Start), x1: sec(end), y0: -0.5, y1: top, fill: faultColor(f.Kind)})
			seen[faultColor(f.Kind)] = true
		} else {
			marks.items = append(marks.items, rect{x0: sec(f.Start), x1: sec(max(end, f.Start+int64(100*time.Millisecond))), y0: -0.3, y1: 0.3,
				fill: map[bool]color.Color{true: color.NRGBA{0, 0, 0, 255}, false: color.NRGBA{90, 90, 90, 180}}[f.Kind == KillClient]})
		}
	}
	for _, g := range gs {
		if g.End <= g.Start {
			continue
		}
		y := row[g.Name]
		bars.items = append(bars.items, rect{x0: sec(g.Start), x1: sec(g.End), y0: y - 0.35, y1: y + 0.35,
			fill: tokenColors[g.Token%uint64(len(tokenColors))], label: strconv.FormatUint(g.Token, 10)})
	}
	for _, v := range vs {
		y0, y1 := -0.5, top
		if y, ok := row[v.Name]; ok {
			y0, y1 = y-0.45, y+0.45
		}
		x0, x1 := sec(v.At), sec(v.At)
		if v.A != nil && v.B != nil {
			x0, x1 = sec(max(v.A.Start, v.B.Start)), sec(min(v.A.End, v.B.End))
		}
		bad.items = append(bad.items, rect{x0: x0, x1: max(x1, x0+0.05), y0: y0, y1: y1, fill: violationColor})
	}

	seg := segmentLength(time.Duration(h.End - h.Start)).Seconds()
	strips := max(1, int(math.Ceil(sec(h.End)/seg)))
	var plots [][]*plot.Plot
	for k := range strips {
		p := plot.New()
		if k == 0 {
			p.Title.Text = fmt.Sprintf("leaseside chaos: seed %d, %d grantors, %d sidecar hosts, %v: %d grants, %d faults, %d violations",
				cfg.Seed, cfg.Grantors, cfg.Sidecars, cfg.Duration, len(gs), len(h.Faults), len(vs))
			p.Legend.Top = true
			p.Legend.TextStyle.Font.Size = vg.Points(8)
			p.Legend.ThumbnailWidth = vg.Points(10)
			for _, fg := range faultGroups {
				if seen[faultColor(fg.kind)] {
					p.Legend.Add(fg.label, swatch{faultColor(fg.kind)})
				}
			}
			if len(vs) > 0 {
				p.Legend.Add("violation", swatch{violationColor})
			}
		}
		if k == strips-1 {
			p.X.Label.Text = "seconds since the clients started"
		}
		p.NominalY(ticks...)
		p.Add(bars, bands, marks, bad)
		p.X.Min, p.X.Max = float64(k)*seg, float64(k+1)*seg
		p.Y.Min, p.Y.Max = -0.5, top
		if k == 0 {
			p.Y.Max = top + 1.4 // room for the legend above the rows
		}
		plots = append(plots, []*plot.Plot{p})
	}
	width := vg.Length(1600) * vg.Inch / 96
	stripHeight := vg.Length(60+70*len(ticks)) * vg.Inch / 96
	img := vgimg.New(width, stripHeight*vg.Length(strips)+vg.Length(60)*vg.Inch/96)
	dc := draw.New(img)
	canvases := plot.Align(plots, draw.Tiles{Rows: strips, Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4)}, dc)
	for k := range plots {
		plots[k][0].Draw(canvases[k][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
