package ipc

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
)

// Limits bound what one local user can make the server hold. A user who
// reaches one gets resource_exhausted and nothing else changes; the
// daemon keeps answering everyone else.
type Limits struct {
	// ConnsPerUID is how many connections one uid may have open; the
	// next is answered with one resource_exhausted line and closed.
	// Default 256.
	ConnsPerUID int
	// InFlightPerUID is how many requests that wait on the network
	// (acquire, release, renew, members) one uid may have in flight
	// over all its connections; more are answered with
	// resource_exhausted at once. Default 1024.
	InFlightPerUID int
	// QueueBytes is how many bytes of replies and events may wait for a
	// connection's reader. Past it the server stops reading the
	// connection's requests until the client has read (backpressure),
	// and leaves out the events a client can do without (renewed,
	// acquired, clock events; never lost, released, shortened or
	// owner_gone). A connection that has twice as much unread when an
	// event it cannot be spared comes (a watcher of a busy host that
	// does not read) is closed, with the reason logged: it is too far
	// behind to be told the truth, and what it costs stays bounded.
	// Default 256 KiB.
	QueueBytes int
	// QueueBytesPerUID is how many bytes of replies and events may wait
	// for the readers of one uid's connections together. Past it, none
	// of that uid's connections is read from until its connections are
	// back under it, and they get only the events they cannot do without;
	// one of them with something unread when such an event comes while
	// the uid has twice as much unread is closed, with the reason logged.
	// What one user can make the server hold is thus this, not
	// QueueBytes times ConnsPerUID. Default 4 MiB.
	QueueBytesPerUID int
	// StallTimeout is how long a client may leave its replies unread,
	// with some queued, before it is disconnected (and the reason
	// logged). Default 30s.
	StallTimeout time.Duration
}

// Defaults for Limits.
const (
	DefaultConnsPerUID      = 256
	DefaultInFlightPerUID   = 1024
	DefaultQueueBytes       = 256 << 10
	DefaultQueueBytesPerUID = 4 << 20
	DefaultStallTimeout     = 30 * time.Second
)

func (l Limits) withDefaults() Limits {
	if l.ConnsPerUID <= 0 {
		l.ConnsPerUID = DefaultConnsPerUID
	}
	if l.InFlightPerUID <= 0 {
		l.InFlightPerUID = DefaultInFlightPerUID
	}
	if l.QueueBytes <= 0 {
		l.QueueBytes = DefaultQueueBytes
	}
	if l.QueueBytesPerUID <= 0 {
		l.QueueBytesPerUID = DefaultQueueBytesPerUID
	}
	if l.StallTimeout <= 0 {
		l.StallTimeout = DefaultStallTimeout
	}
	return l
}

// Conn is one client connection, as a Handler sees it.
type Conn struct {
	// ID numbers connections from 1 in the order they were accepted.
	ID uint64
	// Cred identifies the peer process (SO_PEERCRED).
	Cred Cred

	budget int
	uid    *uidBytes // what the uid's connections have queued together
	log    *slog.Logger
	nc     *net.UnixConn
	stall  time.Duration
	line   []byte  // the reader's buffer for the replies it writes itself
	req    Request // the reader's request, for the ops it answers itself

	io *sockIO // the socket's raw reads and writes

	// The output queue, guarded by mu. bytes counts the encoded lines
	// queued or being written (and is added to uid's count); settled is
	// set once the connection ended and its bytes were taken off uid's
	// count, after which nothing is queued; writing is set while a line is written
	// (by the writer, or by the reader for a reply it writes itself);
	// wake tells the writer there is something, space tells the reader
	// that bytes fell to the budget (both 1-buffered).
	mu      sync.Mutex
	queue   []queued
	bytes   int
	settled bool
	writing bool
	dropped uint64
	wake    chan struct{}
	space   chan struct{}
	// hold counts the handlers of subscriptions running (holdEvents):
	// the events sent meanwhile wait in held, counted in bytes, until the
	// last one's reply is queued.
	hold int
	held []queued

	gone   chan struct{} // closed when the connection is unusable
	goneMu sync.Once
	onGone func() // unblocks the reader
}

func newConn(id uint64, nc *net.UnixConn, lim Limits, uid *uidBytes, log *slog.Logger) *Conn {
	sio, _ := newSockIO(nc) // nil if nc is closed already: net.Conn's calls fail alike
	return &Conn{ID: id, budget: lim.QueueBytes, uid: uid, log: log, nc: nc, io: sio, stall: lim.StallTimeout,
		wake: make(chan struct{}, 1), space: make(chan struct{}, 1), gone: make(chan struct{})}
}

