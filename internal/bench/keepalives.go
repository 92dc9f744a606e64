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
// then has every session open one KeepAlive stream and send keepalives
// that renew the session as a whole (its name, term and the digest of its
// grants), KeepAliveInFlight at a time, as fast as replies come. Every
// reply must echo its batch in order, renew the session, and state the
// digest of exactly the grants the session holds (so no list). A reply
// counts when its batch was sent and answered in the measured window.
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
	res := &Result{Setup: fmt.Sprintf("%d sessions holding %d leases each (%d leases), one KeepAlive stream per session over %d connections, %d batch(es) in flight per stream, every batch renewing its session as a whole; %v measured after %v warmup",
		n, per, n*per, b.cfg.Conns, b.cfg.KeepAliveInFlight, b.cfg.Duration, b.cfg.Warmup)}
	res.addTarget("keepalive messages/s", w.Rate(len(l)), "/s", ">=", 50000)
	res.Add("lease renewals/s", w.Rate(len(l)*per), "/s")
	res.Add("keepalive round trip p50", l.MS(0.50), "ms")
	res.Add("keepalive round trip p99", l.MS(0.99), "ms")
	res.Add("keepalive replies measured", float64(len(l)), "")
	res.Add("setup grants/s", setupRate, "/s")
	cpu.Report(res)
	res.Note(fmt.Sprintf("every reply echoed its batch in order, renewed its session and stated the digest of exactly its %d grants; all leases released afterwards", per))
	return res, nil
}

// renewLoop is one session's stream: it keeps KeepAliveInFlight batches in
// flight until the window ends, checks every reply, and returns the round
// trips of the batches sent and answered in the window.
func (b *bencher) renewLoop(ctx context.Context, i int, h holding, w *Window) (Latencies, error) {
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
	renewal := h.renewal(b.cfg.LeaseTTL)
	var (
		lat      Latencies
		batch    uint64
		sentAt   []time.Time // of the batches in flight, oldest first
		answered uint64
	)
	send := func() error {
		batch++
		sentAt = append(sentAt, time.Now())
		return stream.Send(&grantorpb.KeepAliveRequest{Session: h.s.id, Batch: batch, Sessions: []*grantorpb.SessionRenewal{renewal}})
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
		if err := sessionRenewed(renewal, resp); err != nil {
			return nil, fmt.Errorf("session %s batch %d: %w", h.s.id, resp.Batch, err)
		}
		if w.Holds(sentAt[0], now) {
			lat = append(lat, now.Sub(sentAt[0]))
		}
		sentAt = sentAt[1:]
		if w.Open(now) {
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

// renewal is the keepalive entry that renews h's session as a whole.
func (h holding) renewal(ttl time.Duration) *grantorpb.SessionRenewal {
	tokens := make([]uint64, len(h.leases))
	for j, l := range h.leases {
		tokens[j] = l.token
	}
	return &grantorpb.SessionRenewal{Session: h.s.id, TtlNs: int64(ttl), LeaseSetVersion: grantorpb.LeaseSetDigest(tokens)}
}

// sessionRenewed checks that resp renewed the one session sent and that
// the grantor's digest of its grants is the one sent: it holds exactly
// the session's grants, so it listed none.
func sessionRenewed(sent *grantorpb.SessionRenewal, resp *grantorpb.KeepAliveResponse) error {
	if len(resp.Sessions) != 1 || resp.Sessions[0].Session != sent.Session {
		return fmt.Errorf("%w: the reply answers %d sessions, not session %s", ErrViolation, len(resp.Sessions), sent.Session)
	}
	r := resp.Sessions[0]
	switch {
	case !r.Renewed:
		return fmt.Errorf("%w: session %s not renewed", ErrViolation, sent.Session)
	case r.LeaseSetVersion != sent.LeaseSetVersion || r.Listed:
		return fmt.Errorf("%w: session %s holds other grants than its own (digest %#x, sent %#x; %d listed)",
			ErrViolation, sent.Session, r.LeaseSetVersion, sent.LeaseSetVersion, len(r.Leases))
	}
	return nil
}

// listedAll checks that the session's listed grants are exactly held.
func listedAll(held []held, r *grantorpb.SessionRenewed) error {
	if !r.Renewed || !r.Listed {
		return fmt.Errorf("%w: renewed %v, listed %v", ErrViolation, r.Renewed, r.Listed)
	}
	if len(r.Leases) != len(held) {
		return fmt.Errorf("%w: %d of %d leases listed", ErrViolation, len(r.Leases), len(held))
	}
	want := make(map[string]uint64, len(held))
	for _, h := range held {
		want[h.lease] = h.token
	}
	for _, l := range r.Leases {
		if tok, ok := want[l.Lease]; !ok || tok != l.Token {
			return fmt.Errorf("%w: listed %s token %d, which the session was not granted", ErrViolation, l.Lease, l.Token)
		}
		delete(want, l.Lease)
	}
	return nil
}
