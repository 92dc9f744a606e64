package grantor

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/leaseside/leaseside/grantor/pki"
	"github.com/leaseside/leaseside/internal/connlimit"
)

// Raft over mutual TLS.
//
// Outbound, raft's own NetworkTransport pools and drives the connections;
// its stream layer (tlsDialer) dials TLS and refuses a server whose
// certificate does not name the server raft meant: contactTransport hands
// it "ID@ADDR" (dialTarget) instead of the bare address, so the check is
// exact even when an address moves from one server to another.
//
// Inbound, this file runs the accept loop itself. Each connection must
// present a grantor certificate from the cluster CA (the handshake checks
// it), and is then served by a NetworkTransport of its own, whose RPCs
// are checked before raft sees them: the server ID in each RPC's header
// must equal the certificate's name. That check needs to know which
// connection an RPC came on, which one shared NetworkTransport does not
// tell (raft.RPC carries no peer), hence one decoder per connection.
// That name must then be a member (raftGate, raft_members.go). The
// alternative, a handshake of our own in which the dialer states the ID
// it speaks for, would check a claim the dialer makes once, not the ID
// raft then acts on in every header (a candidate's vote request, a
// leader's term): a grantor with a valid certificate could still speak
// for another. Here a grantor certificate speaks only for its own name:
// it cannot vote twice, nor depose a leader in another's name.

// Limits of the TLS raft transport. Inbound connections not yet
// authenticated are bounded in total and per source address. When a
// bound is reached, a newcomer evicts the oldest of them that has not
// sent a byte, or else the oldest (connlimit): it is never refused. A
// grantor's TLS client speaks at once, so it gets through however many
// silent connections a stranger holds, also from a grantor's own address;
// and one that speaks and then stalls holds its slot only until newer
// ones need it. The bounds are large, since a silent connection is cheap
// (a socket and a goroutine, a few KiB): a grantor's connection is lost
// only if a stranger opens raftMaxHandshakesPerSource connections from
// its address before the grantor's first bytes arrive. Refusals are
// aggregated per source and reason (connlimit.Reporter): a flood makes a
// bounded number of audit lines.
const (
	// raftHandshakeTimeout bounds an inbound TLS handshake: raft peers
	// are on a LAN, where one takes milliseconds.
	raftHandshakeTimeout = 2 * time.Second
	// raftMaxHandshakes bounds inbound connections not yet authenticated.
	raftMaxHandshakes = 1024
	// raftMaxHandshakesPerSource bounds them from one address.
	raftMaxHandshakesPerSource = 256
	// raftRefusalInterval is how often refusals are summed up per source
	// and reason in the audit trail.
	raftRefusalInterval = 10 * time.Second
)

// dialTarget is the address contactTransport hands the TLS stream layer
// for server id at addr.
func dialTarget(id raft.ServerID, addr raft.ServerAddress) raft.ServerAddress {
	return raft.ServerAddress(string(id) + "@" + string(addr))
}

// splitDialTarget undoes dialTarget. A raft address is host:port, so the
// last '@' separates them.
func splitDialTarget(t raft.ServerAddress) (id, addr string, ok bool) {
	i := strings.LastIndexByte(string(t), '@')
	if i <= 0 {
		return "", "", false
	}
	return string(t[:i]), string(t[i+1:]), true
}

// tlsTransport is raft's transport over mutual TLS; see the top of this
// file.
type tlsTransport struct {
	*raft.NetworkTransport // outbound, and LocalAddr

	ln        net.Listener
	dialer    *tlsDialer
	serverCfg *tls.Config
	log       *slog.Logger
	refusals  *connlimit.Reporter
	pending   *connlimit.Limiter // inbound connections not yet authenticated
	gate      *raftGate          // admits only members (raft_members.go)

	consumer  chan raft.RPC
	heartbeat atomic.Pointer[func(raft.RPC)]

	mu      sync.Mutex
	inbound map[*oneConn]struct{}
	// nonMembers counts the inbound connections of each grantor
	// certificate that spoke for no member when it connected.
	nonMembers map[string]int
	closed     bool
	shutdown   chan struct{}
	wg         sync.WaitGroup
}

