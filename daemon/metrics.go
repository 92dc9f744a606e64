package daemon

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaseside/leaseside/ipc"
)

// counters are the daemon's event counts, kept as atomics on the hot
// paths and read by the collector at scrape time.
type counters struct {
	keepalivesOK     atomic.Uint64
	keepalivesFailed atomic.Uint64
	acquireRPCs      atomic.Uint64 // acquire attempts sent to the grantor, retries included
	grants           atomic.Uint64
	refusals         atomic.Uint64
	givenBack        atomic.Uint64 // grants nobody was told of, ended at the grantor (ends.go)
	jeopardies       atomic.Uint64 // leases put in jeopardy (jeopardy.go)
	stateErrors      atomic.Uint64 // transitions not in the lease state table (leasestate.go)

	mu   sync.Mutex
	lost map[string]uint64 // by reason

	marginOnce sync.Once
	margin     prometheus.Histogram // made on first use: counters works as its zero value
}

// renewMarginOpts describe leaseside_sidecar_renewal_margin_ratio: how much
// of its term a lease had left when a renewal came back. A holder renews
// every third of the term, so about two thirds when renewals keep up; a
// share near 0 is a renewal that nearly came too late.
var renewMarginOpts = prometheus.HistogramOpts{
	Name: "leaseside_sidecar_renewal_margin_ratio",
	Help: "Share of its term a lease had left before its holder's deadline when a renewal of it came back " +
		"(about 2/3 when renewals keep up; near 0: the renewal nearly came too late).",
	Buckets: []float64{0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1},
}

// descMargin is the histogram's Desc, for Describe.
var descMargin = prometheus.NewHistogram(renewMarginOpts).Desc()

// renewMargin is the renewal margin histogram.
func (c *counters) renewMargin() prometheus.Histogram {
	c.marginOnce.Do(func() { c.margin = prometheus.NewHistogram(renewMarginOpts) })
	return c.margin
}

// renewed records the renewal of a lease that had left before its
// deadline of its term ttl.
func (c *counters) renewed(left, ttl time.Duration) {
	if ttl > 0 {
		c.renewMargin().Observe(max(float64(left), 0) / float64(ttl))
	}
}

func (c *counters) lostOne(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lost == nil {
		c.lost = map[string]uint64{}
	}
	c.lost[reason]++
}

var (
	descLeases      = prometheus.NewDesc("leaseside_sidecar_leases", "Leases this host holds.", nil, nil)
	descKeepalives  = prometheus.NewDesc("leaseside_sidecar_keepalives_total", "Keepalive batches sent to the grantor, by result (ok, failed).", []string{"result"}, nil)
	descAcquireRPC  = prometheus.NewDesc("leaseside_sidecar_grantor_acquire_requests_total", "Acquire requests sent to the grantor, retries included.", nil, nil)
	descAcquires    = prometheus.NewDesc("leaseside_sidecar_acquires_total", "Acquires answered by the grantor, by result (granted; held: by another owner when the wait ran out; given_back: granted when nobody could be told of it (the owner or requester was gone, it was not confirmed in time, or the call had given up), and ended at once).", []string{"result"}, nil)
	descLost        = prometheus.NewDesc("leaseside_sidecar_leases_lost_total", "Leases whose holders were told they lost them, by reason (renew_failed, deadline_passed, revoked, released_by_admin, suspended; expired: a no_renew lease that lapsed, as asked).", []string{"reason"}, nil)
	descPause       = prometheus.NewDesc("leaseside_clock_wakeup_lateness_seconds", "Lateness of the clock watcher's wake-ups: stalls of the daemon.", nil, nil)
	descPauses      = prometheus.NewDesc("leaseside_clock_pauses_total", "Stalls of the daemon past the pause threshold.", nil, nil)
	descLongest     = prometheus.NewDesc("leaseside_clock_longest_recent_pause_seconds", "Longest stall within the recent window.", nil, nil)
	descSuspends    = prometheus.NewDesc("leaseside_clock_suspends_total", "Host suspends noticed.", nil, nil)
	descSuspended   = prometheus.NewDesc("leaseside_clock_suspended_seconds_total", "Total length of the host suspends noticed.", nil, nil)
	descDrift       = prometheus.NewDesc("leaseside_clock_drift_ppm", "Rate of this host's clock against the grantor leader's (positive: fast), once known.", nil, nil)
	descRho         = prometheus.NewDesc("leaseside_clock_effective_rho_ppm", "Drift bound deadlines are computed with.", nil, nil)
	descSynced      = prometheus.NewDesc("leaseside_clock_kernel_synced", "1 when the kernel says its clock is synchronised.", nil, nil)
	descMismatch    = prometheus.NewDesc("leaseside_sidecar_grantor_timing_mismatch", "1 when the grantor's last reply stated a rho or epsilon other than this sidecar's (deadlines then use the larger of each).", nil, nil)
	descStateErrors = prometheus.NewDesc("leaseside_sidecar_lease_state_errors_total", "Events a lease's state had no transition for in the state table (a bug: each is logged); the lease stayed where it was.", nil, nil)
	descJeopardy    = prometheus.NewDesc("leaseside_sidecar_jeopardies_total", "Leases whose renewals failed for a third of their term, so that their holders were told jeopardy.", nil, nil)
)

