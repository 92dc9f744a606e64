package grantor

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/leaseside/leaseside/grantor/pki"
	"github.com/leaseside/leaseside/internal/connlimit"
)

// Limits at the gRPC edge (review finding R8-14). grpc-go reads a call's
// request message whole before any handler or interceptor runs, raising
// the stream's flow-control window to the size the message declares, so
// what an unfinished call can make the grantor hold is its message size
// (Config.MaxRecvMsgSize), and the total is that times the calls in
// progress. These bound the calls, per connection (MaxConcurrentStreams)
// and per identity, the connections, in total, per source address and per
// identity, and how long a connection may take to authenticate.
const (
	// grpcHandshakeTimeout bounds a connection's TLS handshake (gRPC's
	// default is 120 s).
	grpcHandshakeTimeout = 5 * time.Second
	// grpcMaxConns bounds the gRPC connections held at once; a newcomer
	// past it evicts one that has not sent a byte (connlimit), else it is
	// refused.
	grpcMaxConns = 16384
	// grpcMaxConnsPerSource bounds them from one address.
	grpcMaxConnsPerSource = 256
	// grpcMaxConnsPerIdentity bounds them per certificate (role and
	// name), once authenticated: a sidecar keeps one to each grantor,
	// `leaseside bench` eight.
	grpcMaxConnsPerIdentity = 32
	// grpcMaxCallsPerIdentity bounds the calls in progress per
	// certificate, over all its connections: with MaxRecvMsgSize, what
	// one certificate can make the grantor hold. A sidecar's waiting
	// acquires and streams count.
	grpcMaxCallsPerIdentity = 2048
	// A connection is pinged after grpcKeepaliveTime without traffic
	// and closed when the ping is not answered within
	// grpcKeepaliveTimeout, so that peers that vanished free their
	// slots. A client may ping at most every grpcMinPingInterval.
	grpcKeepaliveTime    = 30 * time.Second
	grpcKeepaliveTimeout = 10 * time.Second
	grpcMinPingInterval  = 10 * time.Second
	// grpcRefusalInterval is how often refused connections are summed up
	// in the log, per source and reason.
	grpcRefusalInterval = 10 * time.Second
)

// edgeLimits holds the gRPC edge's per-identity counts and the
// connection limiter.
type edgeLimits struct {
	conns    *connlimit.Limiter
	refusals *connlimit.Reporter

	mu        sync.Mutex
	idConns   map[string]int // authenticated connections, per identity
	idCalls   map[string]int // calls in progress, per identity
	maxConns  int
	maxCalls  int
	onRefused func(who, reason string)
}

// newEdgeLimits returns the edge's limits; refused is told, aggregated,
// of the connections and calls refused.
func newEdgeLimits(refused func(source, reason string, count int)) *edgeLimits {
	e := &edgeLimits{
		refusals: connlimit.NewReporter(grpcRefusalInterval, refused),
		idConns:  map[string]int{},
		idCalls:  map[string]int{},
		maxConns: grpcMaxConnsPerIdentity,
		maxCalls: grpcMaxCallsPerIdentity,
	}
	e.conns = connlimit.New(connlimit.Limits{Total: grpcMaxConns, PerSource: grpcMaxConnsPerSource}, e.refusals.Refused)
	return e
}

// close flushes the refusals.
func (e *edgeLimits) close() { e.refusals.Close() }

// serverOptions are the gRPC server's options that bound what a caller
// can make it hold; tls adds the per-identity limits (without TLS every
// caller is the same identity).
func (e *edgeLimits) serverOptions(maxStreams uint32, tls bool) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxConcurrentStreams(maxStreams),
		grpc.ConnectionTimeout(grpcHandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: grpcKeepaliveTime, Timeout: grpcKeepaliveTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: grpcMinPingInterval, PermitWithoutStream: true}),
	}
	if tls {
		opts = append(opts, grpc.InTapHandle(e.tap))
	}
	return opts
}

// listener bounds the connections ln accepts.
func (e *edgeLimits) listener(ln net.Listener) net.Listener { return e.conns.Listener(ln) }

// callerOf returns the certificate identity of a connection's peer, ""
// when it has none.
func callerOf(ai credentials.AuthInfo) string {
	if a, ok := ai.(pki.AuthInfo); ok {
		return a.Identity.Role + "/" + a.Identity.Name
	}
	return ""
}

// tap admits a call when its caller has fewer than maxCalls in progress,
// and counts it until the call ends.
func (e *edgeLimits) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ctx, nil
	}
	who := callerOf(p.AuthInfo)
	if who == "" {
		return ctx, nil
	}
	e.mu.Lock()
	if e.idCalls[who] >= e.maxCalls {
		e.mu.Unlock()
		e.refusals.Refused(who, "too many calls in progress for this certificate")
		return nil, status.Errorf(codes.ResourceExhausted, "grantor: %s has %d calls in progress, the most one certificate may", who, e.maxCalls)
	}
	e.idCalls[who]++
	e.mu.Unlock()
	// The stream's context ends with the call, however it ends.
	context.AfterFunc(ctx, func() { e.release(e.idCalls, who) })
	return ctx, nil
}

func (e *edgeLimits) release(counts map[string]int, who string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if counts[who]--; counts[who] <= 0 {
		delete(counts, who)
	}
}

// credentials wraps c so that a certificate holds at most maxConns
// connections at once: one more fails its handshake.
func (e *edgeLimits) credentials(c credentials.TransportCredentials) credentials.TransportCredentials {
	return limitedCreds{c, e}
}

type limitedCreds struct {
	credentials.TransportCredentials
	e *edgeLimits
}

func (c limitedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, ai, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return nil, nil, err
	}
	who := callerOf(ai)
	if who == "" {
		return conn, ai, nil
	}
	e := c.e
	e.mu.Lock()
	if e.idConns[who] >= e.maxConns {
		e.mu.Unlock()
		conn.Close()
		e.refusals.Refused(who, "too many connections for this certificate")
		return nil, nil, fmt.Errorf("grantor: %s holds %d gRPC connections, the most one certificate may", who, e.maxConns)
	}
	e.idConns[who]++
	e.mu.Unlock()
	return &identityConn{Conn: conn, release: sync.OnceFunc(func() { e.release(e.idConns, who) })}, ai, nil
}

func (c limitedCreds) Clone() credentials.TransportCredentials {
	return limitedCreds{c.TransportCredentials.Clone(), c.e}
}

// identityConn is an authenticated connection counted for its
// certificate until it closes.
type identityConn struct {
	net.Conn
	release func()
}

func (c *identityConn) Close() error {
	c.release()
	return c.Conn.Close()
}
