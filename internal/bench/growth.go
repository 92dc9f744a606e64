package bench

import (
	"context"
	"fmt"
	"time"
)

// grantLocks returns GrantOwners lease locks, each in its own session
// (named kind-i) on its own name, for LockCycles.
func (b *bencher) grantLocks(kind string) []Lock {
	locks := make([]Lock, b.cfg.GrantOwners)
	for i := range locks {
		locks[i] = &leaseLock{b: b, i: i, s: newSession(b.run, kind, i), lease: fmt.Sprintf("bench/%s/%s/%d", b.run, kind, i)}
	}
	return locks
}

// grantsGrowth measures how the cost of a grant grows with the leases the
// cluster holds: the grants workload (LockCycles, GrantOwners owners) with
// LiveFew live leases held by LiveSessions other sessions, then again
// after LiveSessions more sessions took leases up to LiveMany in all. The
// live leases are checked like the memory workload's (distinct tokens) and
// released at the end.
func (b *bencher) grantsGrowth(ctx context.Context) (*Result, error) {
	few, many, sessions := b.cfg.LiveFew, b.cfg.LiveMany, b.cfg.LiveSessions
	var live []holding
	defer func() {
		if len(live) > 0 {
			if err := b.cleanup(context.WithoutCancel(ctx), "live", live); err != nil {
				b.progress("live: releasing: %v", err)
			}
		}
	}()
	res := &Result{Setup: fmt.Sprintf("the grants workload (%d owners on their own names, %v measured after %v warmup) with %d and then %d live leases (ttl %v) held by other sessions (%d, then %d)",
		b.cfg.GrantOwners, b.cfg.Duration, b.cfg.Warmup, few, many, b.cfg.LeaseTTL, sessions, 2*sessions)}
	var rates [2]float64
	for k, step := range []struct {
		kind  string
		total int // live leases held during the measurement
		add   int // leases to acquire before it
	}{{"lf", few, few}, {"lm", many, many - few}} {
		if step.add > 0 {
			hs, err := b.setup(ctx, step.kind, min(sessions, step.add), step.add, func(i, j int) string {
				return fmt.Sprintf("bench/%s/%s/%d/%d", b.run, step.kind, i, j)
			})
			live = append(live, hs...)
			if err != nil {
				return nil, err
			}
		}
		b.progress("live: grants with %d live leases", step.total)
		r, err := LockCycles(ctx, b.grantLocks("g"+step.kind), b.cfg.Warmup, b.cfg.Duration, b.cfg.LeaderPID)
		if err != nil {
			return nil, err
		}
		rate, _ := r.Figure("grants/s (each with its release)")
		p50, _ := r.Figure("acquire latency p50")
		rates[k] = rate.Value
		res.Add(fmt.Sprintf("grants/s with %d live leases", step.total), rate.Value, "/s")
		res.Add(fmt.Sprintf("acquire latency p50 with %d live leases", step.total), p50.Value, "ms")
		if cpu, ok := r.Figure("leader CPU"); ok && rate.Value > 0 {
			res.Add(fmt.Sprintf("leader CPU with %d live leases", step.total), cpu.Value, "cores")
			res.Add(fmt.Sprintf("leader CPU per grant with %d live leases", step.total), cpu.Value/rate.Value*1e6, "µs")
		}
		res.Notes = append(res.Notes, r.Notes...)
	}
	res.addTarget(fmt.Sprintf("grants/s with %d over grants/s with %d live leases", many, few), rates[1]/rates[0], "x", ">=", 0.9)
	res.Note("the two measurements ran minutes apart (the setup in between): on a shared machine, read the ratio next to the load, and the leader's CPU per grant, which depends less on it")
	return res, nil
}

// cliTerm is the term the CLI asks for by default (acquire and run
// --ttl): a host renews its session every third of it.
const cliTerm = 15 * time.Second

