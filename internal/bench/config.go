package bench

import (
	"fmt"
	"io"
	"net/url"
	"slices"
	"time"

	"google.golang.org/grpc/credentials"
)

// The workloads, in the order Run runs them.
const (
	// Grants: owners on distinct names, each acquiring and releasing its
	// name in a loop.
	Grants = "grants"
	// Handoffs: owners contending for one name, each waiting for it,
	// holding it and releasing it in a loop.
	Handoffs = "handoffs"
	// KeepAlives: sessions holding leases, each renewing all of them on
	// one KeepAlive stream as fast as replies come.
	KeepAlives = "keepalives"
	// Memory: the leader's memory before and after a great many live
	// leases.
	Memory = "memory"
	// GrantsGrowth: the grants workload with few and then with a great
	// many live leases held by other sessions.
	GrantsGrowth = "grants-growth"
	// KeepAlivesGrowth: the leader's CPU per keepalive message with few
	// and then with a great many leases a host.
	KeepAlivesGrowth = "keepalives-growth"
)

// Workloads lists every workload in the order Run runs them.
var Workloads = []string{Grants, Handoffs, KeepAlives, Memory, GrantsGrowth, KeepAlivesGrowth}

// Config says what to measure and how hard. Start from DefaultConfig.
type Config struct {
	// Grantors are the gRPC addresses of the cluster's grantors; the
	// bench finds the leader through their redirects.
	Grantors []string
	// Credentials are how the bench dials them: an operator's (or
	// sidecar's) certificate with the cluster's TLS; nil is plain text.
	Credentials credentials.TransportCredentials
	// Workloads to run, a subset of Workloads; Run keeps their order.
	Workloads []string
	// Conns is the number of gRPC connections per grantor.
	Conns int

	// Duration is how long each timed workload (grants, handoffs,
	// keepalives) is measured, after Warmup, which is not counted.
	Duration time.Duration
	Warmup   time.Duration

	// GrantOwners is the number of concurrent owners of the grants
	// workload, each on its own name and session.
	GrantOwners int
	// HandoffOwners is the number of owners contending for the one name
	// of the handoffs workload; Hold is how long each holds it.
	HandoffOwners int
	Hold          time.Duration
	// Sessions and SessionLeases size the keepalives workload: each
	// session holds SessionLeases leases and renews them all per message,
	// with KeepAliveInFlight messages in flight on its stream.
	Sessions          int
	SessionLeases     int
	KeepAliveInFlight int

	// Leases is the number of live leases of the memory workload, spread
	// over MemSessions sessions.
	Leases      int
	MemSessions int
	// LeaderPID, if not 0, is the leader's process id on this host: the
	// memory workload reads its VmRSS from /proc. LeaderMetrics, if set,
	// is the leader's Prometheus endpoint (http://host:port/metrics): the
	// memory workload reads go_memstats_heap_inuse_bytes. It needs one.
	LeaderPID     int
	LeaderMetrics string
	// Settle bounds the wait for one garbage collection of the leader
	// (seen through LeaderMetrics) before each memory reading, so that
	// garbage is not counted as leases; 0 reads at once.
	Settle time.Duration

	// LiveFew and LiveMany are the live leases the grants-growth workload
	// measures grants next to, held by LiveSessions sessions (and as many
	// again for the leases added to reach LiveMany).
	LiveFew      int
	LiveMany     int
	LiveSessions int
	// GrowthHosts sessions (hosts) hold HostLeasesFew and then
	// HostLeasesMany leases each in the keepalives-growth workload.
	GrowthHosts    int
	HostLeasesFew  int
	HostLeasesMany int

	// Concurrency is the number of sessions that set up (acquire) and
	// clean up (release) the leases of the keepalives, memory and
	// grants-growth workloads at once.
	Concurrency int
	// LeaseTTL is the term of leases that must outlive a workload.
	LeaseTTL time.Duration

	// Progress, if not nil, receives a line now and then during long
	// setups, for a human watching.
	Progress io.Writer
}

