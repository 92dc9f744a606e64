package hosts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leaseside/leaseside/internal/bench"
)

// measure runs the measured phases of one run and adds their figures.
type measure struct {
	cfg      Config
	shards   []*shardProc
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
	s0 := cpuOf(m.shards)
	t0 := time.Now()
	if !sleep(ctx, d) {
		return ctx.Err()
	}
	secs := time.Since(t0).Seconds()
	l1, err := bench.CPUSeconds(pid)
	if err != nil {
		return fmt.Errorf("bench hosts: the leader's CPU: %w", err)
	}
	s1 := cpuOf(m.shards)
	rss, hwm, err := bench.ProcMemory(pid)
	if err != nil {
		return err
	}
	rep, err := m.report()
	if err != nil {
		return err
	}
	lags := bench.Merge([]bench.Latencies{rep.Steady})
	renewals := rep.Renewals
	const mib = 1 << 20
	r := m.res
	r.Add("leader CPU", (l1-l0)/secs, "cores")
	r.Add("leader RSS", float64(rss)/mib, "MiB")
	r.Add("leader peak RSS (VmHWM)", float64(hwm)/mib, "MiB")
	r.Add("bench shard processes CPU (every sidecar)", (s1-s0)/secs, "cores")
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
	killAt := boottime()
	kr, err := all(m.shards, &command{Cmd: "kill", At: killAt})
	if err != nil {
		return err
	}
	least := time.Duration(1<<63 - 1)
	for _, r := range kr {
		least = min(least, r.Least)
	}
	if err := kill(pid); err != nil {
		return fmt.Errorf("bench hosts: killing the leader (pid %d): %w", pid, err)
	}
	m.progress("killed the leader %s (pid %d); watching the hosts renew at the new one", m.cfg.Grantors[old], pid)
	cpu := newCPUSampler(m.cfg.GrantorPIDs, old)
	tick := time.NewTicker(cpuSample) // a measurement's sampling, not a wait
	defer tick.Stop()
	giveUp := time.NewTimer(m.cfg.Recovery)
	defer giveUp.Stop()
	for {
		recovered, allLost, err := m.progressed()
		if err != nil {
			return err
		}
		if recovered+allLost >= m.cfg.Hosts {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-giveUp.C:
			m.res.Note(fmt.Sprintf("only %d of %d hosts renewed at the new leader within %v", recovered, m.cfg.Hosts, m.cfg.Recovery))
		case <-tick.C:
			cpu.sample()
			continue
		}
		break
	}
	cpu.sample()
	newLeader, err := leaderOfShards(m.cfg, m.shards, old)
	if err != nil {
		return err
	}
	m.leader = newLeader
	m.progress("new leader %s", m.cfg.Grantors[newLeader])
	rep, err := m.report()
	if err != nil {
		return err
	}
	recovered := rep.Recovered
	failing := bench.Merge([]bench.Latencies{rep.Failing})
	slices.Sort(recovered)
	r := m.res
	r.Add("shortest validity left at the kill", least.Seconds(), "s")
	if len(recovered) > 0 {
		r.Add("first host renewed at the new leader", time.Duration(recovered[0]-killAt).Seconds(), "s")
		all := time.Duration(recovered[len(recovered)-1] - killAt)
		r.Add("every host renewed at the new leader", all.Seconds(), "s")
		r.Add("smallest margin: a host's soonest deadline at the kill minus its renewal at the new leader", slices.Min(rep.Margins).Seconds(), "s")
		r.SetTarget("smallest margin: a host's soonest deadline at the kill minus its renewal at the new leader", ">=", 0)
	}
	r.Add("hosts renewed at the new leader", float64(len(recovered)), "")
	r.Add("renewal lag after the kill p99", failing.MS(0.99), "ms")
	r.Add("renewal lag after the kill max", failing.MS(1), "ms")

	addr := m.cfg.Grantors[newLeader]
	var at []time.Duration
	var took bench.Latencies
	for _, x := range rep.Handshakes {
		if x.Addr == addr && !x.Start.Before(killWall) {
			at = append(at, x.Start.Sub(killWall))
			took = append(took, x.Took)
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

// progressed sums the shards' progress after the kill.
func (m *measure) progressed() (recovered, allLost int, err error) {
	replies, err := all(m.shards, &command{Cmd: "progress"})
	if err != nil {
		return 0, 0, err
	}
	for _, r := range replies {
		recovered += r.Recovered
		allLost += r.AllLost
	}
	return recovered, allLost, nil
}

// report merges the shards' reports; each has checked with its sidecars
// that they hold every lease.
func (m *measure) report() (*shardReport, error) {
	replies, err := all(m.shards, &command{Cmd: "report"})
	if err != nil {
		return nil, err
	}
	out := &shardReport{Lost: map[string]int{}}
	for _, r := range replies {
		x := r.Report
		if x == nil {
			return nil, errors.New("bench hosts: a shard sent no report")
		}
		out.Steady = append(out.Steady, x.Steady...)
		out.Failing = append(out.Failing, x.Failing...)
		out.Recovered = append(out.Recovered, x.Recovered...)
		out.Margins = append(out.Margins, x.Margins...)
		out.Handshakes = append(out.Handshakes, x.Handshakes...)
		out.Renewals += x.Renewals
		out.Held += x.Held
		out.Total += x.Total
		for k, v := range x.Lost {
			out.Lost[k] += v
		}
	}
	return out, nil
}

// final checks with every sidecar that it still holds every lease its
// program acquired, with the token it was granted.
func (m *measure) final() error {
	m.progress("checking every host's leases")
	rep, err := m.report()
	if err != nil {
		return err
	}
	lostEvents := 0
	for _, v := range rep.Lost {
		lostEvents += v
	}
	m.res.Add("leases lost", float64(rep.Total-rep.Held), "")
	m.res.SetTarget("leases lost", "<=", 0)
	m.res.Note(fmt.Sprintf("at the end %d of %d leases were held by their sidecars with the token first granted; lost events by reason: %v (%d)", rep.Held, rep.Total, rep.Lost, lostEvents))
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
