package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

var (
	// ErrViolation is returned when the cluster answered something its
	// contract rules out (two holders at once, a token that did not grow,
	// a keepalive reply that did not renew a lease its session holds).
	// A run that sees one measures nothing.
	ErrViolation = errors.New("bench: grantor contract violated")
)

// Run runs the workloads of cfg one after the other against the cluster
// and returns their figures. On an error it returns the results of the
// workloads that finished, and the error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	run, err := newRunID()
	if err != nil {
		return nil, err
	}
	c := newCluster(cfg.Grantors, cfg.Conns, cfg.Credentials)
	defer c.close()
	rep := &Report{Grantors: slices.Clone(cfg.Grantors), Started: time.Now()}
	b := &bencher{cfg: cfg, c: c, run: run}
	for _, w := range Workloads {
		if !slices.Contains(cfg.Workloads, w) {
			continue
		}
		f := map[string]func(context.Context) (*Result, error){
			Grants:           b.grants,
			Handoffs:         b.handoffs,
			KeepAlives:       b.keepAlives,
			Memory:           b.memory,
			GrantsGrowth:     b.grantsGrowth,
			KeepAlivesGrowth: b.keepAlivesGrowth,
		}[w]
		t0 := time.Now()
		res, err := f(ctx)
		if a := c.leaderAddr(); a != "" {
			rep.Leader = a
		}
		if err != nil {
			return rep, fmt.Errorf("%s: %w", w, err)
		}
		res.Workload = w
		res.Elapsed = time.Since(t0)
		if n := c.redirects.Swap(0); n > 0 {
			res.Note(fmt.Sprintf("followed %d NotLeader redirects", n))
		}
		if n := c.retries.Swap(0); n > 0 {
			res.Note(fmt.Sprintf("retried %d calls after UNAVAILABLE", n))
		}
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
}

// bencher runs workloads against one cluster.
type bencher struct {
	cfg Config
	c   *cluster
	run string // keeps this run's names apart from earlier runs'
}

func (b *bencher) progress(format string, args ...any) {
	if b.cfg.Progress != nil {
		fmt.Fprintf(b.cfg.Progress, "bench: "+format+"\n", args...)
	}
}

// Parallel runs f(ctx, i) for i in [0, n) on n goroutines and returns the
// first error; the first error cancels the ctx the others see.
func Parallel(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for i := range n {
		wg.Go(func() {
			if err := f(ctx, i); err != nil {
				once.Do(func() {
					first = err
					cancel()
				})
			}
		})
	}
	wg.Wait()
	return first
}

// ForEach runs f(ctx, i) for every i in [0, n) on at most workers
// goroutines, and returns the first error.
func ForEach(ctx context.Context, n, workers int, f func(ctx context.Context, i int) error) error {
	var mu sync.Mutex
	next := 0
	return Parallel(ctx, min(n, workers), func(ctx context.Context, _ int) error {
		for {
			mu.Lock()
			i := next
			next++
			mu.Unlock()
			if i >= n {
				return nil
			}
			if err := f(ctx, i); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	})
}

// held is a lease this bench holds.
type held struct {
	lease string
	token uint64
}

// holding is the leases of one session, acquired by setup.
type holding struct {
	s      *session
	owner  string
	leases []held
}

// setup acquires perSession leases (with LeaseTTL) in each of sessions
// sessions, Concurrency sessions at a time, each session's one after the
// other, and checks every grant and that tokens are all distinct. name
// names lease j of session i.
func (b *bencher) setup(ctx context.Context, kind string, sessions, total int, name func(i, j int) string) ([]holding, error) {
	hs := make([]holding, sessions)
	var (
		mu    sync.Mutex
		done  int
		step  = max(1, total/10)
		next  = step
		start = time.Now()
	)
	err := ForEach(ctx, sessions, b.cfg.Concurrency, func(ctx context.Context, i int) error {
		n := total / sessions
		if i < total%sessions {
			n++
		}
		h := holding{s: newSession(b.run, kind, i), owner: "bench", leases: make([]held, 0, n)}
		for j := range n {
			l := name(i, j)
			resp, err := b.c.acquire(ctx, i, h.s, l, h.owner, b.cfg.LeaseTTL, 0)
			if err != nil {
				return err
			}
			if !resp.Granted {
				return fmt.Errorf("%w: %s, never granted before, is held by %q with token %d", ErrViolation, l, resp.HolderName, resp.Token)
			}
			h.leases = append(h.leases, held{lease: l, token: resp.Token})
			mu.Lock()
			if done++; done >= next {
				b.progress("%s: %d of %d leases acquired after %.0fs", kind, done, total, time.Since(start).Seconds())
				next += step
			}
			mu.Unlock()
		}
		hs[i] = h
		return nil
	})
	if err != nil {
		return nil, err
	}
	var tokens []uint64
	for _, h := range hs {
		for _, l := range h.leases {
			tokens = append(tokens, l.token)
		}
	}
	if err := distinct(tokens); err != nil {
		return nil, err
	}
	return hs, nil
}

// cleanup releases every lease of hs, Concurrency sessions at a time.
func (b *bencher) cleanup(ctx context.Context, kind string, hs []holding) error {
	b.progress("%s: releasing the leases", kind)
	return ForEach(ctx, len(hs), b.cfg.Concurrency, func(ctx context.Context, i int) error {
		for _, l := range hs[i].leases {
			if err := b.c.release(ctx, i, hs[i].s, l.lease, hs[i].owner, l.token); err != nil {
				return err
			}
		}
		return nil
	})
}

// distinct checks that no token was granted twice.
func distinct(tokens []uint64) error {
	slices.Sort(tokens)
	for i := 1; i < len(tokens); i++ {
		if tokens[i] == tokens[i-1] {
			return fmt.Errorf("%w: token %d was granted twice", ErrViolation, tokens[i])
		}
	}
	return nil
}