var (
	_ baseTransport    = (*tlsTransport)(nil)
	_ raft.StreamLayer = (*tlsDialer)(nil)
	_ raft.StreamLayer = (*oneConn)(nil)
)

// newTLSTransport binds addr (a concrete IP, as NewTCPTransport wants)
// and serves raft on it over TLS. refused is told of the inbound
// connections and RPCs it refuses: at once for the first of a source
// (an IP address) and reason, then their count every raftRefusalInterval.
// gate admits an RPC's sender once its certificate matched the header.
func newTLSTransport(addr string, tc *pki.Configurator, cfg raft.NetworkTransportConfig, log *slog.Logger, gate *raftGate, refused func(source, reason string, count int)) (*tlsTransport, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; ip.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("raft address %s is not advertisable: give a concrete IP", addr)
	}
	t := &tlsTransport{
		ln:         ln,
		serverCfg:  tc.ServerConfig(pki.ALPNRaft, pki.Peer{Roles: []string{pki.RoleGrantor}}),
		log:        log,
		gate:       gate,
		refusals:   connlimit.NewReporter(raftRefusalInterval, refused),
		consumer:   make(chan raft.RPC),
		inbound:    map[*oneConn]struct{}{},
		nonMembers: map[string]int{},
		shutdown:   make(chan struct{}),
	}
	t.pending = connlimit.New(connlimit.Limits{Total: raftMaxHandshakes, PerSource: raftMaxHandshakesPerSource, EvictSpoken: true}, t.refusals.Refused)
	t.dialer = &tlsDialer{addr: ln.Addr(), tls: tc, closed: make(chan struct{})}
	cfg.Stream = t.dialer
	t.NetworkTransport = raft.NewNetworkTransportWithConfig(&cfg)
	t.wg.Add(1)
	go t.accept()
	return t, nil
}

// Consumer implements raft.Transport: the RPCs of every inbound
// connection, once checked.
func (t *tlsTransport) Consumer() <-chan raft.RPC { return t.consumer }

// SetHeartbeatHandler implements raft.Transport.
func (t *tlsTransport) SetHeartbeatHandler(cb func(raft.RPC)) { t.heartbeat.Store(&cb) }

// Close implements raft.WithClose: it stops accepting, closes every
// inbound connection and the outbound transport, and waits for the
// inbound handlers.
func (t *tlsTransport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.shutdown)
	for c := range t.inbound {
		c.Close()
	}
	t.mu.Unlock()
	err := errors.Join(t.ln.Close(), t.NetworkTransport.Close())
	t.wg.Wait()
	t.refusals.Close()
	return err
}

// probe dials server id at addr and completes a TLS handshake: it fails
// unless the server there presents a grantor certificate naming id. The
// leader asks it before it adds a grantor gossip told it of.
func (t *tlsTransport) probe(ctx context.Context, id, addr string) error {
	c, err := t.dialer.dial(ctx, dialTarget(raft.ServerID(id), raft.ServerAddress(addr)))
	if err != nil {
		return err
	}
	c.Close() // the handshake said what was asked; how the close went does not matter
	return nil
}

func (t *tlsTransport) accept() {
	defer t.wg.Done()
	var delay time.Duration
	for {
		c, err := t.ln.Accept()
		if err != nil {
			select {
			case <-t.shutdown:
				return
			default:
			}
			// As net/http: back off on errors such as EMFILE.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			t.log.Warn("grantor: raft: accepting a connection", "err", err, "retry_in", delay)
			select {
			case <-time.After(delay):
			case <-t.shutdown:
				return
			}
			continue
		}
		delay = 0
		lc, ok := t.pending.Admit(c)
		if !ok {
			continue
		}
		t.wg.Add(1)
		go t.serve(lc)
	}
}

