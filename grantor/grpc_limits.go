package grantor

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
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
// progress. These bound the calls per connection (MaxConcurrentStreams),
// the connections in total and per source address, and how long a
// connection may take to authenticate; the connections and calls of each
// identity are charged to its account (account.go: conns, calls).
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

// edgeLimits holds the connection limiter and charges connections and
// calls to their identities' accounts.
type edgeLimits struct {
	conns    *connlimit.Limiter
	refusals *connlimit.Reporter
	accounts *accounts
	// byAddr finds the identityConn of a call's peer address, for
	// chargeAnswer (answer_charge.go); unixConns numbers the connections
	// of a Unix socket, which have no address of their own.
	byAddr    sync.Map
	unixConns atomic.Uint64
}

// newEdgeLimits returns the edge's limits, charging a; refused is told,
// aggregated, of the connections and calls refused.
func newEdgeLimits(a *accounts, refused func(source, reason string, count int)) *edgeLimits {
	e := &edgeLimits{
		refusals: connlimit.NewReporter(grpcRefusalInterval, refused),
		accounts: a,
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
		opts = append(opts, grpc.InTapHandle(e.tap),
			grpc.ChainUnaryInterceptor(e.unaryHold), grpc.ChainStreamInterceptor(e.streamHold))
	}
	return opts
}

// listener bounds the connections ln accepts.
func (e *edgeLimits) listener(ln net.Listener) net.Listener { return e.conns.Listener(ln) }

// callerOf returns the certificate identity of a connection's peer;
// false when it has none, or one of no known role (authz refuses its
// calls).
func callerOf(ai credentials.AuthInfo) (Identity, bool) {
	a, ok := ai.(pki.AuthInfo)
	if !ok {
		return Identity{}, false
	}
	role, err := ParseRole(a.Identity.Role)
	if err != nil {
		return Identity{}, false
	}
	return Identity{Role: role, Name: a.Identity.Name}, true
}

// tap admits a call when its caller's account has room for one more call
// in progress, and charges it until the call's stream ends.
func (e *edgeLimits) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ctx, nil
	}
	who, ok := callerOf(p.AuthInfo)
	if !ok {
		return ctx, nil
	}
	acct, err := e.accounts.charge(who, limCalls, 1)
	if err != nil {
		e.refusals.Refused(who.String(), "too many calls in progress for this certificate")
		return nil, status.Error(codes.ResourceExhausted, err.Error())
	}
	// Given back when the call's stream ends (call_charge.go).
	return e.chargeCall(ctx, acct), nil
}

// credentials wraps c so that each connection is charged to its
// certificate's account: one past the account's conns fails its
// handshake.
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
	who, ok := callerOf(ai)
	if !ok {
		return conn, ai, nil
	}
	e := c.e
	acct, err := e.accounts.charge(who, limConns, 1)
	if err != nil {
		conn.Close()
		e.refusals.Refused(who.String(), "too many connections for this certificate")
		return nil, nil, err
	}
	return newIdentityConn(conn, acct, e), ai, nil
}

func (c limitedCreds) Clone() credentials.TransportCredentials {
	return limitedCreds{c.TransportCredentials.Clone(), c.e}
}
