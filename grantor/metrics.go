package grantor

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/gossip"
)

// counters are the grantor's event counts, atomics on the hot paths, read
// by the collector when scraped.
type counters struct {
	acquiresGranted    atomic.Uint64
	acquiresNotGranted atomic.Uint64
	acquiresFailed     atomic.Uint64
	releasesReleased   atomic.Uint64
	releasesNotHeld    atomic.Uint64
	releasesFailed     atomic.Uint64
	revokes            atomic.Uint64
	keepaliveBatches   atomic.Uint64
	leasesRenewed      atomic.Uint64
	leasesLost         atomic.Uint64
	verifyOK           atomic.Uint64
	verifyFailed       atomic.Uint64
	becameLeader       atomic.Uint64

	// applyTime and verifyTime are the latencies of the raft operations
	// the lessor waits on, in seconds, as this node sees them while it
	// leads (wall time: a measure, never a lease decision).
	applyTime    prometheus.Histogram
	verifyTime   prometheus.Histogram
	refusedCalls [RoleOperator + 1]atomic.Uint64  // by Role
	nameRefused  [AccessAcquire + 1]atomic.Uint64 // by NameAccess asked
	refusedRaft  atomic.Uint64

	// tls exports the certificates' expiry; nil without TLS.
	tls prometheus.Collector

	mu          sync.Mutex
	clockEvents map[clockwatch.EventKind]uint64
}

// raftLatencyBuckets span a loopback commit (well under 1ms) to a raft
// operation that waited out a timeout (seconds).
var raftLatencyBuckets = prometheus.ExponentialBuckets(0.0005, 2, 15) // 0.5ms .. 8.2s

func newCounters() *counters {
	return &counters{
		applyTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "leaseside_grantor_raft_apply_seconds",
			Help:    "Time from proposing a raft entry (grant, release, revoke, session) to its being committed by a quorum and applied, on the leader.",
			Buckets: raftLatencyBuckets,
		}),
		verifyTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "leaseside_grantor_verify_round_seconds",
			Help:    "Time of the VerifyLeader quorum rounds that confirm a keepalive batch before its renewals are acknowledged, on the leader (successful rounds).",
			Buckets: raftLatencyBuckets,
		}),
	}
}

// refusedCall counts a gRPC call refused to role.
func (c *counters) refusedCall(r Role) {
	if int(r) < len(c.refusedCalls) {
		c.refusedCalls[r].Add(1)
	}
}

func (c *counters) clockEvent(k clockwatch.EventKind) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clockEvents == nil {
		c.clockEvents = map[clockwatch.EventKind]uint64{}
	}
	c.clockEvents[k]++
}

