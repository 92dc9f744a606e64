package bench

import (
	"context"
	"fmt"
	"time"
)

// leaseLock is a Lock on one lease of the cluster, for owner "bench" of
// its own session, on connection i.
type leaseLock struct {
	b     *bencher
	i     int
	s     *session
	lease string
	wait  time.Duration // how long Acquire queues; 0: the name must be free
}

func (l *leaseLock) Acquire(ctx context.Context) (uint64, error) {
	resp, err := l.b.c.acquire(ctx, l.i, l.s, l.lease, "bench", l.b.cfg.LeaseTTL, l.wait)
	if err != nil {
		return 0, err
	}
	switch {
	case resp.Granted:
		return resp.Token, nil
	case l.wait == 0:
		return 0, fmt.Errorf("%w: %s, released by its only owner, is held by %q with token %d",
			ErrViolation, l.lease, resp.HolderName, resp.Token)
	default:
		return 0, fmt.Errorf("session %s queued %v for %s and was not granted (held by %s token %d)",
			l.s.id, l.wait, l.lease, resp.HolderName, resp.Token)
	}
}

func (l *leaseLock) Release(ctx context.Context, token uint64) error {
	return l.b.c.release(ctx, l.i, l.s, l.lease, "bench", token)
}

// grants runs GrantOwners owners, each in its own session on its own
// lease name, each acquiring (without waiting) and releasing its name in a
// loop (LockCycles). Every acquire must be granted (nobody else uses the
// name) and every release must release.
func (b *bencher) grants(ctx context.Context) (*Result, error) {
	locks := b.grantLocks("g")
	res, err := LockCycles(ctx, locks, b.cfg.Warmup, b.cfg.Duration, b.cfg.LeaderPID)
	if err != nil {
		return nil, err
	}
	res.Setup = fmt.Sprintf("%d owners, each in its own session on its own name: acquire (no wait), release, repeat; %v measured after %v warmup; %d connections",
		len(locks), b.cfg.Duration, b.cfg.Warmup, b.cfg.Conns)
	res.SetTarget("grants/s (each with its release)", ">=", 10000)
	return res, nil
}
