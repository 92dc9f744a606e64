package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// LeaderMemory reads the memory of a cluster's leader: its VmRSS and VmHWM
// from /proc when PID is not 0, and the Go heap in use from its Prometheus
// endpoint (go_memstats_heap_inuse_bytes) when Metrics is set. Before each
// reading it waits, up to Settle, for the leader to finish a garbage
// collection (seen in go_gc_duration_seconds_count), so that what is
// counted is live memory, not garbage. It works for any Go server with
// Prometheus' default collectors: leaseside's grantors and etcd.
type LeaderMemory struct {
	PID     int
	Metrics string // http://host:port/metrics
	Settle  time.Duration
	// Progress, if not nil, is told when a reading waits.
	Progress func(format string, args ...any)
}

// MemReading is the leader's memory at one moment.
type MemReading struct {
	when     string
	rss, hwm int64 // bytes, from /proc/PID/status; 0 without PID
	heap     int64 // go_memstats_heap_inuse_bytes; 0 without Metrics
	settled  bool  // a leader GC finished between the call and the reading
}

// Read waits (up to Settle) for a leader GC to finish, then reads the
// leader's memory; when names the reading in notes.
func (m LeaderMemory) Read(ctx context.Context, when string) (MemReading, error) {
	r := MemReading{when: when}
	if m.Metrics != "" {
		var err error
		if r.settled, err = m.settle(ctx, when); err != nil {
			return r, err
		}
		vals, err := scrape(ctx, m.Metrics, "go_memstats_heap_inuse_bytes")
		if err != nil {
			return r, err
		}
		r.heap = int64(vals[0])
	}
	if m.PID != 0 {
		var err error
		if r.rss, r.hwm, err = procMem(m.PID); err != nil {
			return r, err
		}
	}
	return r, nil
}

// Report adds to res the growth from before to after per one of n leases
// ("leader RSS per live lease", "leader Go heap in use per live lease",
// without targets), the readings, and notes on readings that may include
// garbage.
func (m LeaderMemory) Report(res *Result, before, after MemReading, n int) {
	const mib = 1 << 20
	if m.PID != 0 {
		res.Add("leader RSS per live lease", float64(after.rss-before.rss)/float64(n), "B/lease")
		res.Add("leader RSS before", float64(before.rss)/mib, "MiB")
		res.Add("leader RSS after", float64(after.rss)/mib, "MiB")
		res.Add("leader peak RSS (VmHWM)", float64(after.hwm)/mib, "MiB")
	}
	if m.Metrics == "" {
		return
	}
	res.Add("leader Go heap in use per live lease", float64(after.heap-before.heap)/float64(n), "B/lease")
	res.Add("leader heap in use before", float64(before.heap)/mib, "MiB")
	res.Add("leader heap in use after", float64(after.heap)/mib, "MiB")
	for _, r := range []MemReading{before, after} {
		switch {
		case m.Settle == 0:
			res.Note(fmt.Sprintf("%s: read without waiting for a leader GC (settle 0); it may include garbage", r.when))
		case !r.settled:
			res.Note(fmt.Sprintf("%s: no leader GC finished within %v; the reading may include garbage", r.when, m.Settle))
		}
	}
}

// settle waits, polling the leader's metrics, until its GC count grows or
// Settle runs out, and reports whether it grew. Polling is the only way to
// learn of a remote GC from its metrics.
func (m LeaderMemory) settle(ctx context.Context, when string) (bool, error) {
	if m.Settle == 0 {
		return false, nil
	}
	if m.Progress != nil {
		m.Progress("mem: %s: waiting up to %v for a leader GC", when, m.Settle)
	}
	start, err := scrape(ctx, m.Metrics, "go_gc_duration_seconds_count")
	if err != nil {
		return false, err
	}
	deadline := time.Now().Add(m.Settle)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-tick.C:
		}
		now, err := scrape(ctx, m.Metrics, "go_gc_duration_seconds_count")
		if err != nil {
			return false, err
		}
		if now[0] > start[0] {
			return true, nil
		}
	}
	return false, nil
}

// procMem reads VmRSS and VmHWM of pid, in bytes.
func procMem(pid int) (rss, hwm int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("leader memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) != 2 || fs[1] != "kB" {
			return 0, 0, fmt.Errorf("leader memory: unexpected %s line %q", k, sc.Text())
		}
		kb, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("leader memory: %s: %w", k, err)
		}
		if k == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("leader memory: %w", err)
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("leader memory: no VmRSS in /proc/%d/status (a kernel thread, or gone?)", pid)
	}
	return rss, hwm, nil
}

// metricsClient scrapes without keeping connections open between scrapes.
var metricsClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// scrape reads the values of the unlabelled metrics names from a
// Prometheus text endpoint, in the order asked.
func scrape(ctx context.Context, url string, names ...string) ([]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("leader metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("leader metrics: %s: %s", url, resp.Status)
	}
	found := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			found[f[0]] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("leader metrics: %w", err)
	}
	out := make([]float64, len(names))
	for i, n := range names {
		v, ok := found[n]
		if !ok {
			return nil, fmt.Errorf("leader metrics: %s has no %s", url, n)
		}
		out[i] = v
	}
	return out, nil
}
