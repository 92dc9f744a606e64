package ipc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// A Client's connection: opened on first use (connect), one request and
// its reply matched by id (call), and one goroutine that reads every line
// (readLoop), hands replies to their callers and events to the leases,
// observers and Notify channels they concern (deliver).

func (c *Client) call(ctx context.Context, req *Request) (*Response, error) {
	conn, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.conn != conn {
		// Replaced since (resume.go): this request goes on the new one.
		conn = c.conn
	}
	closed := c.closed
	c.nextID++
	req.ID = c.nextID
	ch := make(chan *Response, 1)
	c.pending[req.ID] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, req.ID)
		c.mu.Unlock()
	}()

	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetWriteDeadline(dl)
	} else {
		conn.SetWriteDeadline(time.Time{})
	}
	c.wmu.Lock()
	_, err = conn.Write(append(b, '\n'))
	c.wmu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// The daemon's end is gone (EPIPE, ECONNRESET) before this
		// client read its end: the connection has ended, as readLoop is
		// about to find; a lease being resumed goes back in line.
		conn.Close()
		return nil, fmt.Errorf("%w: write: %w", ErrConnectionClosed, err)
	}
	select {
	case resp := <-ch:
		if resp.Error != nil {
			return nil, resp.Error
		}
		return resp, nil
	case <-closed:
		c.mu.Lock()
		defer c.mu.Unlock()
		return nil, fmt.Errorf("%w: %w", ErrConnectionClosed, c.err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *Client) connect(ctx context.Context) (*net.UnixConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		select {
		case <-c.closed:
			return nil, fmt.Errorf("%w: %w", ErrConnectionClosed, c.err)
		default:
			return c.conn, nil
		}
	}
	conn, err := Dial(ctx, c.Socket)
	if err != nil {
		return nil, err
	}
	c.conn = conn
	c.pending = map[uint64]chan *Response{}
	c.leases = map[string]*Lease{}
	c.acquiring = map[string]int{}
	c.orphans = map[string]*Event{}
	c.observers = map[string][]*observer{}
	c.closed = make(chan struct{})
	go c.readLoop(conn, c.closed)
	return conn, nil
}

func (c *Client) readLoop(conn *net.UnixConn, closed chan struct{}) {
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 4096), 64<<20)
	for sc.Scan() {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			continue
		}
		if _, isEvent := raw["event"]; isEvent {
			var ev Event
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				c.deliver(&ev)
			}
			continue
		}
		var resp Response
		if err := json.Unmarshal(sc.Bytes(), &resp); err != nil || resp.ID == nil {
			continue
		}
		c.mu.Lock()
		ch := c.pending[*resp.ID]
		c.mu.Unlock()
		if ch != nil {
			ch <- &resp
		}
	}
	err := sc.Err()
	if err == nil {
		err = errors.New("EOF")
	}
	conn.Close() // a reader that gave up leaves no half-open connection
	c.mu.Lock()
	c.err = err
	leases := c.leases
	c.leases = map[string]*Lease{}
	var end []*Lease
	for _, l := range leases {
		if l.Resume != "" && !c.closing {
			c.toResume = append(c.toResume, l)
		} else {
			end = append(end, l)
		}
	}
	start := len(c.toResume) > 0 && c.resuming == nil
	if start {
		c.resuming = make(chan struct{})
	}
	// Closed with the leases put in line, under c.mu: a resume that
	// finds them (resume.go) finds the connection ended too, and dials
	// again rather than sending them on this one.
	close(closed)
	c.mu.Unlock()
	for _, l := range end {
		l.end("connection_closed")
	}
	c.endObservers()
	if start {
		go c.resume()
	}
}

// deliver applies ev to this client's leases first, then hands it to the
// Notify channels: a subscriber that sees an event finds the lease
// already following it.
func (c *Client) deliver(ev *Event) {
	c.deliverPrims(ev)
	if ev.Event == EventRenewed || ev.Event == EventShortened {
		c.mu.Lock()
		l := c.leases[ev.Lease]
		c.mu.Unlock()
		switch {
		case l == nil || l.Token != ev.Token:
		case ev.Event == EventRenewed:
			l.renewed(ev.DeadlineBoottimeNs)
		default:
			l.shortened(ev.DeadlineBoottimeNs)
		}
	}
	if ev.Event == EventLost || ev.Event == EventReleased {
		if !c.endLease(ev.Lease, ev.Token, eventReason(ev)) {
			c.mu.Lock()
			if c.acquiring[ev.Lease] > 0 {
				c.orphans[ev.Lease] = ev
			}
			c.mu.Unlock()
		}
	}
	c.mu.Lock()
	subs := append([]chan<- *Event(nil), c.events...)
	c.mu.Unlock()
	for _, ch := range subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

func eventReason(ev *Event) string {
	if ev.Reason != "" {
		return ev.Reason
	}
	return ev.Event
}

// endLease ends the named lease if it has that token ("" matches any);
// it reports whether there was such a lease.
func (c *Client) endLease(name, token, reason string) bool {
	c.mu.Lock()
	l := c.leases[name]
	if l != nil && (token == "" || l.Token == token) {
		delete(c.leases, name)
	} else {
		l = nil
	}
	c.mu.Unlock()
	if l != nil {
		l.end(reason)
	}
	return l != nil
}
