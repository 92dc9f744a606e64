// Package hosts is the bench's hosts workload (issue 25): N simulated
// hosts against a real grantor cluster, each a leaseside sidecar of its
// own run in this process (the daemon package itself: its socket, its
// mutual-TLS connection, its grantor sessions, its renew loop and its
// retries), with a program on it holding K leases of term d through the
// socket. It measures what one cell of grantors serves: the leader's CPU
// and RSS, how late renewals come against their d/3 schedule, and leases
// lost (there must be none); and, when asked, a kill -9 of the leader at
// full load: leases lost, the time until every host renewed at the new
// leader, and the connections and TLS handshakes the new leader took,
// with its CPU.
//
// It lives apart from package bench, which measures the cluster as a bare
// gRPC client and is shared with the etcd comparison's module.
package hosts

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaseside/leaseside/internal/bench"
)

// Workload is the name of the hosts workload.
const Workload = "hosts"

// Run runs the workload and returns its report. On an error after the
// hosts started it returns what it measured, and the error.
func Run(ctx context.Context, cfg Config) (*bench.Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	progress := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "bench: hosts: "+format+"\n", args...)
		}
	}
	var rb [4]byte
	if _, err := rand.Read(rb[:]); err != nil {
		return nil, err
	}
	rep := &bench.Report{Grantors: slices.Clone(cfg.Grantors), Started: time.Now()}
	res := &bench.Result{Workload: Workload, Setup: fmt.Sprintf("%d hosts, each a sidecar of its own (one mutual-TLS connection, its grantor sessions, the daemon's renew loop) with a program holding %d lease(s) of term %v through its socket; %v measured after %v warmup",
		cfg.Hosts, cfg.LeasesPerHost, cfg.Term, cfg.Duration, cfg.Warmup)}
	t0 := time.Now()
	progress("starting %d sidecars", cfg.Hosts)
	shards, err := startShards(ctx, cfg, hex.EncodeToString(rb[:]), progress)
	if err != nil {
		return nil, err
	}
	defer func() {
		progress("stopping the sidecars")
		stopShards(shards)
	}()
	res.Add("setup", time.Since(t0).Seconds(), "s")
	leader, err := leaderOfShards(cfg, shards, -1)
	if err != nil {
		return nil, err
	}
	rep.Leader = cfg.Grantors[leader]
	progress("leader %s (pid %d); warming up for %v", cfg.Grantors[leader], cfg.GrantorPIDs[leader], cfg.Warmup)
	if !sleep(ctx, cfg.Warmup) {
		return rep, ctx.Err()
	}
	if _, err := all(shards, &command{Cmd: "reset"}); err != nil {
		return rep, err
	}
	m := &measure{cfg: cfg, shards: shards, res: res, leader: leader, progress: progress}
	if err := m.steady(ctx); err != nil {
		return rep, err
	}
	if cfg.KillLeader > 0 {
		if err := m.failover(ctx); err != nil {
			return rep, err
		}
		rep.Leader = cfg.Grantors[m.leader]
	}
	if err := m.final(); err != nil {
		return rep, err
	}
	res.Elapsed = time.Since(t0)
	rep.Results = append(rep.Results, res)
	return rep, nil
}

// leaderOfShards asks the shards' hosts which grantor answers them as
// leader, and returns its index in cfg.Grantors; not is a grantor that
// does not lead (the one killed), or -1.
func leaderOfShards(cfg Config, shards []*shardProc, not int) (int, error) {
	replies, err := all(shards, &command{Cmd: "leader"})
	if err != nil {
		return 0, err
	}
	for _, r := range replies {
		if i := slices.Index(cfg.Grantors, r.Leader); i >= 0 && i != not {
			return i, nil
		}
	}
	return 0, fmt.Errorf("bench hosts: no host names a leader among --grantors %v (they name %s)", cfg.Grantors, replies[0].Leader)
}

// sleep waits d, or until ctx ends (false). A run's phases are lengths of
// time.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// kill sends SIGKILL to pid.
func kill(pid int) error { return unix.Kill(pid, unix.SIGKILL) }
