package bench

import (
	"context"
	"fmt"
	"time"
)

// handoffWait is how long each owner of the handoffs workload queues for
// the lease. Every owner is granted in turn well within it (the grantor
// serves waiters first come first served); running out is an error.
const handoffWait = time.Minute

// handoffs runs HandoffOwners owners, each in its own session, contending
// for one lease (LockHandoffs): each queues for it with a long wait, holds it
// for Hold, releases it, and queues again.
func (b *bencher) handoffs(ctx context.Context) (*Result, error) {
	lease := fmt.Sprintf("bench/%s/handoff", b.run)
	locks := make([]Lock, b.cfg.HandoffOwners)
	for i := range locks {
		locks[i] = &leaseLock{b: b, i: i, s: newSession(b.run, "h", i), lease: lease, wait: handoffWait}
	}
	res, err := LockHandoffs(ctx, locks, b.cfg.Hold, b.cfg.Warmup, b.cfg.Duration, b.cfg.LeaderPID)
	if err != nil {
		return nil, err
	}
	res.Setup = fmt.Sprintf("%d owners, each in its own session, contending for one name: acquire (wait %v), hold %v, release, repeat; %v measured after %v warmup",
		len(locks), handoffWait, b.cfg.Hold, b.cfg.Duration, b.cfg.Warmup)
	res.SetTarget("handoffs/s", ">=", 2000)
	res.SetTarget("handoff latency p50", "<", 5)
	return res, nil
}
