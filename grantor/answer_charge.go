package grantor

import (
	"context"
	"net"
	"reflect"
	"slices"
	"strconv"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
)

// identityConn is an authenticated connection counted for its
// certificate until it closes. It also keeps, per HTTP/2 stream, the
// bytes of large answers charged to its account (chargeAnswer) that it
// has not written yet: an answer is paid off by its own stream's DATA
// bytes as they are written, and whatever is left of it when the stream
// ends (its trailers or a reset written, a reset read from the client) or
// the connection closes. Nothing else written pays it off (review
// finding Q1: when any byte written did, the trailers of calls refused at
// once paid for pages that were never sent). Each call that reached a
// handler stays charged to the account's calls until its stream ends
// the same way (call_charge.go).
type identityConn struct {
	net.Conn
	acct    *account
	e       *edgeLimits
	addr    net.Addr // RemoteAddr: one of its own for a Unix socket's
	key     string
	release func()

	// mu guards what follows. Writes and reads each come from one
	// goroutine of grpc-go at a time; the handlers charge.
	mu     sync.Mutex
	closed bool
	owed   map[uint32]int         // stream ID: bytes charged, not yet written
	resets []uint32               // the client's latest resets of streams that owed nothing
	calls  map[uint32]*callCharge // stream ID: its call, charged until the stream ends
	wr, rd frameScanner           // the frames written, and read
}

// maxRecentResets is how many of the client's resets of streams that
// owed nothing identityConn remembers, for an answer charged just after
// its stream was reset: more than a connection's calls run at once.
const maxRecentResets = 64

func newIdentityConn(conn net.Conn, acct *account, e *edgeLimits) *identityConn {
	addr := conn.RemoteAddr()
	if addr == nil || addr.Network() == "unix" {
		// Every client of a Unix socket has the same address (none):
		// chargeAnswer finds a call's connection by the address gRPC
		// puts in the call's peer, which it reads from RemoteAddr.
		addr = &net.UnixAddr{Name: "@conn-" + strconv.FormatUint(e.unixConns.Add(1), 10), Net: "unix"}
	}
	ic := &identityConn{Conn: conn, acct: acct, e: e, addr: addr, key: addr.String(), wr: frameScanner{trailers: true}, rd: frameScanner{skip: h2ClientPreface}}
	ic.release = sync.OnceFunc(func() {
		ic.mu.Lock()
		ic.closed = true
		owed := 0
		for _, n := range ic.owed {
			owed += n
		}
		ic.owed = nil
		calls := ic.calls
		ic.calls = nil
		ic.mu.Unlock()
		acct.refundQueued(owed)
		for _, cc := range calls {
			cc.end(callOnStream)
		}
		e.byAddr.CompareAndDelete(ic.key, ic)
		e.accounts.refund(acct, limConns, 1)
	})
	// A connection of the same address that is still in the map is
	// closing (TCP has one connection per address pair): this one's
	// calls are charged here.
	e.byAddr.Store(ic.key, ic)
	return ic
}

// Write writes p, pays off what it wrote of the answers owed, and ends
// the calls of streams it ended.
func (c *identityConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.mu.Lock()
		paid := 0
		var ended []*callCharge
		c.wr.scan(p[:n], func(id uint32, k int) {
			if o := c.owed[id]; o > 0 {
				k = min(k, o)
				c.payLocked(id, k)
				paid += k
			}
		}, func(id uint32) {
			paid += c.payLocked(id, c.owed[id])
			if cc := c.endCallLocked(id); cc != nil {
				ended = append(ended, cc)
			}
		})
		c.mu.Unlock()
		c.acct.refundQueued(paid)
		endCalls(ended)
	}
	return n, err
}

// Read reads into p, and pays off the answers (and ends the calls) of
// streams the client reset: grpc-go drops what they had left to send.
func (c *identityConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		paid := 0
		var ended []*callCharge
		c.rd.scan(p[:n], func(uint32, int) {}, func(id uint32) {
			if cc := c.endCallLocked(id); cc != nil {
				ended = append(ended, cc)
			}
			if o, ok := c.owed[id]; ok {
				paid += c.payLocked(id, o)
				return
			}
			if len(c.resets) == maxRecentResets {
				c.resets = c.resets[1:]
			}
			c.resets = append(c.resets, id)
		})
		c.mu.Unlock()
		c.acct.refundQueued(paid)
		endCalls(ended)
	}
	return n, err
}

// payLocked takes k bytes off what stream id owes, and returns k. The
// caller holds c.mu and refunds the account.
func (c *identityConn) payLocked(id uint32, k int) int {
	if k <= 0 {
		return 0
	}
	if c.owed[id] -= k; c.owed[id] <= 0 {
		delete(c.owed, id)
	}
	return k
}

// RemoteAddr returns the peer's address, or for a Unix socket's peer one
// that names this connection.
func (c *identityConn) RemoteAddr() net.Addr { return c.addr }