// serve authenticates one inbound connection and runs a NetworkTransport
// on it until it closes.
func (t *tlsTransport) serve(raw *connlimit.Conn) {
	defer t.wg.Done()
	remote := raw.Source()
	ctx, cancel := context.WithTimeout(context.Background(), raftHandshakeTimeout)
	c := tls.Server(raw, t.serverCfg)
	err := c.HandshakeContext(ctx)
	cancel()
	raw.Release()
	if err != nil {
		raw.Close()
		if !errors.Is(err, net.ErrClosed) { // else evicted, and reported so
			t.refusals.Refused(remote, "TLS handshake: "+handshakeError(err))
		}
		return
	}
	id, err := pki.PeerIdentity(c.ConnectionState())
	if err != nil { // the handshake checked it; not reached
		t.refusals.Refused(remote, err.Error())
		raw.Close()
		return
	}
	// A grantor certificate that speaks for no member (raft_members.go)
	// gets its refusals, but holds few connections and sends little on
	// each: its RPCs are decoded before the gate refuses them.
	// Whether it is a member is asked again at every read: a connection
	// opened by a member that is then removed is bounded from then on.
	member := t.gate.known(id.Name)
	conn := &cappedConn{Conn: c, left: nonMemberBytes, capped: func() bool { return !t.gate.known(id.Name) }, over: func() {
		t.refusals.Refused(remote, fmt.Sprintf("%s, in no raft configuration, sent more than %d bytes on one connection", id, nonMemberBytes))
	}}
	one := &oneConn{Conn: conn, stop: make(chan struct{}), gone: make(chan struct{})}
	t.mu.Lock()
	if t.closed || !member && t.nonMembers[id.Name] >= nonMemberConns {
		closed := t.closed
		t.mu.Unlock()
		if !closed {
			t.refusals.Refused(remote, fmt.Sprintf("%s, in no raft configuration, holds %d connections already", id, nonMemberConns))
		}
		c.Close()
		return
	}
	t.inbound[one] = struct{}{}
	if !member {
		t.nonMembers[id.Name]++
	}
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.inbound, one)
		if !member {
			if t.nonMembers[id.Name]--; t.nonMembers[id.Name] == 0 {
				delete(t.nonMembers, id.Name)
			}
		}
		t.mu.Unlock()
	}()

	sub := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: one,
		Logger: newHCLog(t.log, "raft").Named("transport"),
	})
	peer := id.Name
	check := func(rpc raft.RPC) bool {
		h, ok := rpc.Command.(raft.WithRPCHeader)
		kind, known := rpcKindOf(rpc.Command)
		var reason string
		// A connection that speaks for another, or sends what raft does not,
		// is closed; a non-member's stays open, so that the refusal
		// reaches it (a removed grantor learns from it: raft_members.go),
		// unless the refused RPC was a snapshot, whose data stays unread.
		keep := false
		switch {
		case !ok || string(h.GetRPCHeader().ID) != peer:
			claimed := "(none)"
			if ok {
				claimed = string(h.GetRPCHeader().ID)
			}
			reason = fmt.Sprintf("an RPC speaks for server %q but the connection's certificate is %s", claimed, id)
		case !known:
			reason = fmt.Sprintf("an RPC of unknown type %T", rpc.Command)
		default:
			err := t.gate.admit(peer, kind)
			if err == nil {
				return true
			}
			reason, keep = err.Error(), kind != rpcInstallSnapshot
		}
		t.refusals.Refused(remote, reason)
		rpc.Respond(nil, errors.New("refused: "+reason))
		if !keep {
			one.Close()
		}
		return false
	}
	sub.SetHeartbeatHandler(func(rpc raft.RPC) {
		if !check(rpc) {
			return
		}
		if fn := t.heartbeat.Load(); fn != nil && *fn != nil {
			(*fn)(rpc)
			return
		}
		t.deliver(rpc)
	})
	fwdDone := make(chan struct{})
	go func() {
		defer close(fwdDone)
		for {
			select {
			case rpc := <-sub.Consumer():
				if check(rpc) {
					t.deliver(rpc)
				}
			case <-one.gone:
				return
			}
		}
	}()
	select {
	case <-one.gone:
	case <-t.shutdown:
	}
	sub.Close() // closes one too
	<-fwdDone
}

// handshakeError says why an inbound handshake failed, without the
// connection's addresses (the refusal names its source), so that
// refusals of one kind from one source add up to one audit line.
func handshakeError(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("not finished within %v", raftHandshakeTimeout)
	}
	if op := (*net.OpError)(nil); errors.As(err, &op) {
		return op.Err.Error()
	}
	return err.Error()
}