var (
	descAcquires    = prometheus.NewDesc("leaseside_grantor_acquires_total", "Acquire requests answered, by result (granted, not_granted, error).", []string{"result"}, nil)
	descReleases    = prometheus.NewDesc("leaseside_grantor_releases_total", "Release requests answered, by result (released, not_held, error).", []string{"result"}, nil)
	descRevokes     = prometheus.NewDesc("leaseside_grantor_revokes_total", "Leases revoked by this node as leader because they expired.", nil, nil)
	descKABatches   = prometheus.NewDesc("leaseside_grantor_keepalive_batches_total", "Keepalive requests (one per session and batch) answered.", nil, nil)
	descRenewed     = prometheus.NewDesc("leaseside_grantor_leases_renewed_total", "Leases renewed by keepalives.", nil, nil)
	descRenewLost   = prometheus.NewDesc("leaseside_grantor_renewals_lost_total", "Leases in keepalives answered lost (not held with that token, or expired).", nil, nil)
	descVerify      = prometheus.NewDesc("leaseside_grantor_verify_rounds_total", "VerifyLeader quorum rounds run for keepalive batches, by result (ok, failed).", []string{"result"}, nil)
	descLeases      = prometheus.NewDesc("leaseside_grantor_leases", "Leases held, in this node's replica of the state.", nil, nil)
	descWaiters     = prometheus.NewDesc("leaseside_grantor_waiters", "Acquires queued for held leases (leader only).", nil, nil)
	descIsLeader    = prometheus.NewDesc("leaseside_grantor_is_leader", "1 when this node is the raft leader.", nil, nil)
	descInOffice    = prometheus.NewDesc("leaseside_grantor_in_office", "1 when this node leads and has taken office (it answers sidecars).", nil, nil)
	descLastIndex   = prometheus.NewDesc("leaseside_grantor_raft_last_index", "Index of the last raft log entry.", nil, nil)
	descCommitIndex = prometheus.NewDesc("leaseside_grantor_raft_commit_index", "Index of the last committed raft log entry.", nil, nil)
	descApplied     = prometheus.NewDesc("leaseside_grantor_raft_applied_index", "Index of the last raft log entry applied to the FSM.", nil, nil)
	descTerm        = prometheus.NewDesc("leaseside_grantor_raft_term", "Current raft term.", nil, nil)
	descBecame      = prometheus.NewDesc("leaseside_grantor_became_leader_total", "Times this node became raft leader; summed over the grantors, the cluster's leader changes.", nil, nil)
	descServers     = prometheus.NewDesc("leaseside_grantor_raft_servers", "Servers in the raft configuration, by suffrage.", []string{"suffrage"}, nil)
	descGossip      = prometheus.NewDesc("leaseside_grantor_gossip_members", "Gossip members this node knows, by role and state.", []string{"role", "state"}, nil)
	descLastToken   = prometheus.NewDesc("leaseside_grantor_last_token", "Highest fencing token granted.", nil, nil)
	descPause       = prometheus.NewDesc("leaseside_grantor_clock_wakeup_lateness_seconds", "Lateness of the clock watcher's wake-ups: stalls of the grantor.", nil, nil)
	descPauses      = prometheus.NewDesc("leaseside_grantor_clock_pauses_total", "Stalls of the grantor past the pause threshold.", nil, nil)
	descLongest     = prometheus.NewDesc("leaseside_grantor_clock_longest_recent_pause_seconds", "Longest stall of the grantor within the recent window.", nil, nil)
	descSuspends    = prometheus.NewDesc("leaseside_grantor_clock_suspends_total", "Host suspends noticed.", nil, nil)
	descSuspended   = prometheus.NewDesc("leaseside_grantor_clock_suspended_seconds_total", "Total length of the host suspends noticed.", nil, nil)
	descSynced      = prometheus.NewDesc("leaseside_grantor_clock_kernel_synced", "1 when the kernel says its clock is synchronised.", nil, nil)
	descRefused     = prometheus.NewDesc("leaseside_grantor_refused_total", "Calls, connections and packets refused: gRPC calls by the caller's role (link grpc), inbound raft connections and RPCs (link raft, role empty), gossip packets and streams discarded (link gossip, role empty: a wrong or missing key, another cluster, garbage).", []string{"link", "role"}, nil)
	descNonMember   = prometheus.NewDesc("leaseside_grantor_raft_refused_nonmember_total", "Inbound raft RPCs refused because their sender, authenticated by its grantor certificate, is not a server of this node's latest raft configuration nor one its join path names, by RPC (AppendEntries, RequestVote, RequestPreVote, InstallSnapshot, TimeoutNow). Also counted in leaseside_grantor_refused_total{link=\"raft\"}. Zero without TLS.", []string{"rpc"}, nil)
	descNameRefused = prometheus.NewDesc("leaseside_grantor_name_refused_total", "Calls and watched names refused because the grantors' name rules (--name-rules) do not give the caller's identity the name, by the access asked (acquire: Acquire, Proclaim; read: CheckToken, a name added to a Watch). Also counted in leaseside_grantor_refused_total{link=\"grpc\"}.", []string{"access"}, nil)
	descAcctRefused = prometheus.NewDesc("leaseside_grantor_account_refused_total", "Calls refused because they would take their identity's account past a limit (docs/limits.md), by limit (conns, calls, sessions, outcomes, leases, value_bytes, waiters, watch_streams, watch_names, queued_bytes, unchanged_calls_per_sec).", []string{"limit"}, nil)
	descAcctHighest = prometheus.NewDesc("leaseside_grantor_account_highest_use_ratio", "The largest share of a limit that one identity's account uses now (0 to 1), by limit: alert before a host is refused. Limits of 0 (none) are left out; sessions, outcomes and leases are the replicated state's, the others this node's (the leader's).", []string{"limit"}, nil)
	descClockEvents = prometheus.NewDesc("leaseside_grantor_clock_events_total", "Clock watcher events, by kind (pause, suspend, unsynced).", []string{"kind"}, nil)
)

// Collector returns a prometheus.Collector for the node's metrics. Every
// value is read when scraped; nothing is computed for it on the request
// paths but the counters.
func (n *Node) Collector() prometheus.Collector { return collector{n} }

