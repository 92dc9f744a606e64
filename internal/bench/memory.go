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

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// memory reads the leader's memory, acquires Leases leases (with
// LeaseTTL) over MemSessions sessions, reads it again, and reports the
// difference per lease. Before each reading it waits (up to Settle) for
// the leader to finish a garbage collection, so that what is counted is
// live memory, not garbage. After the reading every session renews all its
// leases in one keepalive, which must renew each: the leases counted were
// live. Then it releases them all.
func (b *bencher) memory(ctx context.Context) (*Result, error) {
	n, sessions := b.cfg.Leases, b.cfg.MemSessions
	before, err := b.readMem(ctx, "before")
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	hs, err := b.setup(ctx, "mem", sessions, n, func(i, j int) string {
		return fmt.Sprintf("bench/%s/mem/%d/%d", b.run, i, j)
	})
	if err != nil {
		return nil, err
	}
	setupRate := float64(n) / time.Since(t0).Seconds()
	after, err := b.readMem(ctx, "after")
	if err != nil {
		return nil, err
	}
	if err := b.verifyLive(ctx, hs); err != nil {
		return nil, err
	}
	res := &Result{Setup: fmt.Sprintf("%d leases (ttl %v) over %d sessions, %d sessions acquiring at a time; leader pid %d, metrics %q",
		n, b.cfg.LeaseTTL, sessions, b.cfg.Concurrency, b.cfg.LeaderPID, b.cfg.LeaderMetrics)}
	const mib = 1 << 20
	if b.cfg.LeaderPID != 0 {
		res.addTarget("leader RSS per live lease", float64(after.rss-before.rss)/float64(n), "B/lease", "<=", 1024)
		res.add("leader RSS before", float64(before.rss)/mib, "MiB")
		res.add("leader RSS after", float64(after.rss)/mib, "MiB")
		res.add("leader peak RSS (VmHWM)", float64(after.hwm)/mib, "MiB")
	}
	if b.cfg.LeaderMetrics != "" {
		res.addTarget("leader Go heap in use per live lease", float64(after.heap-before.heap)/float64(n), "B/lease", "<=", 1024)
		res.add("leader heap in use before", float64(before.heap)/mib, "MiB")
		res.add("leader heap in use after", float64(after.heap)/mib, "MiB")
		for _, m := range []memReading{before, after} {
			switch {
			case b.cfg.Settle == 0:
				res.note(fmt.Sprintf("%s: read without waiting for a leader GC (settle 0); it may include garbage", m.when))
			case !m.settled:
				res.note(fmt.Sprintf("%s: no leader GC finished within %v; the reading may include garbage", m.when, b.cfg.Settle))
			}
		}
	}
	res.add("setup grants/s", setupRate, "/s")
	res.note(fmt.Sprintf("all %d leases granted with distinct tokens and renewed by one keepalive per session after the reading; all released afterwards", n))
	res.note("the leader's figures are its whole process's: with `leaseside dev` that includes an idle sidecar")
	if err := b.cleanup(ctx, "mem", hs); err != nil {
		return nil, err
	}
	return res, nil
}

// memReading is the leader's memory at one moment.
type memReading struct {
	when     string
	rss, hwm int64 // bytes, from /proc/PID/status; 0 without LeaderPID
	heap     int64 // go_memstats_heap_inuse_bytes; 0 without LeaderMetrics
	settled  bool  // a leader GC finished between the call and the reading
}

// readMem waits (up to Settle) for a leader GC to finish, then reads the
// leader's memory.
func (b *bencher) readMem(ctx context.Context, when string) (memReading, error) {
	m := memReading{when: when}
	if b.cfg.LeaderMetrics != "" {
		var err error
		if m.settled, err = b.settle(ctx, when); err != nil {
			return m, err
		}
		vals, err := scrape(ctx, b.cfg.LeaderMetrics, "go_memstats_heap_inuse_bytes")
		if err != nil {
			return m, err
		}
		m.heap = int64(vals[0])
	}
	if b.cfg.LeaderPID != 0 {
		var err error
		if m.rss, m.hwm, err = procMem(b.cfg.LeaderPID); err != nil {
			return m, err
		}
	}
	return m, nil
}

// settle waits, polling the leader's metrics, until its GC count grows or
// Settle runs out, and reports whether it grew. Polling is the only way to
// learn of a remote GC from its metrics.
func (b *bencher) settle(ctx context.Context, when string) (bool, error) {
	if b.cfg.Settle == 0 {
		return false, nil
	}
	b.progress("mem: %s: waiting up to %v for a leader GC", when, b.cfg.Settle)
	start, err := scrape(ctx, b.cfg.LeaderMetrics, "go_gc_duration_seconds_count")
	if err != nil {
		return false, err
	}
	deadline := time.Now().Add(b.cfg.Settle)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-tick.C:
		}
		now, err := scrape(ctx, b.cfg.LeaderMetrics, "go_gc_duration_seconds_count")
		if err != nil {
			return false, err
		}
		if now[0] > start[0] {
			return true, nil
		}
	}
	return false, nil
}

// verifyLive has every session renew all its leases in one keepalive and
// checks that each was renewed.
func (b *bencher) verifyLive(ctx context.Context, hs []holding) error {
	b.progress("mem: checking every lease is live")
	return forEach(ctx, len(hs), b.cfg.Concurrency, func(ctx context.Context, i int) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		api, _, err := b.c.client(i)
		if err != nil {
			return err
		}
		stream, err := api.KeepAlive(ctx)
		if err != nil {
			return err
		}
		refs := make([]*grantorpb.LeaseRef, len(hs[i].leases))
		for j, l := range hs[i].leases {
			refs[j] = &grantorpb.LeaseRef{Lease: l.lease, Token: l.token}
		}
		if err := stream.Send(&grantorpb.KeepAliveRequest{Session: hs[i].s.id, Batch: 1, Leases: refs}); err != nil {
			return b.streamErr(hs[i], stream, err)
		}
		resp, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("session %s: KeepAlive: %w", hs[i].s.id, err)
		}
		if err := renewedAll(refs, resp); err != nil {
			return fmt.Errorf("session %s: %w", hs[i].s.id, err)
		}
		return stream.CloseSend()
	})
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
