package ipc

import (
	"context"
	"errors"
	"time"
)

// OpResume binds a lease whose owner was a connection to the connection
// it comes on, after a restart of the daemon ended that connection: lease
// and token name the grant, resume is the secret its grant gave
// (Grant.Resume). The reply is the grant, with its current deadline.
const OpResume = "resume"

// resumeRetryMax is the longest a resume waits before it dials the
// socket again.
const resumeRetryMax = 500 * time.Millisecond

// resumeSecretLen is the length of a resume secret: 16 bytes in hex.
const resumeSecretLen = 32

// validSecret reports whether s has the form of a resume secret.
func validSecret(s string) bool {
	if len(s) != resumeSecretLen {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// resume is the client's side of a daemon restart: the connection ended,
// and its leases that have a resume secret (the daemon keeps state) are
// not ended at once (toResume). The client dials the socket again, and
// again, until it answers (the daemon's new process; with socket
// activation the socket never went away), and resumes each lease that is
// still valid by its own deadline; a lease the new daemon refuses, or
// whose deadline passes first, ends as the connection's end did before
// ("connection_closed"). A new connection that ends too (the daemon
// stopped again) puts its leases back in line. The leases' watchdogs keep
// running meanwhile: a daemon that does not come back in time cannot keep
// a lease open past its deadline.
//
// The bound: a dial is tried again at most resumeRetryMax after the last
// failed one, and waits at most a second, so a daemon that listens again
// is reached within resumeRetryMax plus one dial, and each lease is then
// one round trip; far within the daemon's grace (10 s from its start).
// A connection that ends while leases are in line (the daemon stopped
// again, even right after answering a resume) puts them back in line
// with the connection marked ended at once (readLoop), and a request
// whose write fails on it counts as its end (call): no lease is ended
// for want of a connection while its deadline lasts.
func (c *Client) resume() {
	path := c.SocketPath() // the one the ended connection was on
	backoff := 20 * time.Millisecond
	for {
		c.mu.Lock()
		leases := c.toResume
		c.toResume = nil
		if len(leases) == 0 {
			close(c.resuming)
			c.resuming = nil
			c.mu.Unlock()
			return
		}
		closing := c.closing
		var live bool
		select {
		case <-c.closed:
		default:
			live = true
		}
		c.mu.Unlock()
		var last int64
		for _, l := range leases {
			if closing || !l.Valid() {
				l.end("connection_closed")
				continue
			}
			last = max(last, l.Deadline())
		}
		if closing || last == 0 {
			continue
		}
		if !live {
			ctx, cancel := context.WithTimeout(context.Background(), min(time.Second, time.Duration(last-boottime())))
			conn, err := dial(ctx, path)
			cancel()
			if err != nil {
				c.mu.Lock()
				c.toResume = append(c.toResume, leases...)
				c.mu.Unlock()
				t := time.NewTimer(backoff)
				<-t.C
				backoff = min(2*backoff, resumeRetryMax)
				continue
			}
			c.mu.Lock()
			c.conn, c.closed, c.err = conn, make(chan struct{}), nil
			c.pending = map[uint64]chan *Response{}
			go c.readLoop(conn, c.closed)
			c.mu.Unlock()
		}
		for _, l := range leases {
			c.resumeOne(l)
		}
	}
}

// resumeOne resumes l on the current connection. A connection that ends
// meanwhile puts it back in line (readLoop).
func (c *Client) resumeOne(l *Lease) {
	if !l.Valid() {
		return
	}
	c.mu.Lock()
	_, taken := c.leases[l.Lease]
	closed := c.closed
	if !taken && !c.closing {
		// Listed before the request goes: the daemon's events about it
		// may come right after its reply, and a connection that ends
		// takes it back in line.
		c.leases[l.Lease] = l
	}
	c.mu.Unlock()
	if taken {
		l.end("connection_closed")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(l.Deadline()-boottime()))
	defer cancel()
	g, err := c.Resume(ctx, l.Lease, l.Token, l.Resume)
	if errors.Is(err, ErrConnectionClosed) {
		// Back in line: by the connection's end (readLoop), or here if it
		// ended before this lease was listed.
		c.mu.Lock()
		if c.leases[l.Lease] == l {
			delete(c.leases, l.Lease)
			c.toResume = append(c.toResume, l)
		}
		c.mu.Unlock()
		// A write that failed may come before readLoop's end of the
		// connection: once it has ended, the loop dials again rather
		// than trying this connection once more.
		<-closed
		return
	}
	if err != nil {
		c.endLease(l.Lease, l.Token, "connection_closed")
		l.end("connection_closed")
		return
	}
	l.renewed(g.DeadlineBoottimeNs)
}

// Resume binds the lease name with token, whose owner was a connection
// that a restart of the daemon ended, to this client's connection, with
// the secret its grant gave (Grant.Resume), and returns its grant. A
// Client does this by itself for the leases it acquired; this is for a
// program that kept the secret some other way.
func (c *Client) Resume(ctx context.Context, name, token, secret string) (*Grant, error) {
	return c.grantCall(ctx, &Request{Op: OpResume, Lease: name, Token: token, Resume: secret})
}
