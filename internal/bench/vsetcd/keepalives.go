package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaseside/leaseside/internal/bench"
)

// keepAlives is `leaseside bench`'s keepalives workload on etcd, one
// lease per message as etcd renews: sessions leases, each renewed on its
// own LeaseKeepAlive stream (etcd's raw gRPC stream, not the client's
// lessor, which renews only every third of the term) with inFlight
// requests in flight, as fast as replies come. Every reply must name its
// lease and give it a positive TTL (a lease etcd no longer has answers
// TTL 0): a lost lease fails the run. A reply counts when its request was
// sent and answered in the measured window. Then the leases are revoked.
func (b *etcdBench) keepAlives(ctx context.Context) (*bench.Result, error) {
	n := b.cfg.sessions
	ids := make([]clientv3.LeaseID, n)
	t0 := time.Now()
	b.progress("keepalives: granting %d leases", n)
	err := bench.ForEach(ctx, n, b.cfg.concurrency, func(ctx context.Context, i int) error {
		resp, err := b.client(i).Grant(ctx, int64(b.cfg.ttl/time.Second))
		if err != nil {
			return fmt.Errorf("etcd lease grant: %w", err)
		}
		ids[i] = resp.ID
		return nil
	})
	if err != nil {
		return nil, err
	}
	setupRate := float64(n) / time.Since(t0).Seconds()
	defer b.revoke(ctx, ids)

	lat := make([]bench.Latencies, n)
	w := bench.NewWindow(b.cfg.warmup, b.cfg.duration)
	cpu := bench.MeterCPU(ctx, b.leaderPID, w)
	defer cpu.Stop()
	err = bench.Parallel(ctx, n, func(ctx context.Context, i int) error {
		var err error
		lat[i], err = b.renewLoop(ctx, b.client(i), ids[i], w)
		return err
	})
	if err != nil {
		return nil, err
	}
	l := bench.Merge(lat)
	res := &bench.Result{Setup: fmt.Sprintf("%d leases (ttl %v), each renewed on its own LeaseKeepAlive stream over %d clients, %d request(s) in flight per stream, one lease per request; %v measured after %v warmup; %s",
		n, b.cfg.ttl, b.cfg.clients, b.cfg.inFlight, b.cfg.duration, b.cfg.warmup, b.leaderNote())}
	res.Add("keepalive messages/s", w.Rate(len(l)), "/s")
	res.Add("lease renewals/s", w.Rate(len(l)), "/s")
	res.Add("keepalive round trip p50", l.MS(0.50), "ms")
	res.Add("keepalive round trip p99", l.MS(0.99), "ms")
	res.Add("keepalive replies measured", float64(len(l)), "")
	res.Add("setup grants/s", setupRate, "/s")
	cpu.Report(res)
	res.Note("every reply named its lease with a positive TTL, none lost; all leases revoked afterwards")
	return res, nil
}

// renewLoop is one lease's stream: it keeps inFlight requests in flight
// until the window ends, checks every reply, and returns the round trips
// of the requests sent and answered in the window.
func (b *etcdBench) renewLoop(ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID, w *bench.Window) (bench.Latencies, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pb.NewLeaseClient(cli.ActiveConnection()).LeaseKeepAlive(ctx)
	if err != nil {
		return nil, fmt.Errorf("lease %x: opening LeaseKeepAlive: %w", id, err)
	}
	req := &pb.LeaseKeepAliveRequest{ID: int64(id)}
	var (
		lat    bench.Latencies
		sentAt []time.Time // of the requests in flight, oldest first
	)
	send := func() error {
		sentAt = append(sentAt, time.Now())
		if err := stream.Send(req); err != nil {
			return fmt.Errorf("lease %x: LeaseKeepAlive: %w", id, err)
		}
		return nil
	}
	for range b.cfg.inFlight {
		if err := send(); err != nil {
			return nil, err
		}
	}
	for len(sentAt) > 0 {
		resp, err := stream.Recv()
		if err != nil {
			return nil, fmt.Errorf("lease %x: LeaseKeepAlive: %w", id, err)
		}
		now := time.Now()
		if resp.ID != int64(id) || resp.TTL <= 0 {
			return nil, fmt.Errorf("%w: keepalive of lease %x answered for lease %x with TTL %d (lost)", bench.ErrViolation, id, resp.ID, resp.TTL)
		}
		if w.Holds(sentAt[0], now) {
			lat = append(lat, now.Sub(sentAt[0]))
		}
		sentAt = sentAt[1:]
		if w.Open(now) {
			if err := send(); err != nil {
				return nil, err
			}
		}
	}
	if err := stream.CloseSend(); err != nil {
		return nil, err
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("lease %x: LeaseKeepAlive did not end cleanly: %v", id, err)
	}
	return lat, nil
}

// revoke revokes leases, concurrency at a time, and says on stderr if any
// could not be (the cluster is thrown away after the run either way).
func (b *etcdBench) revoke(ctx context.Context, ids []clientv3.LeaseID) {
	b.progress("revoking %d leases", len(ids))
	err := bench.ForEach(ctx, len(ids), b.cfg.concurrency, func(ctx context.Context, i int) error {
		_, err := b.client(i).Revoke(ctx, ids[i])
		return err
	})
	if err != nil {
		b.progress("revoking leases: %v", err)
	}
}
