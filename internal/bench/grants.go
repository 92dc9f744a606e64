package bench

import (
	"context"
	"fmt"
	"time"
)

// grants runs GrantOwners owners, each in its own session on its own
// lease name, each acquiring (without waiting) and releasing its name in a
// loop. Every acquire must be granted (nobody else uses the name), every
// release must release, and every grant must take a token never granted
// before. A grant counts when its acquire and release both lie in the
// measured window.
func (b *bencher) grants(ctx context.Context) (*Result, error) {
	n := b.cfg.GrantOwners
	acq := make([]latencies, n)
	rel := make([]latencies, n)
	tokens := make([][]uint64, n)
	w := newWindow(b.cfg.Warmup, b.cfg.Duration)
	cpu := b.meterCPU(ctx, w)
	defer cpu.stop()
	err := parallel(ctx, n, func(ctx context.Context, i int) error {
		s := newSession(b.run, "g", i)
		lease := fmt.Sprintf("bench/%s/grants/%d", b.run, i)
		var last uint64
		for {
			t0 := time.Now()
			if !t0.Before(w.end) {
				return nil
			}
			resp, err := b.c.acquire(ctx, i, s, lease, "bench", b.cfg.LeaseTTL, 0)
			if err != nil {
				return err
			}
			if !resp.Granted {
				return fmt.Errorf("%w: %s, released by its only owner, is held by %s/%s token %d",
					ErrViolation, lease, resp.HolderSession, resp.HolderOwner, resp.Token)
			}
			if resp.Token <= last {
				return fmt.Errorf("%w: %s granted with token %d after token %d", ErrViolation, lease, resp.Token, last)
			}
			last = resp.Token
			t1 := time.Now()
			if err := b.c.release(ctx, i, s, lease, "bench", resp.Token); err != nil {
				return err
			}
			t2 := time.Now()
			if w.holds(t0, t2) {
				acq[i] = append(acq[i], t1.Sub(t0))
				rel[i] = append(rel[i], t2.Sub(t1))
				tokens[i] = append(tokens[i], resp.Token)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	var all []uint64
	for _, t := range tokens {
		all = append(all, t...)
	}
	if err := distinct(all); err != nil {
		return nil, err
	}
	a, r := merge(acq), merge(rel)
	res := &Result{Setup: fmt.Sprintf("%d owners, each in its own session on its own name: acquire (no wait), release, repeat; %v measured after %v warmup; %d connections",
		n, b.cfg.Duration, b.cfg.Warmup, b.cfg.Conns)}
	res.addTarget("grants/s (each with its release)", w.rate(len(a)), "/s", ">=", 10000)
	res.add("raft entries/s (grants + releases)", w.rate(2*len(a)), "/s")
	res.add("acquire latency p50", a.ms(0.50), "ms")
	res.add("acquire latency p99", a.ms(0.99), "ms")
	res.add("release latency p50", r.ms(0.50), "ms")
	res.add("release latency p99", r.ms(0.99), "ms")
	res.add("grants measured", float64(len(a)), "")
	cpu.report(res)
	res.note(fmt.Sprintf("every acquire granted, every release released, %d tokens all distinct and growing per name", len(all)))
	return res, nil
}