// keepAlivesGrowth measures how the leader's keepalive cost per host grows
// with the leases a host holds: GrowthHosts sessions (one per host) holding
// HostLeasesFew leases each renew them as fast as replies come (the
// keepalives workload's loop) while the leader's CPU is metered, then the
// same with HostLeasesMany leases each. A host sends one keepalive per
// renewal interval (a third of the term) whatever it holds, so the
// leader's CPU per host is its CPU per keepalive message times that rate:
// it reports both, at the CLI's default term, and their ratio, which is
// how it grows.
func (b *bencher) keepAlivesGrowth(ctx context.Context) (*Result, error) {
	hosts := b.cfg.GrowthHosts
	res := &Result{Setup: fmt.Sprintf("%d hosts (one session and KeepAlive stream each, %d message(s) in flight) holding %d and then %d leases each (ttl %v), renewing as fast as replies come; %v measured after %v warmup; leader pid %d",
		hosts, b.cfg.KeepAliveInFlight, b.cfg.HostLeasesFew, b.cfg.HostLeasesMany, b.cfg.LeaseTTL, b.cfg.Duration, b.cfg.Warmup, b.cfg.LeaderPID)}
	var perMsg [2]float64
	for k, per := range []int{b.cfg.HostLeasesFew, b.cfg.HostLeasesMany} {
		kind := fmt.Sprintf("kg%d", k)
		hs, err := b.setup(ctx, kind, hosts, hosts*per, func(i, j int) string {
			return fmt.Sprintf("bench/%s/%s/%d/%d", b.run, kind, i, j)
		})
		if err != nil {
			return nil, err
		}
		b.progress("%s: %d hosts of %d leases renewing for %v", kind, hosts, per, b.cfg.Duration)
		lat := make([]Latencies, hosts)
		// The window waits for a keepalive of every host: on a machine
		// too busy to answer in Duration it measures longer, not nothing.
		w := NewWindowUntil(b.cfg.Warmup, b.cfg.Duration, hosts)
		cpu := MeterCPU(ctx, b.cfg.LeaderPID, w)
		err = Parallel(ctx, hosts, func(ctx context.Context, i int) error {
			var err error
			lat[i], err = b.renewLoop(ctx, i, hs[i], w)
			return err
		})
		var r Result
		cpu.Report(&r)
		cpu.Stop()
		if err != nil {
			return nil, err
		}
		if err := b.cleanup(ctx, kind, hs); err != nil {
			return nil, err
		}
		msgs := w.Rate(len(Merge(lat)))
		leader, ok := r.Figure("leader CPU")
		if !ok {
			return nil, fmt.Errorf("%s: the leader's CPU could not be read (pid %d)", kind, b.cfg.LeaderPID)
		}
		perMsg[k] = leader.Value / msgs * 1e6
		res.Add(fmt.Sprintf("keepalive messages/s, %d leases a host", per), msgs, "/s")
		res.Add(fmt.Sprintf("leader CPU per keepalive message, %d leases a host", per), perMsg[k], "µs")
		res.Add(fmt.Sprintf("leader CPU, %d leases a host", per), leader.Value, "cores")
		res.Add(fmt.Sprintf("leader CPU per host and second, %d leases a host, a keepalive every %v", per, cliTerm/3), perMsg[k]/(cliTerm/3).Seconds(), "µs")
	}
	if perMsg[0] > 0 && perMsg[1] > 0 {
		res.addTarget(fmt.Sprintf("leader CPU per host, %d over %d leases a host", b.cfg.HostLeasesMany, b.cfg.HostLeasesFew), perMsg[1]/perMsg[0], "x", "<=", 1.1)
	} else {
		res.Note("no ratio: the leader used less CPU than /proc counts (10 ms) in a window; measure longer (--duration)")
	}
	res.Note("every reply renewed all the leases its session holds, none lost; all released afterwards")
	res.Note(fmt.Sprintf("leader CPU per host and second = leader CPU per keepalive message x one message per renewal interval (a third of the term; %v for the CLI's default %v), whatever the host holds", cliTerm/3, cliTerm))
	return res, nil
}
