package gossip

import (
	"io"
	"log"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/leaseside/leaseside/internal/connlimit"
)

// Bounds of inbound gossip streams (TCP: joins, state syncs). memberlist
// reads a stream's whole encrypted message, up to its own 20 MiB limit,
// before it can decrypt and so authenticate it, and takes any number of
// streams: anyone who reaches the port, without a key, could make a
// member hold 20 MiB per connection (review finding R8-15). These bounds
// apply before anything is checked.
const (
	// DefaultMaxStreamBytes bounds what one inbound stream may send. A
	// state sync carries about 100 to 200 bytes per member (compressed,
	// then encrypted): a cluster of more than about 5,000 members needs
	// more (Config.MaxStreamBytes).
	DefaultMaxStreamBytes = 1 << 20
	// maxStreams bounds the inbound streams held at once; a member
	// syncs with one other at a time, every Timing.PushPullInterval.
	maxStreams = 32
	// maxStreamsPerSource bounds them from one address (an IP; a host
	// may run a grantor and a sidecar).
	maxStreamsPerSource = 8
	// refusalInterval is how often refused streams are summed up in the
	// log, per source and reason.
	refusalInterval = 10 * time.Second
	// peekTimeout bounds how long an inbound stream may take to send its
	// first byte when Config.Prove is set; memberlist's dialers write at
	// once.
	peekTimeout = 5 * time.Second
)

// limitedTransport is memberlist's NetTransport, with inbound streams
// bounded: at most maxStreams at once, maxStreamsPerSource from one
// address (a newcomer evicts a silent one first: connlimit), each at most
// MaxStreamBytes. memberlist's deadline (Timing.TCPTimeout) bounds how
// long one is held.
type limitedTransport struct {
	*memberlist.NetTransport
	lim      *connlimit.Limiter
	prove    func(net.Conn) // Config.Prove
	refusals *connlimit.Reporter
	streams  chan net.Conn
	done     chan struct{} // closed by Shutdown: forward no more
	stopped  chan struct{} // closed once NetTransport stopped
	stopOnce sync.Once
	wg       sync.WaitGroup
}

var _ memberlist.NodeAwareTransport = (*limitedTransport)(nil)

// newLimitedTransport binds host:port (port 0: a free one, the same for
// UDP and TCP, as memberlist does itself) and bounds its inbound streams.
// prove is Config.Prove. mlLog gets memberlist's transport logs, logger
// the refusals.
func newLimitedTransport(host string, port int, maxBytes int64, prove func(net.Conn), logger *slog.Logger, mlLog *log.Logger) (*limitedTransport, error) {
	nc := &memberlist.NetTransportConfig{BindAddrs: []string{host}, BindPort: port, Logger: mlLog}
	tries := 1
	if port == 0 {
		// Binding UDP and TCP on one free port races with other
		// processes; memberlist tries ten times too.
		tries = 10
	}
	var nt *memberlist.NetTransport
	var err error
	for range tries {
		if nt, err = memberlist.NewNetTransport(nc); err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	t := &limitedTransport{
		NetTransport: nt,
		prove:        prove,
		refusals: connlimit.NewReporter(refusalInterval, func(source, reason string, count int) {
			logger.Warn("gossip: refused inbound streams", "source", source, "reason", reason, "count", count)
		}),
		streams: make(chan net.Conn),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	t.lim = connlimit.New(connlimit.Limits{Total: maxStreams, PerSource: maxStreamsPerSource, MaxBytes: maxBytes}, t.refusals.Refused)
	t.wg.Add(1)
	go t.forward()
	return t, nil
}

// StreamCh implements memberlist.Transport: the inbound streams admitted.
func (t *limitedTransport) StreamCh() <-chan net.Conn { return t.streams }

// Shutdown implements memberlist.Transport.
func (t *limitedTransport) Shutdown() error {
	var err error
	t.stopOnce.Do(func() {
		close(t.done)
		// NetTransport's listener hands over a stream it accepted before
		// it stops: forward takes (and closes) those until then.
		err = t.NetTransport.Shutdown()
		close(t.stopped)
		t.wg.Wait()
		t.refusals.Close()
	})
	return err
}

func (t *limitedTransport) forward() {
	defer t.wg.Done()
	for {
		select {
		case c := <-t.NetTransport.StreamCh():
			t.hand(c)
		case <-t.stopped:
			return
		}
	}
}

// hand gives memberlist an inbound stream the limits admit, until
// Shutdown.
func (t *limitedTransport) hand(c net.Conn) {
	select {
	case <-t.done:
		c.Close()
		return
	default:
	}
	lc, ok := t.lim.Admit(c)
	if !ok {
		return
	}
	if t.prove != nil {
		// Reading the first byte waits for the sender: on a goroutine
		// of its own, so a silent stream holds up no other (the bounds
		// above cap how many wait).
		t.wg.Add(1)
		go t.sort(lc)
		return
	}
	t.toMemberlist(lc)
}

// sort reads the first byte of an admitted stream: a TLS handshake goes
// to Config.Prove, anything else to memberlist, the byte put back.
func (t *limitedTransport) sort(c net.Conn) {
	defer t.wg.Done()
	var b [1]byte
	_ = c.SetReadDeadline(time.Now().Add(peekTimeout))
	if _, err := io.ReadFull(c, b[:]); err != nil {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	pc := &peeked{Conn: c, first: b[0], unread: true}
	if b[0] == TLSHandshakeByte {
		t.prove(pc)
		return
	}
	t.toMemberlist(pc)
}

// toMemberlist hands memberlist a stream, or closes it after Shutdown.
func (t *limitedTransport) toMemberlist(lc net.Conn) {
	select {
	case t.streams <- lc:
	case <-t.done:
		lc.Close()
	}
}

// peeked is a stream whose first byte was read (limitedTransport.sort):
// its first Read returns it again.
type peeked struct {
	net.Conn
	first  byte
	unread bool
}

// Read implements net.Conn.
func (p *peeked) Read(b []byte) (int, error) {
	if p.unread && len(b) > 0 {
		p.unread = false
		b[0] = p.first
		return 1, nil
	}
	return p.Conn.Read(b)
}
