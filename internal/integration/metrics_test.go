package integration

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// servedMetricsAddr is the host:port a process started with
// --metrics-addr 127.0.0.1:0 serves its metrics on, from its log.
func servedMetricsAddr(t *testing.T, p *process) string {
	t.Helper()
	_, l := p.waitLine(t, 0, "serving metrics", "addr=http://")
	_, rest, _ := strings.Cut(l.v, "addr=http://")
	addr, _, _ := strings.Cut(rest, "/")
	return addr
}

// metric scrapes http://addr/metrics and returns the value of an
// unlabelled metric.
func metric(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no metric %s at %s", name, addr)
	return 0
}

// liveHeap estimates the heap that survived the last garbage collection
// of the process serving metrics at addr: its next heap goal over
// 1+GOGC/100, with the GOGC in force (a grantor tunes it after every
// collection, internal/gctune; the stacks and globals the runtime also
// counts make it an overestimate by GOGC/100 of theirs).
func liveHeap(t *testing.T, addr string) int64 {
	t.Helper()
	goal, gogc := metric(t, addr, "go_memstats_next_gc_bytes"), metric(t, addr, "go_gc_gogc_percent")
	return int64(goal / (1 + max(gogc, 0)/100))
}
