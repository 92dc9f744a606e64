package bench

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// handoffWait is how long each owner of the handoffs workload queues for
// the lease. Every owner is granted in turn well within it (the grantor
// serves waiters first come first served); running out is an error.
const handoffWait = time.Minute

// baton is what the owners of the contended lease share in process: who
// holds it, and when and under which token the last holder let it go.
type baton struct {
	mu       sync.Mutex
	holders  int
	token    uint64
	released time.Time // read from the monotonic clock just before Release is sent
}

// handoffs runs HandoffOwners owners, each in its own session, contending
// for one lease: each queues for it with a long wait, holds it for Hold,
// stamps the time, releases it, and queues again. The handoff latency is
// from the holder's stamp to the moment the next owner's Acquire returns
// granted, on one monotonic clock. At no time may two owners hold the
// lease, and each grant must take a greater token than the one before.
func (b *bencher) handoffs(ctx context.Context) (*Result, error) {
	n := b.cfg.HandoffOwners
	lease := fmt.Sprintf("bench/%s/handoff", b.run)
	var bt baton
	lat := make([]latencies, n)
	grants := make([]int, n)
	w := newWindow(b.cfg.Warmup, b.cfg.Duration)
	cpu := b.meterCPU(ctx, w)
	defer cpu.stop()
	err := parallel(ctx, n, func(ctx context.Context, i int) error {
		s := newSession(b.run, "h", i)
		for {
			resp, err := b.c.acquire(ctx, i, s, lease, "bench", b.cfg.LeaseTTL, handoffWait)
			if err != nil {
				return err
			}
			now := time.Now()
			if !resp.Granted {
				return fmt.Errorf("owner %d queued %v for %s and was not granted (held by %s token %d)",
					i, handoffWait, lease, resp.HolderSession, resp.Token)
			}
			bt.mu.Lock()
			if bt.holders != 0 {
				bt.mu.Unlock()
				return fmt.Errorf("%w: %s granted to owner %d while another owner holds it", ErrViolation, lease, i)
			}
			if resp.Token <= bt.token {
				bt.mu.Unlock()
				return fmt.Errorf("%w: %s granted with token %d after token %d", ErrViolation, lease, resp.Token, bt.token)
			}
			bt.holders++
			bt.token = resp.Token
			prev := bt.released
			bt.mu.Unlock()
			if !prev.IsZero() && w.holds(prev, now) {
				lat[i] = append(lat[i], now.Sub(prev))
				grants[i]++
			}
			// After the window each owner takes its turn once more and
			// leaves, so no one is left queued for a lease nobody releases.
			stop := !now.Before(w.end)
			if b.cfg.Hold > 0 {
				t := time.NewTimer(b.cfg.Hold)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return ctx.Err()
				}
			}
			bt.mu.Lock()
			bt.holders--
			bt.released = time.Now()
			bt.mu.Unlock()
			if err := b.c.release(ctx, i, s, lease, "bench", resp.Token); err != nil {
				return err
			}
			if stop {
				return nil
			}
		}
	})
	if err != nil {
		return nil, err
	}
	l := merge(lat)
	minG, maxG := grants[0], grants[0]
	for _, g := range grants {
		minG, maxG = min(minG, g), max(maxG, g)
	}
	res := &Result{Setup: fmt.Sprintf("%d owners, each in its own session, contending for one name: acquire (wait %v), hold %v, release, repeat; %v measured after %v warmup",
		n, handoffWait, b.cfg.Hold, b.cfg.Duration, b.cfg.Warmup)}
	res.addTarget("handoffs/s", w.rate(len(l)), "/s", ">=", 2000)
	res.addTarget("handoff latency p50", l.ms(0.50), "ms", "<", 5)
	res.add("handoff latency p99", l.ms(0.99), "ms")
	res.add("handoffs measured", float64(len(l)), "")
	cpu.report(res)
	res.note("handoff latency: from the holder's clock reading just before it sends Release to the next owner's Acquire returning granted (both in this process)")
	res.note(fmt.Sprintf("never two holders at once; tokens grew with every grant; handoffs per owner %d..%d", minG, maxG))
	return res, nil
}
