package hosts

import (
	"context"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// handshakes records every connection the simulated hosts open to a
// grantor: when its handshake (TLS, or none in plain text) began, how
// long it took, and the grantor. The hosts' sidecars dial through
// countingCreds, so what is recorded is what they did, not a model of it.
type handshakes struct {
	mu  sync.Mutex
	all []handshake
}

type handshake struct {
	Addr  string        `json:"addr"`
	Start time.Time     `json:"start"`
	Took  time.Duration `json:"took"`
	Err   bool          `json:"err,omitempty"`
}

// since returns the handshakes begun at or after t.
func (h *handshakes) since(t time.Time) []handshake {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []handshake
	for _, x := range h.all {
		if !x.Start.Before(t) {
			out = append(out, x)
		}
	}
	return out
}

// countingCreds are the sidecars' transport credentials, recording each
// client handshake in h.
type countingCreds struct {
	credentials.TransportCredentials
	h *handshakes
}

func newCountingCreds(c credentials.TransportCredentials, h *handshakes) countingCreds {
	if c == nil {
		c = insecure.NewCredentials()
	}
	return countingCreds{c, h}
}

func (c countingCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	t0 := time.Now()
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	x := handshake{Addr: raw.RemoteAddr().String(), Start: t0, Took: time.Since(t0), Err: err != nil}
	c.h.mu.Lock()
	c.h.all = append(c.h.all, x)
	c.h.mu.Unlock()
	return conn, info, err
}

func (c countingCreds) Clone() credentials.TransportCredentials {
	return countingCreds{c.TransportCredentials.Clone(), c.h}
}

// sourceDialer dials from source address src (a loopback address of the
// simulated host's own), as a host dials from its own address.
func sourceDialer(src net.IP) func(ctx context.Context, addr string) (net.Conn, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: src}}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr)
	}
}

// sourceAddr is the loopback source address of host i: 127.1.x.y.
func sourceAddr(i, sources int) net.IP {
	s := i % sources
	return net.IPv4(127, byte(1+s/250), byte(s%250), 1).To4()
}