// DefaultConfig returns the sizes of the project's issue 3; only Grantors
// is left to set.
func DefaultConfig() Config {
	return Config{
		Workloads:         slices.Clone(Workloads),
		Conns:             8,
		Duration:          10 * time.Second,
		Warmup:            time.Second,
		GrantOwners:       64,
		HandoffOwners:     16,
		Sessions:          1000,
		SessionLeases:     100,
		KeepAliveInFlight: 1,
		Leases:            1_000_000,
		MemSessions:       1000,
		Settle:            150 * time.Second, // the Go runtime forces a GC every 2 minutes
		LiveFew:           1000,
		LiveMany:          1_000_000,
		LiveSessions:      1000,
		GrowthHosts:       10,
		HostLeasesFew:     10,
		HostLeasesMany:    10_000,
		Concurrency:       256,
		LeaseTTL:          time.Hour,
	}
}

// maxKeepAliveLeases is the grantor's limit on the leases of one keepalive.
const maxKeepAliveLeases = 65536

// Validate reports the first problem with c.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("bench: "+format, args...)
	}
	if len(c.Grantors) == 0 {
		return bad("no grantor address")
	}
	if len(c.Workloads) == 0 {
		return bad("no workload")
	}
	for _, w := range c.Workloads {
		if !slices.Contains(Workloads, w) {
			return bad("unknown workload %q (known: %v)", w, Workloads)
		}
	}
	memory := slices.Contains(c.Workloads, Memory)
	switch {
	case c.Conns < 1:
		return bad("Conns %d is below 1", c.Conns)
	case c.Duration <= 0:
		return bad("Duration %v is not positive", c.Duration)
	case c.Warmup < 0:
		return bad("Warmup %v is negative", c.Warmup)
	case c.GrantOwners < 1, c.HandoffOwners < 2:
		return bad("need at least 1 grant owner and 2 handoff owners, have %d and %d", c.GrantOwners, c.HandoffOwners)
	case c.Hold < 0:
		return bad("Hold %v is negative", c.Hold)
	case c.Sessions < 1, c.SessionLeases < 1, c.SessionLeases > maxKeepAliveLeases:
		return bad("keepalives need 1.. sessions of 1..%d leases, have %d of %d", maxKeepAliveLeases, c.Sessions, c.SessionLeases)
	case c.KeepAliveInFlight < 1:
		return bad("KeepAliveInFlight %d is below 1", c.KeepAliveInFlight)
	case c.Leases < 1, c.MemSessions < 1, c.MemSessions > c.Leases:
		return bad("memory needs 1.. leases over 1..leases sessions, have %d over %d", c.Leases, c.MemSessions)
	case (c.Leases+c.MemSessions-1)/c.MemSessions > maxKeepAliveLeases:
		return bad("%d leases over %d sessions is more than %d a session", c.Leases, c.MemSessions, maxKeepAliveLeases)
	case c.LiveFew < 0, c.LiveSessions < 1, c.LiveMany <= c.LiveFew:
		return bad("grants-growth needs 0 <= few < many live leases over 1.. sessions, have %d, %d over %d", c.LiveFew, c.LiveMany, c.LiveSessions)
	case c.GrowthHosts < 1, c.HostLeasesFew < 1, c.HostLeasesMany < c.HostLeasesFew, c.HostLeasesMany > maxKeepAliveLeases:
		return bad("keepalives-growth needs 1.. hosts of 1 <= few <= many <= %d leases, have %d of %d and %d", maxKeepAliveLeases, c.GrowthHosts, c.HostLeasesFew, c.HostLeasesMany)
	case slices.Contains(c.Workloads, KeepAlivesGrowth) && c.LeaderPID == 0:
		return bad("the keepalives-growth workload needs the leader's pid (its CPU is the figure)")
	case memory && c.LeaderPID == 0 && c.LeaderMetrics == "":
		return bad("the memory workload needs the leader's pid or metrics endpoint")
	case c.Settle < 0:
		return bad("Settle %v is negative", c.Settle)
	case c.Concurrency < 1:
		return bad("Concurrency %d is below 1", c.Concurrency)
	case c.LeaseTTL < time.Second || c.LeaseTTL > 24*time.Hour:
		return bad("LeaseTTL %v is outside [1s, 24h]", c.LeaseTTL)
	}
	if c.LeaderMetrics != "" {
		u, err := url.Parse(c.LeaderMetrics)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("LeaderMetrics %q is not an http(s) URL", c.LeaderMetrics)
		}
	}
	return nil
}
