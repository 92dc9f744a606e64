package bench

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// A Lock is one owner's handle on one named lock of the service measured.
// LockCycles and LockHandoffs drive leaseside through it and, in the
// side-by-side bench (vs-etcd.sh), etcd, so that both are measured by the
// same loop and the same checks.
type Lock interface {
	// Acquire takes the lock, waiting for it if it is held (as long as
	// the implementation allows: running out is an error), and returns
	// the grant's fencing token, which must be greater than the token of
	// any earlier grant of the same name.
	Acquire(ctx context.Context) (token uint64, err error)
	// Release gives up the grant of token. It returns an error unless
	// that grant was released.
	Release(ctx context.Context, token uint64) error
}

// LockCycles has one owner per lock, each lock on a name of its own,
// acquire and release it in a loop for warmup and then d, with the
// leader's CPU metered when leaderPID is not 0. Every grant must take a
// token greater than the last of its name, and no token may be granted
// twice. A cycle counts when its acquire and release both lie in the
// measured window. The figures have no targets: the caller sets them.
func LockCycles(ctx context.Context, locks []Lock, warmup, d time.Duration, leaderPID int) (*Result, error) {
	n := len(locks)
	acq := make([]Latencies, n)
	rel := make([]Latencies, n)
	tokens := make([][]uint64, n)
	w := NewWindow(warmup, d)
	cpu := MeterCPU(ctx, leaderPID, w)
	defer cpu.Stop()
	err := Parallel(ctx, n, func(ctx context.Context, i int) error {
		var last uint64
		for {
			t0 := time.Now()
			if !w.Open(t0) {
				return nil
			}
			token, err := locks[i].Acquire(ctx)
			if err != nil {
				return err
			}
			if token <= last {
				return fmt.Errorf("%w: owner %d granted its own name with token %d after token %d", ErrViolation, i, token, last)
			}
			last = token
			t1 := time.Now()
			if err := locks[i].Release(ctx, token); err != nil {
				return err
			}
			t2 := time.Now()
			if w.Holds(t0, t2) {
				acq[i] = append(acq[i], t1.Sub(t0))
				rel[i] = append(rel[i], t2.Sub(t1))
				tokens[i] = append(tokens[i], token)
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
	a, r := Merge(acq), Merge(rel)
	res := &Result{Setup: fmt.Sprintf("%d owners, each on its own name: acquire, release, repeat; %v measured after %v warmup", n, d, warmup)}
	res.Add("grants/s (each with its release)", w.Rate(len(a)), "/s")
	res.Add("raft entries/s (grants + releases)", w.Rate(2*len(a)), "/s")
	res.Add("acquire latency p50", a.MS(0.50), "ms")
	res.Add("acquire latency p99", a.MS(0.99), "ms")
	res.Add("release latency p50", r.MS(0.50), "ms")
	res.Add("release latency p99", r.MS(0.99), "ms")
	res.Add("grants measured", float64(len(a)), "")
	cpu.Report(res)
	res.Note(fmt.Sprintf("every acquire granted, every release released, %d tokens all distinct and growing per name", len(all)))
	return res, nil
}

// baton is what the owners of the contended lock share in process: who
// holds it, and when and under which token the last holder let it go.
type baton struct {
	mu       sync.Mutex
	holders  int
	token    uint64
	released time.Time // read from the monotonic clock just before Release is sent
}

// take records owner i's grant of token at now. It fails if another owner
// holds the lock or the token did not grow, and returns when the last
// holder let go (zero before the first release).
func (b *baton) take(i int, token uint64) (prev time.Time, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.holders != 0 {
		return time.Time{}, fmt.Errorf("%w: the lock was granted to owner %d while another owner holds it", ErrViolation, i)
	}
	if token <= b.token {
		return time.Time{}, fmt.Errorf("%w: the lock was granted with token %d after token %d", ErrViolation, token, b.token)
	}
	b.holders++
	b.token = token
	return b.released, nil
}

// give records that the holder lets go now, just before it releases.
func (b *baton) give() {
	b.mu.Lock()
	b.holders--
	b.released = time.Now()
	b.mu.Unlock()
}

// LockHandoffs has one owner per lock, all locks on one name, contend for it
// for warmup and then d: each acquires it (waiting), holds it for hold,
// stamps the time, releases it, and acquires again; after the window each
// takes its turn once more and leaves, so no one is left waiting for a
// lock nobody releases. The handoff latency is from the holder's stamp to
// the moment the next owner's Acquire returns, on one monotonic clock. At
// no time may two owners hold the lock, and each grant must take a greater
// token than the one before. The figures have no targets.
func LockHandoffs(ctx context.Context, locks []Lock, hold, warmup, d time.Duration, leaderPID int) (*Result, error) {
	n := len(locks)
	var bt baton
	lat := make([]Latencies, n)
	grants := make([]int, n)
	w := NewWindow(warmup, d)
	cpu := MeterCPU(ctx, leaderPID, w)
	defer cpu.Stop()
	err := Parallel(ctx, n, func(ctx context.Context, i int) error {
		for {
			token, err := locks[i].Acquire(ctx)
			if err != nil {
				return err
			}
			now := time.Now()
			prev, err := bt.take(i, token)
			if err != nil {
				return err
			}
			if !prev.IsZero() && w.Holds(prev, now) {
				lat[i] = append(lat[i], now.Sub(prev))
				grants[i]++
			}
			stop := !w.Open(now)
			if hold > 0 {
				t := time.NewTimer(hold)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return ctx.Err()
				}
			}
			bt.give()
			if err := locks[i].Release(ctx, token); err != nil {
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
	l := Merge(lat)
	minG, maxG := grants[0], grants[0]
	for _, g := range grants {
		minG, maxG = min(minG, g), max(maxG, g)
	}
	res := &Result{Setup: fmt.Sprintf("%d owners contending for one name: acquire (waiting), hold %v, release, repeat; %v measured after %v warmup",
		n, hold, d, warmup)}
	res.Add("handoffs/s", w.Rate(len(l)), "/s")
	res.Add("handoff latency p50", l.MS(0.50), "ms")
	res.Add("handoff latency p99", l.MS(0.99), "ms")
	res.Add("handoffs measured", float64(len(l)), "")
	cpu.Report(res)
	res.Note("handoff latency: from the holder's clock reading just before it sends its release to the next owner's acquire returning granted (both in this process)")
	res.Note(fmt.Sprintf("never two holders at once; tokens grew with every grant; handoffs per owner %d..%d", minG, maxG))
	return res, nil
}
