package attack

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/protobuf/proto"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// Fill has one certificate's sidecar hold n distinct leases of nameLen
// bytes (prefix/i/xxx...), of term ttl, acquired by workers sessions side
// by side; the operator floods list them. It returns the first error.
func Fill(ctx context.Context, c grantorpb.GrantorClient, prefix string, n, nameLen, workers int, ttl time.Duration) error {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		mu   sync.Mutex
		err  error
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := fmt.Sprintf("%s-fill-%d", prefix, w)
			for seq := uint64(1); ; seq++ {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				a, e := c.Acquire(ctx, &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: session, Seq: seq, FirstUnacked: seq},
					Lease: name(prefix, i, nameLen), Owner: "o", TtlNs: int64(ttl)})
				if e == nil && !a.Granted {
					e = fmt.Errorf("%s not granted", name(prefix, i, nameLen))
				}
				if e != nil {
					mu.Lock()
					err = e
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return err
}

// OperatorCalls makes, until d has passed, every call an operator may make
// that changes nothing or is refused, as fast as the grantor answers,
// from workers goroutines on each of cs (one connection each): Revokes of
// names nothing holds, RemoveServers of servers that are not members,
// Members, CheckTokens of names nothing holds, and Leases listings of a
// prefix nothing has. (Leave is left out: it stops the grantor, as an
// operator may.) Sent counts calls.
func OperatorCalls(ctx context.Context, cs []grantorpb.GrantorClient, prefix string, d time.Duration, workers int) Result {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	cnt := newCounter()
	var wg sync.WaitGroup
	for ci, c := range cs {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					unknown := fmt.Sprintf("%s/%d/%d/%d", prefix, ci, w, i)
					var err error
					switch i % 5 {
					case 0:
						_, err = c.Revoke(ctx, &grantorpb.RevokeRequest{Lease: unknown})
					case 1:
						_, err = c.RemoveServer(ctx, &grantorpb.RemoveServerRequest{NodeId: unknown})
					case 2:
						_, err = c.Members(ctx, &grantorpb.MembersRequest{})
					case 3:
						_, err = c.CheckToken(ctx, &grantorpb.CheckTokenRequest{Lease: unknown, Token: 1})
					case 4:
						_, err = c.Leases(ctx, &grantorpb.LeasesRequest{Prefix: unknown + "/"})
					}
					if ctx.Err() != nil {
						return
					}
					cnt.sent.Add(1)
					cnt.add(err)
				}
			}()
		}
	}
	wg.Wait()
	return cnt.result()
}

// UnreadCalls is a flood of whole unary calls whose answers are never
// read.
type UnreadCalls struct {
	// Conns is the connections that finished their handshake; Calls the
	// calls sent on them whole.
	Conns, Calls int64
	openConns
}

// openConns are a flood's connections, left open for the grantor to hold
// what it answered on them.
type openConns struct{ conns []net.Conn }

// Close closes the flood's connections.
func (o *openConns) Close() {
	for _, c := range o.conns {
		c.Close()
	}
}

// grpcMessage returns req as gRPC frames it in a request's DATA: a
// compression flag (0) and the length, then the message.
func grpcMessage(req proto.Message) ([]byte, error) {
	msg, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	body := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(body[1:5], uint32(len(msg)))
	copy(body[5:], msg)
	return body, nil
}

// SendUnread opens conns HTTP/2 connections to addr with cfg (a client
// certificate of one identity) and sends perConn unary calls of method
// with the request req on each, whole, and never reads anything the
// grantor answers: its answers wait at the grantor for a window the
// client never opens. It returns once every call is sent (or a write
// blocked for a second: the grantor stopped reading), with the
// connections open; Close closes them.
func SendUnread(ctx context.Context, addr string, cfg *tls.Config, method string, req proto.Message, conns, perConn int) (*UnreadCalls, error) {
	body, err := grpcMessage(req)
	if err != nil {
		return nil, err
	}
	var (
		mu    sync.Mutex
		u     = &UnreadCalls{}
		wg    sync.WaitGroup
		calls atomic.Int64
	)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := tls.Dialer{Config: cfg}
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return
			}
			mu.Lock()
			u.conns = append(u.conns, c)
			u.Conns++
			mu.Unlock()
			w := &deadlineWriter{c: c}
			if _, err := w.Write([]byte(http2.ClientPreface)); err != nil {
				return
			}
			fr := http2.NewFramer(w, c)
			if fr.WriteSettings() != nil {
				return
			}
			hw := newCallHeaders(fr, method, addr)
			for k := range perConn {
				id := uint32(2*k + 1)
				if hw.write(id) != nil {
					return
				}
				if fr.WriteData(id, true, body) != nil {
					return
				}
				calls.Add(1)
			}
		}()
	}
	wg.Wait()
	u.Calls = calls.Load()
	return u, ctx.Err()
}

// deadlineWriter fails a write to c that blocks for a second (the
// grantor stopped reading).
type deadlineWriter struct{ c net.Conn }

func (w *deadlineWriter) Write(p []byte) (int, error) {
	_ = w.c.SetWriteDeadline(time.Now().Add(time.Second))
	return w.c.Write(p)
}
