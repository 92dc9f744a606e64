package grantor

import (
	"context"
	"slices"
	"sync/atomic"

	"google.golang.org/grpc"
)

// callCharge is one call charged to its caller's calls in progress (the
// tap takes it), given back once: when its stream ends at the transport
// (its trailers or a reset written, a reset read, its connection closed),
// or, for a call whose stream holdCall could not follow, when its context
// ends. grpc-go ends a call's context when its handler returns, but keeps
// its stream, and the answer queued on it, until the answer is written:
// a client that opens no flow-control window kept up to
// MaxConcurrentStreams such streams per connection after their handlers
// returned, charged to nothing (~1.6 KiB each; issue 21, lane k2).
type callCharge struct {
	accts *accounts
	acct  *account
	state atomic.Int32 // callInHandler, callOnStream or callEnded
}

// The states of a callCharge; each moves only forward.
const (
	// callInHandler: given back when the call's context ends.
	callInHandler int32 = iota
	// callOnStream: given back when its stream ends at its connection.
	callOnStream
	// callEnded: given back.
	callEnded
)

// callChargeKey is the context key of a call's *callCharge.
type callChargeKey struct{}

// chargeCall returns ctx carrying a call charged to acct, given back when
// ctx ends unless holdCall moved it onto its stream first.
func (e *edgeLimits) chargeCall(ctx context.Context, acct *account) context.Context {
	cc := &callCharge{accts: e.accounts, acct: acct}
	context.AfterFunc(ctx, func() { cc.end(callInHandler) })
	return context.WithValue(ctx, callChargeKey{}, cc)
}

// end gives the call back when it is in state from.
func (cc *callCharge) end(from int32) {
	if cc.state.CompareAndSwap(from, callEnded) {
		cc.accts.refund(cc.acct, limCalls, 1)
	}
}

// holdCall moves ctx's call charge onto its stream: it is then given back
// when the stream ends at its connection, not when the handler returns.
// A call whose stream already ended (reset, or its connection closed), or
// that this cannot follow, stays given back with its context.
func (e *edgeLimits) holdCall(ctx context.Context) {
	cc, _ := ctx.Value(callChargeKey{}).(*callCharge)
	if cc == nil {
		return
	}
	s := e.answerStream(ctx)
	if s == nil {
		return
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || slices.Contains(c.resets, s.id) || !cc.state.CompareAndSwap(callInHandler, callOnStream) {
		return
	}
	if c.calls == nil {
		c.calls = map[uint32]*callCharge{}
	}
	c.calls[s.id] = cc
}

// endCallLocked takes stream id's call off the connection, and returns it
// (nil when there is none) for the caller to end once it let go of c.mu.
func (c *identityConn) endCallLocked(id uint32) *callCharge {
	cc := c.calls[id]
	if cc != nil {
		delete(c.calls, id)
	}
	return cc
}

// endCalls gives back the calls of streams that ended.
func endCalls(ccs []*callCharge) {
	for _, cc := range ccs {
		cc.end(callOnStream)
	}
}

// unaryHold and streamHold hold every call that reaches a handler on its
// stream (holdCall).
func (e *edgeLimits) unaryHold(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	e.holdCall(ctx)
	return handler(ctx, req)
}

func (e *edgeLimits) streamHold(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	e.holdCall(ss.Context())
	return handler(srv, ss)
}
