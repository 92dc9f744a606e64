package daemon

import (
	"context"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// faults says how often a faultProxy spoils a message, each a fraction in
// [0, 1], and how long a delay may be.
type faults struct {
	// DelayRequest holds a unary request before passing it on (a slow
	// network on the way in).
	DelayRequest float64
	// DropReply passes a unary request on, lets the grantor apply it, and
	// answers Unavailable instead of its reply (the reply was lost): the
	// sidecar retries with the same request id.
	DropReply float64
	// DelayKeepAlive holds a keepalive reply before passing it on.
	DelayKeepAlive float64
	// DropKeepAlive never passes a keepalive reply on: the sidecar's
	// batch times out and it opens a new stream.
	DropKeepAlive float64
	// MaxDelay bounds every delay.
	MaxDelay time.Duration
}

// faultProxy is a gRPC grantor that relays to a real one and spoils what
// passes through it, from a seeded source, so that the sidecar meets
// retries, duplicates and silence against the real grantor's answers. It
// counts what it spoiled.
type faultProxy struct {
	grantorpb.UnimplementedGrantorServer
	up grantorpb.GrantorClient
	f  faults

	mu  sync.Mutex
	rng *rand.Rand

	delayed, dropped atomic.Uint64
}

// startFaultProxy serves a faultProxy in front of the grantor at upstream
// and returns its address.
func startFaultProxy(t *testing.T, upstream string, f faults, seed uint64) (string, *faultProxy) {
	t.Helper()
	p := newFaultProxy(t, upstream, f, seed)
	return serveGrantorAPI(t, p), p
}

// newFaultProxy is a faultProxy relaying to the grantor at upstream, not
// yet served.
func newFaultProxy(t *testing.T, upstream string, f faults, seed uint64) *faultProxy {
	t.Helper()
	cc, err := grpc.NewClient(upstream, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &faultProxy{up: grantorpb.NewGrantorClient(cc), f: f, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// serveGrantorAPI serves srv as a grantor on a loopback port until the
// test ends, and returns its address.
func serveGrantorAPI(t *testing.T, srv grantorpb.GrantorServer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	grantorpb.RegisterGrantorServer(gs, srv)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	return ln.Addr().String()
}

// roll reports whether an event of probability prob happens, and a delay
// up to MaxDelay.
func (p *faultProxy) roll(prob float64) (bool, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.Float64() < prob, time.Duration(p.rng.Int64N(int64(p.f.MaxDelay) + 1))
}

// delay sleeps d, or until ctx ends. It injects latency, it waits for no
// condition.
func delay(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// unary relays one call with the unary faults.
func unary[Req, Resp any](ctx context.Context, p *faultProxy, req Req, call func(context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	if ok, d := p.roll(p.f.DelayRequest); ok {
		p.delayed.Add(1)
		delay(ctx, d)
	}
	resp, err := call(ctx, req)
	if ok, _ := p.roll(p.f.DropReply); ok && err == nil {
		p.dropped.Add(1)
		var zero Resp
		return zero, status.Error(codes.Unavailable, "fault proxy: reply dropped")
	}
	return resp, err
}

func (p *faultProxy) Acquire(ctx context.Context, req *grantorpb.AcquireRequest) (*grantorpb.AcquireResponse, error) {
	return unary(ctx, p, req, p.up.Acquire)
}

func (p *faultProxy) Release(ctx context.Context, req *grantorpb.ReleaseRequest) (*grantorpb.ReleaseResponse, error) {
	return unary(ctx, p, req, p.up.Release)
}

func (p *faultProxy) Members(ctx context.Context, req *grantorpb.MembersRequest) (*grantorpb.MembersResponse, error) {
	return p.up.Members(ctx, req)
}

// KeepAlive relays a keepalive stream: requests as they come, replies
// delayed or dropped.
func (p *faultProxy) KeepAlive(down grantorpb.Grantor_KeepAliveServer) error {
	ctx, cancel := context.WithCancel(down.Context())
	defer cancel()
	up, err := p.up.KeepAlive(ctx)
	if err != nil {
		return err
	}
	errc := make(chan error, 2)
	go func() {
		for {
			req, err := down.Recv()
			if err != nil {
				errc <- err
				return
			}
			if err := up.Send(req); err != nil {
				errc <- err
				return
			}
		}
	}()
	// Replies may be delayed on goroutines of their own; none is sent
	// after the handler returned.
	var sendMu sync.Mutex
	closed := false
	send := func(resp *grantorpb.KeepAliveResponse) {
		sendMu.Lock()
		defer sendMu.Unlock()
		if !closed {
			down.Send(resp)
		}
	}
	go func() {
		for {
			resp, err := up.Recv()
			if err != nil {
				errc <- err
				return
			}
			if drop, _ := p.roll(p.f.DropKeepAlive); drop {
				p.dropped.Add(1)
				continue
			}
			if late, d := p.roll(p.f.DelayKeepAlive); late {
				p.delayed.Add(1)
				go func() {
					delay(ctx, d)
					send(resp)
				}()
				continue
			}
			send(resp)
		}
	}()
	err = <-errc
	cancel()
	sendMu.Lock()
	closed = true
	sendMu.Unlock()
	return err
}

// Watch relays a holder watch stream as it is, both ways.
func (p *faultProxy) Watch(down grantorpb.Grantor_WatchServer) error {
	ctx, cancel := context.WithCancel(down.Context())
	defer cancel()
	up, err := p.up.Watch(ctx)
	if err != nil {
		return err
	}
	errc := make(chan error, 2)
	go func() {
		for {
			req, err := down.Recv()
			if err == nil {
				err = up.Send(req)
			}
			if err != nil {
				errc <- err
				return
			}
		}
	}()
	go func() {
		for {
			ev, err := up.Recv()
			if err == nil {
				err = down.Send(ev)
			}
			if err != nil {
				errc <- err
				return
			}
		}
	}()
	return <-errc
}
