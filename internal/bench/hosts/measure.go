package hosts

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leaseside/leaseside/internal/bench"
	"github.com/leaseside/leaseside/ipc"
)

// measure runs the measured phases of one run and adds their figures.
type measure struct {
	cfg      Config
	obs      *observer
	hs       *handshakes
	hosts    []*host
	res      *bench.Result
	leader   int // index in cfg.Grantors
	progress func(string, ...any)
}

// steady measures the cluster serving every host: until the kill, or for
// Duration.
func (m *measure) steady(ctx context.Context) error {
	d := m.cfg.Duration
	if m.cfg.KillLeader > 0 {
		d = m.cfg.KillLeader
	}
	pid := m.cfg.GrantorPIDs[m.leader]
	m.progress("measuring for %v", d)
	l0, err := bench.CPUSeconds(pid)
	if err != nil {
		return fmt.Errorf("bench hosts: the leader's CPU: %w", err)
	}
	s0, _ := bench.CPUSeconds(0)
	t0 := time.Now()
	if !sleep(ctx, d) {
		return ctx.Err()
	}
	secs := time.Since(t0).Seconds()
	l1, err := bench.CPUSeconds(pid)
	if err != nil {
		return fmt.Errorf("bench hosts: the leader's CPU: %w", err)
	}
	s1, _ := bench.CPUSeconds(0)
	rss, hwm, err := bench.ProcMemory(pid)
	if err != nil {
		return err
	}
	m.obs.mu.Lock()
	lags := bench.Merge([]bench.Latencies{m.obs.steady})
	renewals := m.obs.renewals
	m.obs.mu.Unlock()
	const mib = 1 << 20
	r := m.res
	r.Add("leader CPU", (l1-l0)/secs, "cores")
	r.Add("leader RSS", float64(rss)/mib, "MiB")
	r.Add("leader peak RSS (VmHWM)", float64(hwm)/mib, "MiB")
	r.Add("bench process CPU (every sidecar)", (s1-s0)/secs, "cores")
	r.Add("lease renewals/s", float64(renewals)/secs, "/s")
	r.Add("keepalive messages/s at the leader (hosts / (d/3))", float64(m.cfg.Hosts)/(m.cfg.Term/3).Seconds(), "/s")
	r.Add("renewal lag p50", lags.MS(0.50), "ms")
	r.Add("renewal lag p99", lags.MS(0.99), "ms")
	r.Add("renewal lag max", lags.MS(1), "ms")
	r.SetTarget("renewal lag p99", "<", float64(m.cfg.Term/3)/float64(time.Millisecond))
	r.Add("renewals measured", float64(len(lags)), "")
	r.Note(fmt.Sprintf("renewal lag: how long after it came due (d/3 = %v after the send of the renewal before it) each renewal's event reached its program; the target is d/3", m.cfg.Term/3))
	return nil
}

// failover kills the leader and watches every host renew at the new one.
func (m *measure) failover(ctx context.Context) error {
	old := m.leader
	pid := m.cfg.GrantorPIDs[old]
	killWall := time.Now()
	least := m.obs.kill(m.hosts, boottime())
	killAt := m.obs.killAt.Load()
	if err := kill(pid); err != nil {
		return fmt.Errorf("bench hosts: killing the leader (pid %d): %w", pid, err)
	}
	m.progress("killed the leader %s (pid %d); watching the hosts renew at the new one", m.cfg.Grantors[old], pid)
	cpu := newCPUSampler(m.cfg.GrantorPIDs, old)
	tick := time.NewTicker(cpuSample) // a measurement's sampling, not a wait
	defer tick.Stop()
	giveUp := time.NewTimer(m.cfg.Recovery)
	defer giveUp.Stop()
	for m.obs.recoveredCount()+m.hostsAllLost() < m.cfg.Hosts {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-giveUp.C:
			m.res.Note(fmt.Sprintf("only %d of %d hosts renewed at the new leader within %v", m.obs.recoveredCount(), m.cfg.Hosts, m.cfg.Recovery))
			goto done
		case <-tick.C:
			cpu.sample()
		}
	}
