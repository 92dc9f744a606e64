package main

import (
	"context"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The chart of recorded lines is a PNG of the size asked, with a point
// drawn for the ratios.
func TestChartRecorded(t *testing.T) {
	out := filepath.Join(t.TempDir(), "c.png")
	if err := run(context.Background(), []string{"chart", "--out", out, filepath.Join("testdata", "lines.jsonl")}, io.Discard); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := readLines(filepath.Join("testdata", "lines.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	const dpi = 96
	wantW, wantH := 9*dpi, int((1.2+0.36*float64(len(groups(lines))))*dpi)
	if b := img.Bounds(); b.Dx() != wantW || abs(b.Dy()-wantH) > 1 {
		t.Errorf("chart is %dx%d, want %dx%d", b.Dx(), b.Dy(), wantW, wantH)
	}
	blue := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA); c.R < 40 && c.G < 40 && c.B > 150 {
				blue++
			}
		}
	}
	if blue < 100 {
		t.Errorf("%d blue pixels: the ratio points are not drawn", blue)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func TestGroups(t *testing.T) {
	lines, err := readLines(filepath.Join("testdata", "lines.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	gs := groups(lines)
	if len(gs) == 0 || gs[0].workload != lines[0].Workload || gs[0].metric != lines[0].Metric {
		t.Fatalf("groups %+v do not start with the first line's", gs)
	}
	n := 0
	for _, g := range gs {
		n += len(g.ratios)
		if strings.Contains(g.workload, "socket") && !strings.Contains(g.label(), "vs echo") {
			t.Errorf("socket label %q does not name the echo", g.label())
		}
	}
	if n != len(lines) {
		t.Errorf("%d ratios in groups, want one per line (%d)", n, len(lines))
	}
}

func TestReadLinesRefuses(t *testing.T) {
	for name, s := range map[string]string{
		"not json":      "ratio 2\n",
		"no ratio":      `{"workload":"a","metric":"b"}` + "\n",
		"unknown field": `{"workload":"a","metric":"b","ratio":2,"colour":"red"}` + "\n",
	} {
		p := filepath.Join(t.TempDir(), "l")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readLines(p); err == nil {
			t.Errorf("%s: read without error", name)
		}
	}
}

func TestRatioRange(t *testing.T) {
	for _, tc := range []struct {
		rs   []float64
		want string
	}{
		{rs: []float64{1.356}, want: "1.36x"},
		{rs: []float64{0.83, 0.39}, want: "0.39-0.83x"},
		{rs: []float64{39.2, 83.4}, want: "39-83x"},
		{rs: []float64{1.001, 1.002}, want: "1.00x"},
	} {
		if got := ratioRange(tc.rs); got != tc.want {
			t.Errorf("ratioRange(%v) = %q, want %q", tc.rs, got, tc.want)
		}
	}
}

func TestRatioTicks(t *testing.T) {
	var got []float64
	for _, tk := range (ratioTicks{}).Ticks(0.15, 60) {
		got = append(got, tk.Value)
	}
	want := []float64{0.2, 0.5, 1, 2, 5, 10, 20, 50}
	if !slices.EqualFunc(got, want, func(a, b float64) bool { return a/b > 0.999999 && a/b < 1.000001 }) {
		t.Errorf("ticks %v, want %v", got, want)
	}
}
