package daemon

import (
	"context"
	"errors"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// The keepalive stream: one per sidecar, to the grantor it takes for the
// leader, carrying the renew loop's batches of every session.

// kaResult is a keepalive reply (matched to its batch by id), or the
// failure of the stream (resp nil), which fails every batch in flight.
type kaResult struct {
	resp *grantorpb.KeepAliveResponse
	err  error
	addr string // the grantor that answered
}

// keepAliveSender owns the daemon's keepalive stream. The renew loop
// hands it batches, several in flight at once (one per session at most),
// and never blocks on the network; replies, in whatever order the grantor
// sends them, and stream failures come back on out.
//
// A receive on reset (a batch went unanswered) drops the current stream
// and the grantor it went to: the next batch opens a stream to another.
// A silent grantor sends no error, so this is the only way off it.
func (g *grantorConn) keepAliveSender(ctx context.Context, in <-chan *grantorpb.KeepAliveRequest, reset <-chan struct{}, out chan<- kaResult) {
	report := func(r kaResult) {
		select {
		case out <- r:
		case <-ctx.Done():
		}
	}
	var cur *kaStream
	defer func() {
		if cur != nil {
			cur.cancel()
		}
	}()
	for {
		var req *grantorpb.KeepAliveRequest
		select {
		case <-ctx.Done():
			return
		case <-reset:
			cur = g.dropKeepAlive(cur)
			continue
		case req = <-in:
			// A reset the loop asked for before it handed on req goes
			// first: req must not leave on the stream it gave up on.
			select {
			case <-reset:
				cur = g.dropKeepAlive(cur)
			default:
			}
		}
		if cur != nil && cur.isDead() {
			cur.cancel()
			cur = nil
		}
		if cur == nil {
			s, err := g.openKeepAlive(ctx, report)
			if err != nil {
				report(kaResult{err: err})
				continue
			}
			cur = s
		}
		req.Session = g.session
		if err := cur.stream.Send(req); err != nil {
			cur.cancel() // its receiver stays quiet: this is the report
			g.failed(cur.addr, err)
			report(kaResult{err: err, addr: cur.addr})
			cur = nil
		}
	}
}

// dropKeepAlive gives up on the keepalive stream cur (nil: none open),
// and on the grantor it went to; it returns nil.
func (g *grantorConn) dropKeepAlive(cur *kaStream) *kaStream {
	if cur != nil {
		cur.cancel()
		g.failed(cur.addr, errSilent)
		g.contacted(cur.addr, errSilent)
	}
	return nil
}

// kaStream is one keepalive stream and its receiving goroutine.
type kaStream struct {
	stream grantorpb.Grantor_KeepAliveClient
	addr   string
	cancel context.CancelFunc
	dead   chan struct{}
}

// errSilent is the failure of a grantor that stopped answering.
var errSilent = errors.New("grantor did not answer in time")

func (s *kaStream) isDead() bool {
	select {
	case <-s.dead:
		return true
	default:
		return false
	}
}

func (g *grantorConn) openKeepAlive(ctx context.Context, report func(kaResult)) (*kaStream, error) {
	api, addr, err := g.client()
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	stream, err := api.KeepAlive(sctx)
	if err != nil {
		cancel()
		g.failed(addr, err)
		return nil, err
	}
	s := &kaStream{stream: stream, addr: addr, cancel: cancel, dead: make(chan struct{})}
	go func() {
		defer close(s.dead)
		for {
			resp, err := stream.Recv()
			if err != nil {
				// A stream the sender dropped (a reset, a failed send)
				// reports nothing: its failure is counted already, and a
				// late report would fail the next batch, on the next
				// stream.
				if sctx.Err() == nil {
					g.failed(addr, err)
					g.contacted(addr, err)
					report(kaResult{err: err, addr: addr})
				}
				return
			}
			g.contacted(addr, nil)
			report(kaResult{resp: resp, addr: addr})
		}
	}()
	return s, nil
}