type collector struct{ n *Node }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAcquires, descReleases, descRevokes, descKABatches, descRenewed,
		descRenewLost, descVerify, descLeases, descWaiters, descIsLeader, descInOffice, descLastIndex,
		descCommitIndex, descApplied, descTerm, descServers, descGossip, descLastToken, descPause, descPauses,
		descLongest, descSuspends, descSuspended, descSynced, descClockEvents, descBecame, descRefused, descNonMember, descNameRefused, descAcctRefused, descAcctHighest} {
		ch <- d
	}
	c.n.metrics.applyTime.Describe(ch)
	c.n.metrics.verifyTime.Describe(ch)
	if c.n.metrics.tls != nil {
		c.n.metrics.tls.Describe(ch)
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	n, m := c.n, c.n.metrics
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
	}
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	counter(descAcquires, m.acquiresGranted.Load(), "granted")
	counter(descAcquires, m.acquiresNotGranted.Load(), "not_granted")
	counter(descAcquires, m.acquiresFailed.Load(), "error")
	counter(descReleases, m.releasesReleased.Load(), "released")
	counter(descReleases, m.releasesNotHeld.Load(), "not_held")
	counter(descReleases, m.releasesFailed.Load(), "error")
	counter(descRevokes, m.revokes.Load())
	counter(descKABatches, m.keepaliveBatches.Load())
	counter(descRenewed, m.leasesRenewed.Load())
	counter(descRenewLost, m.leasesLost.Load())
	counter(descVerify, m.verifyOK.Load(), "ok")
	counter(descVerify, m.verifyFailed.Load(), "failed")
	counter(descBecame, m.becameLeader.Load())
	m.applyTime.Collect(ch)
	m.verifyTime.Collect(ch)
	for _, r := range []Role{RoleGrantor, RoleSidecar, RoleOperator} {
		counter(descRefused, m.refusedCalls[r].Load(), "grpc", r.String())
	}
	counter(descRefused, m.refusedRaft.Load(), "raft", "")
	for _, a := range []NameAccess{AccessRead, AccessAcquire} {
		counter(descNameRefused, m.nameRefused[a].Load(), a.String())
	}
	for k := range rpcKinds {
		counter(descNonMember, n.gate.refusedCount(k), k.String())
	}
	if n.gossip != nil {
		counter(descRefused, n.gossip.Refused(), "gossip", "")
	}
	if m.tls != nil {
		m.tls.Collect(ch)
	}
	highest := n.accounts.highest()
	for k := limitKind(0); k < numLimits; k++ {
		if k == limAuditLines {
			continue // lines held back are not refusals
		}
		counter(descAcctRefused, n.accounts.refused[k].Load(), k.String())
		if k != limUnchangedCalls { // a rate: no share of it is held
			gauge(descAcctHighest, highest[k], k.String())
		}
	}

	gauge(descLeases, float64(n.fsm.leaseCount()))
	waiters, inOffice := n.lessor.stats()
	gauge(descWaiters, float64(waiters))
	gauge(descInOffice, b2f(inOffice))
	gauge(descIsLeader, b2f(n.raft.State() == raft.Leader))
	gauge(descLastIndex, float64(n.raft.LastIndex()))
	gauge(descCommitIndex, float64(n.raft.CommitIndex()))
	gauge(descApplied, float64(n.raft.AppliedIndex()))
	gauge(descTerm, float64(n.raft.CurrentTerm()))
	var voters, nonvoters int
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				voters++
			} else {
				nonvoters++
			}
		}
	}
	gauge(descServers, float64(voters), "voter")
	gauge(descServers, float64(nonvoters), "nonvoter")
	if n.gossip != nil {
		type key struct{ role, state string }
		counts := map[key]int{}
		for _, in := range n.gossip.Members() {
			role := in.Meta.Role
			if in.MetaErr != nil {
				role = "unknown"
			}
			counts[key{role, in.State}]++
		}
		for k, v := range counts {
			gauge(descGossip, float64(v), k.role, k.state)
		}
	}
	gauge(descLastToken, float64(n.fsm.lastToken()))

	v := n.watcher.View()
	h := v.PauseHistogram
	ch <- prometheus.MustNewConstHistogram(descPause, h.Count, h.Sum.Seconds(), h.Cumulative())
	counter(descPauses, v.Pauses)
	gauge(descLongest, v.LongestRecentPause.Seconds())
	counter(descSuspends, v.Suspend.Count)
	ch <- prometheus.MustNewConstMetric(descSuspended, prometheus.CounterValue, v.Suspend.Total.Seconds())
	gauge(descSynced, b2f(v.Kernel.Synced))
	m.mu.Lock()
	for _, k := range []clockwatch.EventKind{clockwatch.EventPause, clockwatch.EventSuspend, clockwatch.EventUnsynced} {
		counter(descClockEvents, m.clockEvents[k], string(k))
	}
	m.mu.Unlock()
}

// gossipMembers is the member list, or nil without gossip.
func (n *Node) gossipMembers() []gossip.MemberInfo {
	if n.gossip == nil {
		return nil
	}
	return n.gossip.Members()
}
