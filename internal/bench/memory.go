package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// memory reads the leader's memory, acquires Leases leases (with
// LeaseTTL) over MemSessions sessions, reads it again, and reports the
// difference per lease. Before each reading it waits (up to Settle) for
// the leader to finish a garbage collection, so that what is counted is
// live memory, not garbage. After the reading every session renews all its
// leases in one keepalive, which must renew each: the leases counted were
// live. Then it releases them all.
func (b *bencher) memory(ctx context.Context) (*Result, error) {
	n, sessions := b.cfg.Leases, b.cfg.MemSessions
	probe := LeaderMemory{PID: b.cfg.LeaderPID, Metrics: b.cfg.LeaderMetrics, Settle: b.cfg.Settle, Progress: b.progress}
	before, err := probe.Read(ctx, "before")
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	hs, err := b.setup(ctx, "mem", sessions, n, func(i, j int) string {
		return fmt.Sprintf("bench/%s/mem/%d/%d", b.run, i, j)
	})
	if err != nil {
		return nil, err
	}
	setupRate := float64(n) / time.Since(t0).Seconds()
	after, err := probe.Read(ctx, "after")
	if err != nil {
		return nil, err
	}
	if err := b.verifyLive(ctx, hs); err != nil {
		return nil, err
	}
	res := &Result{Setup: fmt.Sprintf("%d leases (ttl %v) over %d sessions, %d sessions acquiring at a time; leader pid %d, metrics %q",
		n, b.cfg.LeaseTTL, sessions, b.cfg.Concurrency, b.cfg.LeaderPID, b.cfg.LeaderMetrics)}
	probe.Report(res, before, after, n)
	for _, name := range []string{"leader RSS per live lease", "leader Go heap in use per live lease"} {
		if _, ok := res.Figure(name); ok {
			res.SetTarget(name, "<=", 1024)
		}
	}
	res.Add("setup grants/s", setupRate, "/s")
	res.Note(fmt.Sprintf("all %d leases granted with distinct tokens and renewed by one keepalive per session after the reading; all released afterwards", n))
	res.Note("the leader's figures are its whole process's: with `leaseside dev` that includes an idle sidecar")
	if err := b.cleanup(ctx, "mem", hs); err != nil {
		return nil, err
	}
	return res, nil
}

// verifyLive has every session renew itself in one keepalive that asks
// for its list (a digest that cannot match), and checks that the session
// was renewed and lists exactly its grants. A keepalive the grantor
// refuses for want of a leader (one stepped down under the load) is sent
// again, on a new stream, to whichever grantor leads next, as call does
// for other RPCs.
func (b *bencher) verifyLive(ctx context.Context, hs []holding) error {
	b.progress("mem: checking every lease is live")
	return ForEach(ctx, len(hs), b.cfg.Concurrency, func(ctx context.Context, i int) error {
		renewal := hs[i].renewal(b.cfg.LeaseTTL)
		renewal.LeaseSetVersion++ // ask for the list
		req := &grantorpb.KeepAliveRequest{Session: hs[i].s.id, Batch: 1, Sessions: []*grantorpb.SessionRenewal{renewal}}
		resp, err := call(ctx, b.c, i, func(ctx context.Context, api grantorpb.GrantorClient) (*grantorpb.KeepAliveResponse, error) {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			stream, err := api.KeepAlive(ctx)
			if err != nil {
				return nil, err
			}
			if err := stream.Send(req); err != nil {
				if _, rerr := stream.Recv(); rerr != nil {
					return nil, rerr
				}
				return nil, err
			}
			resp, err := stream.Recv()
			if err != nil {
				return nil, err
			}
			return resp, stream.CloseSend()
		})
		if err != nil {
			return fmt.Errorf("session %s: KeepAlive: %w", hs[i].s.id, err)
		}
		if len(resp.Sessions) != 1 {
			return fmt.Errorf("session %s: %w: the reply answers %d sessions", hs[i].s.id, ErrViolation, len(resp.Sessions))
		}
		if err := listedAll(hs[i].leases, resp.Sessions[0]); err != nil {
			return fmt.Errorf("session %s: %w", hs[i].s.id, err)
		}
		return nil
	})
}
