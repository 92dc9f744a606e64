package main

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/leaseside/leaseside/internal/bench"
)

// handoffWait bounds each contender's wait for the lock, as in `leaseside
// bench` (every owner is served in turn well within it).
const handoffWait = time.Minute

// mutexLock is a bench.Lock on an etcd concurrency.Mutex: the lock etcd's
// own docs and etcdctl lock use, a key under the session's lease that
// holds the lock while it is the oldest on the name's prefix.
type mutexLock struct {
	cli  *clientv3.Client
	m    *concurrency.Mutex
	wait time.Duration // bounds Acquire; 0: no bound but ctx
}

// Acquire locks the mutex and returns, as the token, the revision etcd
// answered the lock with: it grows with every grant of the name (a grant
// comes after the previous holder's key was deleted, a later revision).
func (l *mutexLock) Acquire(ctx context.Context) (uint64, error) {
	if l.wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.wait)
		defer cancel()
	}
	if err := l.m.Lock(ctx); err != nil {
		return 0, fmt.Errorf("etcd lock %s: %w", l.m.Key(), err)
	}
	return uint64(l.m.Header().Revision), nil
}

// Release deletes the lock's key, as Mutex.Unlock does, and checks that
// the key was there: a lock whose key had gone (its session expired) was
// not held.
func (l *mutexLock) Release(ctx context.Context, token uint64) error {
	key := l.m.Key()
	resp, err := l.cli.Delete(ctx, key)
	if err != nil {
		return fmt.Errorf("etcd unlock %s: %w", key, err)
	}
	if resp.Deleted != 1 {
		return fmt.Errorf("%w: the key of lock %s (revision %d) was gone at release", bench.ErrViolation, key, token)
	}
	return nil
}

// newLocks opens n sessions, session i on client i, and returns a mutex
// lock of each on name(i), and a function that closes the sessions
// (revoking their leases).
func (b *etcdBench) newLocks(ctx context.Context, n int, name func(i int) string, wait time.Duration) ([]bench.Lock, func(), error) {
	sessions := make([]*concurrency.Session, n)
	closeAll := func() {
		for _, s := range sessions {
			if s != nil {
				s.Close()
			}
		}
	}
	locks := make([]bench.Lock, n)
	err := bench.ForEach(ctx, n, b.cfg.concurrency, func(ctx context.Context, i int) error {
		s, err := concurrency.NewSession(b.client(i), concurrency.WithTTL(int(b.cfg.ttl/time.Second)), concurrency.WithContext(ctx))
		if err != nil {
			return fmt.Errorf("etcd session: %w", err)
		}
		sessions[i] = s
		locks[i] = &mutexLock{cli: b.client(i), m: concurrency.NewMutex(s, name(i)), wait: wait}
		return nil
	})
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return locks, closeAll, nil
}

// locks is `leaseside bench`'s grants workload on etcd: owners, each in
// its own session on its own name, lock and unlock it in a loop.
func (b *etcdBench) locks(ctx context.Context) (*bench.Result, error) {
	locks, closeAll, err := b.newLocks(ctx, b.cfg.owners, func(i int) string {
		return fmt.Sprintf("/bench/%s/locks/%d", b.run, i)
	}, 0)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	res, err := bench.LockCycles(ctx, locks, b.cfg.warmup, b.cfg.duration, b.leaderPID)
	if err != nil {
		return nil, err
	}
	res.Setup = fmt.Sprintf("%d owners, each in its own session (lease ttl %v) on its own name: concurrency.Mutex Lock, Unlock (a Delete of its key), repeat; %v measured after %v warmup; %d clients; %s",
		len(locks), b.cfg.ttl, b.cfg.duration, b.cfg.warmup, b.cfg.clients, b.leaderNote())
	return res, nil
}

// handoffs is `leaseside bench`'s handoffs workload on etcd: contenders,
// each in its own session, lock one name, hold it, unlock it, and queue
// again (Mutex.Lock waits for the older keys' deletion with a watch).
func (b *etcdBench) handoffs(ctx context.Context) (*bench.Result, error) {
	name := fmt.Sprintf("/bench/%s/handoff", b.run)
	locks, closeAll, err := b.newLocks(ctx, b.cfg.contenders, func(int) string { return name }, handoffWait)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	res, err := bench.LockHandoffs(ctx, locks, b.cfg.hold, b.cfg.warmup, b.cfg.duration, b.leaderPID)
	if err != nil {
		return nil, err
	}
	res.Setup = fmt.Sprintf("%d owners, each in its own session (lease ttl %v), contending for one name: concurrency.Mutex Lock (wait %v), hold %v, Unlock, repeat; %v measured after %v warmup; %d clients; %s",
		len(locks), b.cfg.ttl, handoffWait, b.cfg.hold, b.cfg.duration, b.cfg.warmup, b.cfg.clients, b.leaderNote())
	return res, nil
}