// Send pushes an event to the client. It never blocks. While the client
// has more than its budget unread, events it can do without are left
// out; the others are queued whatever the budget.
func (c *Conn) Send(ev *Event) { c.enqueue(ev, optional(ev)) }

// optional reports whether a client that does not read can be spared ev:
// a later one says as much (renewed), or it is news of the host, not of
// the client's leases (acquired by others, clock events). What ends or
// shortens a lease is never left out.
func optional(ev *Event) bool {
	switch ev.Event {
	case EventLost, EventReleased, EventShortened, EventOwnerGone:
		return false
	}
	return true
}

// Done is closed when the connection has gone.
func (c *Conn) Done() <-chan struct{} { return c.gone }

// enqueue queues v for the writer, encoded now (its size counts against
// the budget); mayDrop leaves it out when the client is over budget.
func (c *Conn) enqueue(v any, mayDrop bool) {
	if c.isGone() {
		return
	}
	q := queued{v: v, at: boottime()}
	b, err := marshalLine(v)
	if err != nil {
		c.log.Error("ipc: encoding reply", "err", err)
		return
	}
	q.b = b
	c.mu.Lock()
	if c.settled {
		c.mu.Unlock()
		return
	}
	if mayDrop && (c.bytes > c.budget || c.uid.over(1)) {
		c.dropped++
		c.mu.Unlock()
		return
	}
	_, ev := v.(*Event)
	if ev && (c.bytes > 2*c.budget || c.bytes > 0 && c.uid.over(2)) {
		c.mu.Unlock()
		c.overflowed()
		return
	}
	c.addBytesLocked(len(q.b))
	if ev && c.hold > 0 {
		c.held = append(c.held, q)
		c.mu.Unlock()
		return
	}
	c.queue = append(c.queue, q)
	c.mu.Unlock()
	poke(c.wake)
}

// holdEvents makes the events sent from now on wait, in order, until
// release is called: a subscription's handler holds them until its reply
// is queued, so that the reply comes before the subscription's first
// event (which another goroutine may send while the handler still runs,
// or the handler itself). Holds nest: events go out when the last one is
// released.
func (c *Conn) holdEvents() (release func()) {
	c.mu.Lock()
	c.hold++
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		c.hold--
		flush := c.hold == 0 && len(c.held) > 0
		if flush {
			c.queue = append(c.queue, c.held...)
			c.held = nil
		}
		c.mu.Unlock()
		if flush {
			poke(c.wake)
		}
	}
}

// reply writes resp on the calling goroutine (the connection's reader)
// when nothing is queued or being written, which spares the writer's
// wake-up; otherwise it queues it behind the rest. A reply the socket
// takes at once is never counted against the budgets: it waited for
// nobody. What the socket does not take at once is counted while the
// reader waits to write it, as any queued line is.
func (c *Conn) reply(resp *Response) {
	b, err := appendLine(c.line[:0], resp)
	if err != nil {
		c.log.Error("ipc: encoding reply", "err", err)
		return
	}
	c.line = b
	c.mu.Lock()
	select {
	case <-c.gone:
		c.mu.Unlock()
		return
	default:
	}
	if len(c.queue) > 0 || c.writing {
		if resp.ID != nil {
			id := *resp.ID // it points into c.req, which the next request overwrites
			resp.ID = &id
		}
		b = bytes.Clone(b)
		c.queue = append(c.queue, queued{v: resp, at: boottime(), b: b})
		c.addBytesLocked(len(b))
		c.mu.Unlock()
		poke(c.wake)
		return
	}
	c.writing = true
	c.mu.Unlock()
	n, err := c.io.writeNow(b)
	if err != nil || n == len(b) {
		c.written(0, err)
		return
	}
	c.mu.Lock()
	c.addBytesLocked(len(b) - n)
	c.mu.Unlock()
	c.writeWait(b[n:], len(b)-n, c.stall)
}

// next waits for the next queued line and returns it, or false once the
// connection is gone and nothing is left.
func (c *Conn) next() (queued, bool) {
	for {
		c.mu.Lock()
		if len(c.queue) > 0 && !c.writing {
			q := c.queue[0]
			c.queue[0] = queued{}
			c.queue = c.queue[1:]
			c.writing = true
			c.mu.Unlock()
			return q, true
		}
		empty := len(c.queue) == 0
		c.mu.Unlock()
		if !empty {
			// The reader is writing a reply; written wakes us.
			<-c.wake
			continue
		}
		select {
		case <-c.wake:
		case <-c.gone:
			c.mu.Lock()
			empty := len(c.queue) == 0
			c.mu.Unlock()
			if empty {
				return queued{}, false
			}
		}
	}
}