done:
	cpu.sample()
	newLeader := -1
	for _, h := range m.hosts {
		if i, err := leaderOf(ctx, m.cfg, h); err == nil && i != old {
			newLeader = i
			break
		}
	}
	if newLeader < 0 {
		return fmt.Errorf("bench hosts: no host names a new leader after the kill")
	}
	m.leader = newLeader
	m.obs.mu.Lock()
	recovered := slices.Clone(m.obs.recovered)
	failing := bench.Merge([]bench.Latencies{m.obs.failing})
	m.obs.mu.Unlock()
	slices.Sort(recovered)
	r := m.res
	r.Add("shortest validity left at the kill", least.Seconds(), "s")
	if len(recovered) > 0 {
		r.Add("first host renewed at the new leader", time.Duration(recovered[0]-killAt).Seconds(), "s")
		all := time.Duration(recovered[len(recovered)-1] - killAt)
		r.Add("every host renewed at the new leader", all.Seconds(), "s")
		r.SetTarget("every host renewed at the new leader", "<", least.Seconds())
	}
	r.Add("hosts renewed at the new leader", float64(len(recovered)), "")
	r.Add("renewal lag after the kill p99", failing.MS(0.99), "ms")
	r.Add("renewal lag after the kill max", failing.MS(1), "ms")

	addr := m.cfg.Grantors[newLeader]
	var at []time.Duration
	var took bench.Latencies
	for _, x := range m.hs.since(killWall) {
		if x.addr == addr {
			at = append(at, x.start.Sub(killWall))
			took = append(took, x.took)
		}
	}
	slices.Sort(took)
	r.Add("new leader: connections opened to it after the kill", float64(len(at)), "")
	r.Add("new leader: connections a second, peak", float64(peakPerSecond(at)), "/s")
	r.Add("new leader: handshake time p50", took.MS(0.50), "ms")
	r.Add("new leader: handshake time p99", took.MS(0.99), "ms")
	peak, mean := cpu.of(newLeader)
	r.Add("new leader: CPU, peak second", peak, "cores")
	r.Add("new leader: CPU, mean until every host renewed", mean, "cores")
	r.Note("connections opened to the new leader after the kill, per 250 ms: " + histogram(at, 250*time.Millisecond))
	var renewedAt []time.Duration
	for _, t := range recovered {
		renewedAt = append(renewedAt, time.Duration(t-killAt))
	}
	r.Note("hosts whose every lease was renewed at the new leader, per 250 ms after the kill: " + histogram(renewedAt, 250*time.Millisecond))
	return nil
}

// hostsAllLost is the number of hosts that lost every lease.
func (m *measure) hostsAllLost() int {
	m.obs.mu.Lock()
	defer m.obs.mu.Unlock()
	n := 0
	for _, h := range m.hosts {
		if len(h.leases) == 0 {
			n++
		}
	}
	return n
}

// final checks with every sidecar that it still holds every lease its
// program acquired, with the token it was granted.
func (m *measure) final(ctx context.Context) error {
	m.progress("checking every host's leases")
	type want struct{ name, token string }
	acquired := make([][]want, len(m.hosts))
	m.obs.mu.Lock()
	lostEvents := 0
	for _, v := range m.obs.lost {
		lostEvents += v
	}
	lostBy := fmt.Sprint(m.obs.lost)
	m.obs.mu.Unlock()
	for i, h := range m.hosts {
		for j := range m.cfg.LeasesPerHost {
			acquired[i] = append(acquired[i], want{h.names[j], h.tokens[j]})
		}
	}
	held := make([]int, len(m.hosts))
	err := bench.ForEach(ctx, len(m.hosts), 32, func(ctx context.Context, i int) error {
		st, err := m.hosts[i].c.StatusAll(ctx)
		if err != nil {
			return fmt.Errorf("bench hosts: status of host %d: %w", i, err)
		}
		for _, w := range acquired[i] {
			if slices.ContainsFunc(st.Leases, func(g ipc.Grant) bool { return g.Lease == w.name && g.Token == w.token }) {
				held[i]++
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	total, have := m.cfg.Hosts*m.cfg.LeasesPerHost, 0
	for _, n := range held {
		have += n
	}
	m.res.Add("leases lost", float64(total-have), "")
	m.res.SetTarget("leases lost", "<=", 0)
	m.res.Note(fmt.Sprintf("at the end %d of %d leases were held by their sidecars with the token first granted; lost events by reason: %s (%d)", have, total, lostBy, lostEvents))
	return nil
}

// peakPerSecond is the most of at (offsets) in any one-second window
// starting at one of them.
func peakPerSecond(at []time.Duration) int {
	s := slices.Clone(at)
	slices.Sort(s)
	best, j := 0, 0
	for i := range s {
		for s[i]-s[j] >= time.Second {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

// histogram prints the counts of at (offsets) per bucket, from the first
// bucket to the last that holds any: "0-0.25s 12, 0.25-0.5s 0, ...".
func histogram(at []time.Duration, bucket time.Duration) string {
	if len(at) == 0 {
		return "none"
	}
	last := slices.Max(at)
	counts := make([]int, int(last/bucket)+1)
	for _, t := range at {
		counts[int(max(t, 0)/bucket)]++
	}
	parts := make([]string, len(counts))
	for i, n := range counts {
		parts[i] = fmt.Sprintf("%.2fs:%d", (time.Duration(i) * bucket).Seconds(), n)
	}
	return strings.Join(parts, " ")
}
