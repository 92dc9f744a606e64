package daemon

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Every known loss reason is exported at 0 before any loss, so that
// Prometheus's increase() sees the first loss of each kind (it sees none
// on a series that appears with its first increment); a reason seen is
// counted once, not twice.
func TestLostReasonsExportedFromTheStart(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Grantors = []string{"127.0.0.1:1"} // never dialled: nothing runs
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.g.close)
	d.metrics.lostOne(lostReasons[0])
	d.metrics.lostOne("some_new_reason")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(d.Collector())
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "leaseside_sidecar_leases_lost_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	for _, r := range append(slices.Clone(lostReasons), "some_new_reason") {
		want := 0.0
		if r == lostReasons[0] || r == "some_new_reason" {
			want = 1
		}
		if v, ok := got[r]; !ok || v != want {
			t.Errorf("leases_lost_total{reason=%q} = %v (exported: %v), want %v", r, v, ok, want)
		}
	}
}

// A renewal's margin is recorded as the share of the term left.
func TestRenewalMarginRatio(t *testing.T) {
	var c counters
	c.renewed(4*time.Second, 6*time.Second)
	c.renewed(-time.Second, 6*time.Second) // came back after the deadline: 0
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c.renewMargin())
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	h := fams[0].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 2 || math.Abs(h.GetSampleSum()-4.0/6) > 1e-9 {
		t.Fatalf("margin histogram: count %d, sum %v; want 2, 0.667", h.GetSampleCount(), h.GetSampleSum())
	}
	if b := h.GetBucket()[0]; b.GetUpperBound() != 0.05 || b.GetCumulativeCount() != 1 {
		t.Errorf("first bucket %v, want the late renewal in it", b)
	}
}