// written takes a written line's counted bytes off the count and ends
// the write; what was queued meanwhile is the writer's. A failed write
// (err) ends the connection.
func (c *Conn) written(n int, err error) {
	c.mu.Lock()
	c.addBytesLocked(-n)
	c.writing = false
	under := c.bytes <= c.budget
	more := len(c.queue) > 0
	c.mu.Unlock()
	if under && n > 0 {
		poke(c.space)
	}
	if more {
		poke(c.wake)
	}
	if err != nil {
		c.markGone()
	}
}

// addBytesLocked adds n (negative: takes off) to the bytes queued for
// the connection and its uid. The caller holds c.mu.
func (c *Conn) addBytesLocked(n int) {
	if c.settled {
		return
	}
	c.bytes += n
	c.uid.add(n)
}

// settle takes what the connection still has queued off its uid's
// count, once it ended and its writer returned; nothing is queued after.
func (c *Conn) settle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.uid.add(-c.bytes)
	c.bytes, c.settled = 0, true
	c.queue, c.held = nil, nil
}

// waitSpace blocks the reader while more than the connection's budget,
// or its uid's, is unread, and reports whether the connection is still
// there.
func (c *Conn) waitSpace() bool {
	if !c.overBudget() && !c.uid.over(1) {
		return true // without under's lock, which every connection of the uid takes
	}
	for {
		under := c.uid.under() // before the check: a fall after it closes this
		over := c.overBudget()
		uidOver := c.uid.over(1)
		if !over && !uidOver {
			return true
		}
		if uidOver {
			c.uid.heldBack(c)
		}
		select {
		case <-c.space:
		case <-under:
		case <-c.gone:
			return false
		}
	}
}

// overBudget reports whether more than the connection's budget is unread.
func (c *Conn) overBudget() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes > c.budget
}

// isGone reports whether the connection has gone (markGone).
func (c *Conn) isGone() bool {
	select {
	case <-c.gone:
		return true
	default:
		return false
	}
}

func (c *Conn) markGone() {
	c.goneMu.Do(func() {
		close(c.gone)
		if c.onGone != nil {
			c.onGone()
		}
	})
}

// writeLoop writes the queue to the connection. A write that makes no
// progress for the stall timeout ends the connection, with the reason
// logged; once the connection is gone, what is left is flushed briefly.
func (c *Conn) writeLoop() {
	for {
		q, ok := c.next()
		if !ok {
			return
		}
		limit := c.stall
		if c.isGone() {
			limit = min(c.stall, goneFlush)
		}
		b, err := q.encode()
		if err != nil {
			c.log.Error("ipc: encoding reply", "err", err)
			c.written(len(q.b), nil)
			continue
		}
		if !c.write(b, len(q.b), limit) {
			return
		}
	}
}

// write writes one line whose write the caller counted (next), as
// counted bytes (what it was queued as: an aged line may be shorter or
// longer), within limit, and ends the write. A failed write ends the
// connection (false); running out of the stall timeout is logged, unless
// the connection had gone already.
func (c *Conn) write(b []byte, counted int, limit time.Duration) bool {
	n, err := c.io.writeNow(b)
	if err != nil || n == len(b) {
		c.written(counted, err)
		return err == nil
	}
	return c.writeWait(b[n:], counted, limit)
}

// writeWait is write for what the socket did not take at once: it
// waits for the client to read, within limit.
func (c *Conn) writeWait(b []byte, counted int, limit time.Duration) bool {
	c.nc.SetWriteDeadline(time.Now().Add(limit))
	_, err := c.nc.Write(b)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && limit == c.stall && !c.isGone() {
		c.mu.Lock()
		n, bytes, dropped := len(c.queue), c.bytes, c.dropped
		c.mu.Unlock()
		c.log.Warn("ipc: closing a connection whose client has read nothing for the stall timeout",
			"conn", c.ID, "pid", c.Cred.PID, "uid", c.Cred.UID, "stall", c.stall, "queued", n+1, "queued_bytes", bytes, "events_left_out", dropped)
	}
	c.written(counted, err)
	return err == nil
}

// goneFlush is how long each write may take once the connection is gone:
// what is left is flushed briefly, to a client that still reads.
const goneFlush = time.Second

// poke wakes whoever waits on a 1-buffered channel, without blocking.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