// lostReasons are the reasons leases_lost_total is exported for from the
// start, at 0: Prometheus's increase() and rate() see a loss only on a
// series that existed before it, so an alert on the first loss of a
// kind needs the series there. A reason not listed is exported once it
// happens.
var lostReasons = []string{ipc.ReasonRenewFailed, ipc.ReasonDeadlinePassed, ipc.ReasonRevoked,
	ipc.ReasonReleasedByAdmin, ipc.ReasonSuspended}

// Collector returns a prometheus.Collector for the daemon's metrics.
// Everything is read when scraped: nothing is computed on the renew loop
// or the socket for it.
func (d *Daemon) Collector() prometheus.Collector { return collector{d} }

type collector struct{ d *Daemon }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeases, descKeepalives, descAcquireRPC, descAcquires, descLost, descMargin, descPause,
		descPauses, descLongest, descSuspends, descSuspended, descDrift, descRho, descSynced, descMismatch, descJeopardy, descStateErrors} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	d, m := c.d, &c.d.metrics
	d.mu.Lock()
	n := len(d.leases)
	d.mu.Unlock()
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(descLeases, float64(n))
	counter(descKeepalives, m.keepalivesOK.Load(), "ok")
	counter(descKeepalives, m.keepalivesFailed.Load(), "failed")
	counter(descAcquireRPC, m.acquireRPCs.Load())
	counter(descAcquires, m.grants.Load(), "granted")
	counter(descAcquires, m.refusals.Load(), "held")
	counter(descAcquires, m.givenBack.Load(), "given_back")
	counter(descJeopardy, m.jeopardies.Load())
	counter(descStateErrors, m.stateErrors.Load())
	m.mu.Lock()
	for _, reason := range lostReasons {
		if _, seen := m.lost[reason]; !seen {
			counter(descLost, 0, reason)
		}
	}
	for reason, v := range m.lost {
		counter(descLost, v, reason)
	}
	m.mu.Unlock()
	m.renewMargin().Collect(ch)

	v := d.watcher.View()
	h := v.PauseHistogram
	ch <- prometheus.MustNewConstHistogram(descPause, h.Count, h.Sum.Seconds(), h.Cumulative())
	counter(descPauses, v.Pauses)
	gauge(descLongest, v.LongestRecentPause.Seconds())
	counter(descSuspends, v.Suspend.Count)
	ch <- prometheus.MustNewConstMetric(descSuspended, prometheus.CounterValue, v.Suspend.Total.Seconds())
	if v.DriftKnown {
		gauge(descDrift, v.Drift.PPM)
	}
	gauge(descRho, d.timing().Rho*1e6)
	mismatch := 0.0
	if d.timingMismatch() {
		mismatch = 1
	}
	gauge(descMismatch, mismatch)
	synced := 0.0
	if v.Kernel.Synced {
		synced = 1
	}
	gauge(descSynced, synced)
}
