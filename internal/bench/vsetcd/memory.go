package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/leaseside/leaseside/internal/bench"
)

// memory is `leaseside bench`'s memory workload on etcd: it reads the
// leader's memory, takes leases locks (concurrency.Mutex, each one key
// under its session's lease) over memSessions sessions, reads the memory
// again, and reports the growth per lock, with the same probe
// (bench.LeaderMemory: VmRSS, and the Go heap from etcd's /metrics, each
// read after a leader GC). After the reading it checks, with one
// TimeToLive per session, that every session's lease is alive and carries
// all its locks' keys: the locks counted were held. Then the sessions are
// closed (their leases revoked).
func (b *etcdBench) memory(ctx context.Context) (*bench.Result, error) {
	n, sessions := b.cfg.leases, b.cfg.memSessions
	probe := bench.LeaderMemory{PID: b.leaderPID, Metrics: strings.TrimSuffix(b.leader, "/") + "/metrics", Settle: b.cfg.settle, Progress: b.progress}
	before, err := probe.Read(ctx, "before")
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	ss := make([]*concurrency.Session, sessions)
	defer func() {
		b.progress("memory: closing %d sessions", sessions)
		bench.ForEach(context.WithoutCancel(ctx), sessions, b.cfg.concurrency, func(_ context.Context, i int) error {
			if ss[i] != nil {
				ss[i].Close()
			}
			return nil
		})
	}()
	per := func(i int) int { return n/sessions + btoi(i < n%sessions) }
	b.progress("memory: taking %d locks over %d sessions", n, sessions)
	err = bench.ForEach(ctx, sessions, b.cfg.concurrency, func(ctx context.Context, i int) error {
		s, err := concurrency.NewSession(b.client(i), concurrency.WithTTL(int(b.cfg.ttl/time.Second)))
		if err != nil {
			return fmt.Errorf("etcd session: %w", err)
		}
		ss[i] = s
		for j := range per(i) {
			m := concurrency.NewMutex(s, fmt.Sprintf("/bench/%s/mem/%d/%d", b.run, i, j))
			if err := m.TryLock(ctx); err != nil {
				return fmt.Errorf("etcd lock %s, never taken before: %w", m.Key(), err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	setupRate := float64(n) / time.Since(t0).Seconds()
	after, err := probe.Read(ctx, "after")
	if err != nil {
		return nil, err
	}
	b.progress("memory: checking every lock is held")
	err = bench.ForEach(ctx, sessions, b.cfg.concurrency, func(ctx context.Context, i int) error {
		resp, err := b.client(i).TimeToLive(ctx, ss[i].Lease(), clientv3.WithAttachedKeys())
		if err != nil {
			return err
		}
		if resp.TTL <= 0 || len(resp.Keys) != per(i) {
			return fmt.Errorf("%w: session lease %x has TTL %d and %d keys, want > 0 and %d", bench.ErrViolation, ss[i].Lease(), resp.TTL, len(resp.Keys), per(i))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res := &bench.Result{Setup: fmt.Sprintf("%d locks (concurrency.Mutex TryLock, one key each) over %d sessions (lease ttl %v), %d sessions locking at a time; %s, metrics %s",
		n, sessions, b.cfg.ttl, b.cfg.concurrency, b.leaderNote(), probe.Metrics)}
	probe.Report(res, before, after, n)
	res.Add("setup grants/s", setupRate, "/s")
	res.Note(fmt.Sprintf("all %d locks taken; after the reading every session's lease was alive with all its locks' keys; all sessions closed afterwards", n))
	return res, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