func (c *identityConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// chargeAnswer charges the n bytes of a large answer (a page of Leases
// or Members) about to be sent on the caller's connection to its
// account's queued bytes, until the connection has written them (or the
// call's stream ended), or refuses with a *LimitError; with n 0 it only
// refuses an account at its limit already, before the answer is made.
// grpc-go ends a call once its answer is queued, not sent: an answer its
// caller does not read stays queued at the grantor, charged to nothing
// else. Without it, one operator certificate sending 2,048 listings of
// 4,000 names on its 32 connections and reading none took the leader
// from 112 to 531 MiB resident.
func (e *edgeLimits) chargeAnswer(ctx context.Context, n int) error {
	c := e.connOf(ctx)
	if c == nil {
		return nil // no certificate identity: no account
	}
	acct := c.acct
	if max := acct.limits.QueuedBytes; n == 0 && max > 0 && acct.queued.Load() >= int64(max) {
		acct.refused[limQueuedBytes].Add(1)
		return &LimitError{Identity: acct.id.String(), Limit: limQueuedBytes.String(), Used: int(acct.queued.Load()), Max: max}
	}
	if n == 0 {
		return nil
	}
	s := e.answerStream(ctx)
	if s == nil {
		return nil // a grpc-go whose streams this cannot follow: TestStreamIDOfACall fails
	}
	if err := s.reserve(n); err != nil {
		return err
	}
	return s.owe(ctx, n, n)
}

// connOf returns the connection of ctx's call, nil when it has no
// certificate identity (and so no account).
func (e *edgeLimits) connOf(ctx context.Context) *identityConn {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return nil
	}
	v, ok := e.byAddr.Load(p.Addr.String())
	if !ok {
		return nil
	}
	return v.(*identityConn)
}

// answerStream is the connection and HTTP/2 stream of a call whose
// answers are charged to its caller's queued bytes until they are
// written. A nil *answerStream charges nothing (a call without a
// certificate identity).
type answerStream struct {
	c  *identityConn
	id uint32
}

// answerStream returns the stream of ctx's call, nil when its answers
// are charged to nobody: it has no certificate identity, or a grpc-go
// whose streams this cannot follow (TestStreamIDOfACall fails then).
func (e *edgeLimits) answerStream(ctx context.Context) *answerStream {
	c := e.connOf(ctx)
	if c == nil {
		return nil
	}
	id, ok := streamID(ctx)
	if !ok {
		return nil
	}
	return &answerStream{c: c, id: id}
}

// reserve charges n bytes of an answer being built to the account, or
// refuses with a *LimitError when they would take it past its
// queued_bytes; owe or unreserve gives them back.
func (s *answerStream) reserve(n int) error {
	if s == nil {
		return nil
	}
	return s.c.acct.chargeQueued(n)
}

// unreserve gives back n bytes reserve took.
func (s *answerStream) unreserve(n int) {
	if s != nil {
		s.c.acct.refundQueued(n)
	}
}

// owe charges the n bytes of an answer about to be sent on the stream
// until the connection has written as many of the stream's DATA bytes (or
// the stream ended), turning the reserved bytes of it that reserve took
// into part of that charge. The rest is charged whatever the limit: an
// answer that is sent anyway (a small one, or one reserved while it was
// built) is counted, so that every byte the stream writes pays off bytes
// charged for it, and none of another answer's. It returns ctx's error
// when the call has ended (nothing of it will be sent; nothing stays
// charged).
func (s *answerStream) owe(ctx context.Context, n, reserved int) error {
	if s == nil {
		return nil
	}
	c, acct := s.c, s.c.acct
	acct.queued.Add(int64(n - reserved))
	c.mu.Lock()
	if c.closed || slices.Contains(c.resets, s.id) {
		c.mu.Unlock()
		acct.refundQueued(n)
		return nil // nothing of it will be sent
	}
	if c.owed == nil {
		c.owed = map[uint32]int{}
	}
	c.owed[s.id] += n
	c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		// The call ended (the client reset it, or its deadline passed):
		// its answer will not be sent.
		c.mu.Lock()
		paid := c.payLocked(s.id, c.owed[s.id])
		c.mu.Unlock()
		acct.refundQueued(paid)
		return err
	}
	return nil
}

// streamID returns the HTTP/2 stream ID of ctx's call, which grpc-go
// keeps in the transport stream it puts in the call's context and does
// not export: read by reflection, false when it is not there (a grpc-go
// that changed; TestStreamIDOfACall fails then).
func streamID(ctx context.Context) (uint32, bool) {
	st := grpc.ServerTransportStreamFromContext(ctx)
	if st == nil {
		return 0, false
	}
	v := reflect.ValueOf(st)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return 0, false
	}
	f := v.Elem().FieldByName("id")
	if !f.IsValid() || f.Kind() != reflect.Uint32 {
		return 0, false
	}
	return uint32(f.Uint()), true
}