// deliver hands a checked RPC to raft.
func (t *tlsTransport) deliver(rpc raft.RPC) {
	select {
	case t.consumer <- rpc:
	case <-t.shutdown:
		rpc.Respond(nil, raft.ErrTransportShutdown)
	}
}

// oneConn is the stream layer of one inbound connection's
// NetworkTransport, and the connection it hands it: Accept returns the
// connection once, then blocks until Close.
type oneConn struct {
	net.Conn
	handed   atomic.Bool
	stop     chan struct{} // closed by Close
	gone     chan struct{} // closed when the connection is closed
	stopOnce sync.Once
	goneOnce sync.Once
}

// Accept implements net.Listener.
func (o *oneConn) Accept() (net.Conn, error) {
	if o.handed.CompareAndSwap(false, true) {
		return connCloser{o}, nil
	}
	<-o.stop
	return nil, net.ErrClosed
}

// Close implements net.Listener: it closes the connection too.
func (o *oneConn) Close() error {
	o.stopOnce.Do(func() { close(o.stop) })
	return o.closeConn()
}

func (o *oneConn) closeConn() error {
	var err error
	o.goneOnce.Do(func() {
		err = o.Conn.Close()
		close(o.gone)
	})
	return err
}

// Addr implements net.Listener.
func (o *oneConn) Addr() net.Addr { return o.Conn.LocalAddr() }

// Dial implements raft.StreamLayer; an inbound transport never dials.
func (o *oneConn) Dial(raft.ServerAddress, time.Duration) (net.Conn, error) {
	return nil, errors.New("grantor: an inbound raft connection does not dial")
}

// connCloser is the connection a oneConn hands its transport: closing it
// tells the oneConn.
type connCloser struct{ o *oneConn }

func (c connCloser) Read(b []byte) (int, error)         { return c.o.Conn.Read(b) }
func (c connCloser) Write(b []byte) (int, error)        { return c.o.Conn.Write(b) }
func (c connCloser) Close() error                       { return c.o.closeConn() }
func (c connCloser) LocalAddr() net.Addr                { return c.o.Conn.LocalAddr() }
func (c connCloser) RemoteAddr() net.Addr               { return c.o.Conn.RemoteAddr() }
func (c connCloser) SetDeadline(t time.Time) error      { return c.o.Conn.SetDeadline(t) }
func (c connCloser) SetReadDeadline(t time.Time) error  { return c.o.Conn.SetReadDeadline(t) }
func (c connCloser) SetWriteDeadline(t time.Time) error { return c.o.Conn.SetWriteDeadline(t) }

// tlsDialer is the outbound stream layer: it dials "ID@ADDR" (dialTarget)
// over TLS and accepts only a grantor certificate naming ID. It accepts
// nothing: tlsTransport serves inbound connections itself.
type tlsDialer struct {
	addr      net.Addr
	tls       *pki.Configurator
	closed    chan struct{}
	closeOnce sync.Once
}

// Dial implements raft.StreamLayer.
func (d *tlsDialer) Dial(target raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.dial(ctx, target)
}

func (d *tlsDialer) dial(ctx context.Context, target raft.ServerAddress) (net.Conn, error) {
	id, addr, ok := splitDialTarget(target)
	if !ok {
		return nil, fmt.Errorf("grantor: raft target %q names no server", target)
	}
	td := tls.Dialer{Config: d.tls.ClientConfig(pki.ALPNRaft, pki.Peer{Roles: []string{pki.RoleGrantor}, Name: id})}
	c, err := td.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("grantor: raft: dialing %s at %s: %w", id, addr, err)
	}
	return c, nil
}

// Accept implements net.Listener: it blocks until Close.
func (d *tlsDialer) Accept() (net.Conn, error) {
	<-d.closed
	return nil, net.ErrClosed
}

// Close implements net.Listener.
func (d *tlsDialer) Close() error {
	d.closeOnce.Do(func() { close(d.closed) })
	return nil
}

// Addr implements net.Listener: the address raft advertises.
func (d *tlsDialer) Addr() net.Addr { return d.addr }
