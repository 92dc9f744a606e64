package grantor

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// logRecorder is a slog.Handler that keeps every record's message and
// attributes as one line, so tests can wait for a log line.
type logRecorder struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{}
}

func newLogRecorder() *logRecorder { return &logRecorder{changed: make(chan struct{})} }

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.Key + "=" + a.Value.String())
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, b.String())
	close(r.changed)
	r.changed = make(chan struct{})
	return nil
}

// wait waits for a line containing every one of parts.
func (r *logRecorder) wait(t *testing.T, parts ...string) {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		r.mu.Lock()
		ch := r.changed
		for _, l := range r.lines {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(l, p)
			}
			if all {
				r.mu.Unlock()
				return
			}
		}
		r.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("no log line with %q", parts)
		}
	}
}

// metricValue returns the value of the metric name with the given label
// pairs (a histogram gives its sample count), and whether it was found.
func metricValue(t *testing.T, g prometheus.Gatherer, name string, labels ...string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func TestNodeMetrics(t *testing.T) {
	clock := clockwatch.NewFake(clockwatch.Instant(time.Hour))
	rec := newLogRecorder()
	cfg := fastConfig(t, t.TempDir())
	cfg.Clock = clock
	cfg.Logger = slog.New(rec)
	cfg.Watch.Kernel = func() (clockwatch.KernelClockState, error) { return clockwatch.KernelClockState{Synced: false}, nil }
	events := newEventLog()
	n := start(t, cfg, true, func(n *Node) { n.lessor.hook = events.add })
	c := n.client
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(n.Collector())
	if _, err := reg.Gather(); err != nil { // the pedantic registry checks descriptions against metrics
		t.Fatalf("gather: %v", err)
	}

	const ttl = 2 * time.Second
	a := mustAcquire(t, c, &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: "s1", Seq: 1}, Lease: "a", TtlNs: int64(ttl)})
	b := mustAcquire(t, c, &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: "s1", Seq: 2}, Lease: "b", TtlNs: int64(ttl)})
	if r := mustAcquire(t, c, acqReq("s2", 1, "a")); r.Granted {
		t.Fatal(r)
	}
	if _, err := c.Acquire(tctx(t), &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: "s2", Seq: 2}, Lease: "zz", TtlNs: 1}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("acquire with a 1ns term: %v", err)
	}
	if r, err := c.Release(tctx(t), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: "s1", Seq: 3}, Lease: "b", Owner: "", Token: b.Token}); err != nil || !r.Released {
		t.Fatalf("release: %v %v", r, err)
	}
	ka, err := c.KeepAlive(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := ka.Send(&grantorpb.KeepAliveRequest{Session: "s1", Leases: []*grantorpb.LeaseRef{{Lease: "a", Token: a.Token}, {Lease: "b", Token: b.Token}}}); err != nil {
		t.Fatal(err)
	}
	if r, err := ka.Recv(); err != nil || len(r.Renewed) != 1 || len(r.Lost) != 1 {
		t.Fatalf("keepalive: %v %v", r, err)
	}
	ka.CloseSend()

	// A waiter, then a's expiry: revoked, and the waiter gets it.
	ctx, cancel := context.WithCancel(tctx(t))
	defer cancel()
	m := events.mark()
	waited := make(chan *grantorpb.AcquireResponse, 1)
	go func() {
		r, _ := c.Acquire(ctx, &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: "s3", Seq: 1}, Lease: "a", TtlNs: int64(time.Minute), WaitNs: int64(time.Hour)})
		waited <- r
	}()
	events.wait(t, m, "waiter queued", func(e testEvent) bool { return e.what == "queued" })
	if v, _ := metricValue(t, reg, "leaseside_grantor_waiters"); v != 1 {
		t.Errorf("waiters = %v, want 1", v)
	}
	// Three timers wait on the fake clock: the expiry loop's, the
	// waiter's and the clock watcher's, which the jump below makes late.
	if err := clock.WaitTimers(tctx(t), 3); err != nil {
		t.Fatal(err)
	}
	// The renewal moved a's expiry to tG + d(1+rho) + eps from the clock
	// at renewal, which has not moved.
	m = events.mark()
	advanceTo(t, n.lessor, clock, events, cfg.Timing.GrantorExpiry(clock.Now(), ttl))
	if r := <-waited; r == nil || !r.Granted {
		t.Fatalf("waiter: %v", r)
	}
	// The waiter is answered when the entry applies, the revoke counted
	// after the entry's proposer hears of it.
	events.wait(t, m, "the expiry counted", func(e testEvent) bool { return e.what == "counted expiry" })
	// The fake clock's jump is a stall to the clock watcher; the fake
	// kernel is unsynchronised.
	rec.wait(t, "grantor: clock event", "kind=pause")
	rec.wait(t, "grantor: clock event", "kind=unsynced")

	for _, tt := range []struct {
		name    string
		labels  []string
		want    float64
		atLeast bool
	}{
		{name: "leaseside_grantor_acquires_total", labels: []string{"result", "granted"}, want: 3},
		{name: "leaseside_grantor_acquires_total", labels: []string{"result", "not_granted"}, want: 1},
		{name: "leaseside_grantor_acquires_total", labels: []string{"result", "error"}, want: 1},
		{name: "leaseside_grantor_releases_total", labels: []string{"result", "released"}, want: 1},
		{name: "leaseside_grantor_revokes_total", want: 1},
		{name: "leaseside_grantor_keepalive_batches_total", want: 1},
		{name: "leaseside_grantor_leases_renewed_total", want: 1},
		{name: "leaseside_grantor_renewals_lost_total", want: 1},
		{name: "leaseside_grantor_verify_rounds_total", labels: []string{"result", "ok"}, want: 1},
		{name: "leaseside_grantor_leases", want: 1},
		{name: "leaseside_grantor_waiters", want: 0},
		{name: "leaseside_grantor_is_leader", want: 1},
		{name: "leaseside_grantor_in_office", want: 1},
		{name: "leaseside_grantor_last_token", want: 3},
		{name: "leaseside_grantor_raft_servers", labels: []string{"suffrage", "voter"}, want: 1},
		{name: "leaseside_grantor_raft_last_index", want: 7, atLeast: true},
		{name: "leaseside_grantor_raft_commit_index", want: 7, atLeast: true},
		{name: "leaseside_grantor_raft_applied_index", want: 7, atLeast: true},
		{name: "leaseside_grantor_raft_term", want: 1, atLeast: true},
		{name: "leaseside_grantor_clock_events_total", labels: []string{"kind", "unsynced"}, want: 1},
		{name: "leaseside_grantor_clock_events_total", labels: []string{"kind", "pause"}, want: 1, atLeast: true},
		{name: "leaseside_grantor_clock_pauses_total", want: 1, atLeast: true},
		{name: "leaseside_grantor_clock_wakeup_lateness_seconds", want: 1, atLeast: true},
		{name: "leaseside_grantor_clock_kernel_synced", want: 0},
		{name: "leaseside_grantor_became_leader_total", want: 1},
		// Entries proposed: the registration, 3 grants, the release, the
		// revoke (the barrier is no apply); one verify round.
		{name: "leaseside_grantor_raft_apply_seconds", want: 6, atLeast: true},
		{name: "leaseside_grantor_verify_round_seconds", want: 1},
	} {
		v, ok := metricValue(t, reg, tt.name, tt.labels...)
		if !ok || v != tt.want && !(tt.atLeast && v > tt.want) {
			t.Errorf("%s%v = %v (found %v), want %v (at least: %v)", tt.name, tt.labels, v, ok, tt.want, tt.atLeast)
		}
	}
}
