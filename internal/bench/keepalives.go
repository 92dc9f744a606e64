package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// keepAlives sets up Sessions sessions holding SessionLeases leases each,
// then has every session open one KeepAlive stream and send batches that
// list all its leases, KeepAliveInFlight at a time, as fast as replies
// come. Every reply must echo its batch in order and renew every lease
// listed, none lost. A reply counts when its batch was sent and answered
// in the measured window.
func (b *bencher) keepAlives(ctx context.Context) (*Result, error) {
	n, per := b.cfg.Sessions, b.cfg.SessionLeases
	t0 := time.Now()
	hs, err := b.setup(ctx, "ka", n, n*per, func(i, j int) string {
		return fmt.Sprintf("bench/%s/ka/%d/%d", b.run, i, j)
	})
	if err != nil {
		return nil, err
	}
	setupRate := float64(n*per) / time.Since(t0).Seconds()
	b.progress("ka: %d sessions renewing for %v after %v warmup", n, b.cfg.Duration, b.cfg.Warmup)

	lat := make([]Latencies, n)
	w := NewWindow(b.cfg.Warmup, b.cfg.Duration)
	cpu := MeterCPU(ctx, b.cfg.LeaderPID, w)
	defer cpu.Stop()
	err = Parallel(ctx, n, func(ctx context.Context, i int) error {
		var err error
		lat[i], err = b.renewLoop(ctx, i, hs[i], w)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := b.cleanup(ctx, "ka", hs); err != nil {
		return nil, err
	}
	l := Merge(lat)
	res := &Result{Setup: fmt.Sprintf("%d sessions holding %d leases each (%d leases), one KeepAlive stream per session over %d connections, %d batch(es) in flight per stream, every batch listing all the session's leases; %v measured after %v warmup",
		n, per, n*per, b.cfg.Conns, b.cfg.KeepAliveInFlight, b.cfg.Duration, b.cfg.Warmup)}
	res.addTarget("keepalive messages/s", w.Rate(len(l)), "/s", ">=", 50000)
	res.Add("lease renewals/s", w.Rate(len(l)*per), "/s")
	res.Add("keepalive round trip p50", l.MS(0.50), "ms")
	res.Add("keepalive round trip p99", l.MS(0.99), "ms")
	res.Add("keepalive replies measured", float64(len(l)), "")
	res.Add("setup grants/s", setupRate, "/s")
	cpu.Report(res)
	res.Note(fmt.Sprintf("every reply echoed its batch in order and renewed all %d leases it listed, none lost; all leases released afterwards", per))
	return res, nil
}

// renewLoop is one session's stream: it keeps KeepAliveInFlight batches in
// flight until the window ends, checks every reply, and returns the round
// trips of the batches sent and answered in the window.
func (b *bencher) renewLoop(ctx context.Context, i int, h holding, w Window) (Latencies, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	api, _, err := b.c.client(i)
	if err != nil {
		return nil, err
	}
	stream, err := api.KeepAlive(ctx)
	if err != nil {
		return nil, fmt.Errorf("session %s: opening KeepAlive: %w", h.s.id, err)
	}
	refs := make([]*grantorpb.LeaseRef, len(h.leases))
	for j, l := range h.leases {
		refs[j] = &grantorpb.LeaseRef{Lease: l.lease, Token: l.token}
	}
	var (
		lat      Latencies
		batch    uint64
		sentAt   []time.Time // of the batches in flight, oldest first
		answered uint64
	)
	send := func() error {
		batch++
		sentAt = append(sentAt, time.Now())
		return stream.Send(&grantorpb.KeepAliveRequest{Session: h.s.id, Batch: batch, Leases: refs})
	}
	for range b.cfg.KeepAliveInFlight {
		if err := send(); err != nil {
			return nil, b.streamErr(h, stream, err)
		}
	}
	for len(sentAt) > 0 {
		resp, err := stream.Recv()
		if err != nil {
			return nil, fmt.Errorf("session %s: KeepAlive: %w", h.s.id, err)
		}
		now := time.Now()
		answered++
		if resp.Batch != answered {
			return nil, fmt.Errorf("%w: session %s got the reply to batch %d, expected %d", ErrViolation, h.s.id, resp.Batch, answered)
		}
		if err := renewedAll(refs, resp); err != nil {
			return nil, fmt.Errorf("session %s batch %d: %w", h.s.id, resp.Batch, err)
		}
		if w.Holds(sentAt[0], now) {
			lat = append(lat, now.Sub(sentAt[0]))
		}
		sentAt = sentAt[1:]
		if now.Before(w.End) {
			if err := send(); err != nil {
				return nil, b.streamErr(h, stream, err)
			}
		}
	}
	if err := stream.CloseSend(); err != nil {
		return nil, err
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("session %s: KeepAlive did not end cleanly: %v", h.s.id, err)
	}
	return lat, nil
}

// streamErr turns a failed Send into the stream's status, which Recv
// returns.
func (b *bencher) streamErr(h holding, stream grantorpb.Grantor_KeepAliveClient, err error) error {
	if errors.Is(err, io.EOF) {
		_, err = stream.Recv()
	}
	return fmt.Errorf("session %s: KeepAlive: %w", h.s.id, err)
}

// renewedAll checks that resp renewed exactly sent, in any order, and lost
// none.
func renewedAll(sent []*grantorpb.LeaseRef, resp *grantorpb.KeepAliveResponse) error {
	if len(resp.Lost) > 0 {
		return fmt.Errorf("%w: %d of %d held leases reported lost, first %s token %d",
			ErrViolation, len(resp.Lost), len(sent), resp.Lost[0].Lease, resp.Lost[0].Token)
	}
	if len(resp.Renewed) != len(sent) {
		return fmt.Errorf("%w: %d of %d leases renewed", ErrViolation, len(resp.Renewed), len(sent))
	}
	inOrder := true
	for j, r := range resp.Renewed {
		if r.Lease != sent[j].Lease || r.Token != sent[j].Token {
			inOrder = false
			break
		}
	}
	if inOrder {
		return nil
	}
	want := make(map[string]uint64, len(sent))
	for _, s := range sent {
		want[s.Lease] = s.Token
	}
	for _, r := range resp.Renewed {
		if tok, ok := want[r.Lease]; !ok || tok != r.Token {
			return fmt.Errorf("%w: renewed %s token %d, which was not asked for", ErrViolation, r.Lease, r.Token)
		}
		delete(want, r.Lease)
	}
	return nil
}
