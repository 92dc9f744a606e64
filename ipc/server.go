package ipc

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Handler answers validated requests for a Server.
type Handler interface {
	// Handle answers one request that passed DecodeRequest. Requests that
	// may wait on the network (acquire, release, renew) run on goroutines
	// of their own, so a slow one does not hold up others on the same
	// connection; the rest (hello, status, check, watch) run in order on
	// the connection's reader and must not block, and their req is reused
	// for the connection's next request once Handle returns (keep what it
	// says, not req). ctx ends when the connection is gone or the server
	// stops. The server fills in the id.
	Handle(ctx context.Context, c *Conn, req *Request) *Response
	// Closed is called once per connection, after it closed and every
	// Handle call for it returned.
	Closed(c *Conn)
}

// Server reads requests from socket connections, answers malformed ones
// itself and hands the rest to its Handler.
type Server struct {
	// Handler answers requests. Required.
	Handler Handler
	// Logger receives connection-level problems; nil discards them.
	Logger *slog.Logger
	// Limits bound what one local user can make the server hold; zero
	// fields take their defaults.
	Limits Limits
	// MinTTL and MaxTTL bound the terms acquire may ask for: outside,
	// the request is answered with TTLError before it reaches Handler.
	// Zero: the protocol's bounds (MinTTL, MaxTTL).
	MinTTL, MaxTTL time.Duration

	nextID atomic.Uint64
	users  users
}

// Serve accepts connections on ln until ctx ends, then closes ln and every
// connection and waits for their handlers. It returns nil on ctx's end.
func (s *Server) Serve(ctx context.Context, ln *net.UnixListener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	// Closed (and its socket file removed) before Serve returns, however
	// it returns: a late close would remove the socket of a process that
	// listens on the same path next.
	defer ln.Close()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	var backoff time.Duration
	for {
		nc, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors (EMFILE, ENFILE), out of memory, a
			// connection reset before it was accepted: back off and go
			// on, as net/http does. Nothing a client does stops the
			// server.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.logger().Warn("ipc: accept failed; retrying", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		backoff = 0
		if ctx.Err() != nil {
			// Stopping: ln is about to close. A client whose connection
			// the stop ended dials again at once to resume its leases;
			// it must reach the next process, not this one, which still
			// lists them as owned by the ended connection.
			nc.Close()
			return nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveConn(ctx, nc)
		}()
	}
}

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

func (s *Server) serveConn(ctx context.Context, nc *net.UnixConn) {
	log := s.logger()
	lim := s.Limits.withDefaults()
	cred, err := PeerCred(nc)
	if err != nil {
		log.Warn("ipc: no peer credentials; refusing connection", "err", err)
		nc.Close()
		return
	}
	uid, ok := s.users.open(cred.UID, lim.ConnsPerUID, lim.QueueBytesPerUID)
	if !ok {
		s.refuseConn(nc, cred, lim.ConnsPerUID)
		return
	}
	defer s.users.closed(cred.UID)
	c := newConn(s.nextID.Add(1), nc, lim, uid, log)
	c.Cred = cred

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The connection ends when the server stops or the client goes; both
	// unblock the reader, and give a write in progress (one that waits
	// for a client that does not read, with the stall timeout's
	// deadline) a second to finish. No goroutine waits for it: idle
	// connections cost a reader and a writer only.
	stopRead := func() {
		nc.SetReadDeadline(time.Now())
		nc.SetWriteDeadline(time.Now().Add(goneFlush))
	}
	c.onGone = stopRead // before the AfterFunc, which may run at once and read it
	defer context.AfterFunc(ctx, func() {
		c.markGone()
		stopRead()
	})()

	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()

	var handlers sync.WaitGroup
	var src io.Reader = nc
	if c.io != nil {
		src = c.io
	}
	r := bufio.NewReaderSize(src, 4096)
	// Backpressure: while more than the budget is unread, no request is
	// read; the client's writes then block in the kernel.
	for c.waitSpace() {
		line, err := readLine(r)
		if errors.Is(err, errLineTooLong) {
			c.enqueue(errorLine(nil, Errorf(CodeLineTooLong, "request line is over %d bytes; skipped", MaxLineBytes)), false)
			continue
		}
		if err != nil {
			break
		}
		if len(line) == 0 {
			continue
		}
		id, derr := decodeRequest(line, cmp.Or(s.MinTTL, MinTTL), cmp.Or(s.MaxTTL, MaxTTL), &c.req)
		if derr != nil {
			c.enqueue(errorLine(id, derr), false)
			continue
		}
		if quickOp(c.req.Op) {
			release := holdFor(c, c.req.Op)
			c.reply(s.answer(cctx, c, &c.req, id))
			release()
			continue
		}
		// Its reply comes later, on the handler's goroutine: while the
		// uid has more than its budget unread (other connections' replies
		// came meanwhile), the request waits here, so that the replies in
		// flight are only those of requests started under it.
		if !c.waitSpace() {
			break
		}
		req := new(Request) // the handler's goroutine's own
		*req = c.req
		id = &req.ID
		if !s.users.start(cred.UID, lim.InFlightPerUID) {
			s.refuseRequest(c, id, lim.InFlightPerUID)
			continue
		}
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			defer s.users.finish(cred.UID)
			release := holdFor(c, req.Op)
			c.enqueueAnswer(s.answer(cctx, c, req, id), readOnlyOps[req.Op])
			release()
		}()
	}
	// The client closed its side. If it only shut down writing (as socat
	// does at the end of its input), let in-flight requests answer first;
	// if it is gone altogether, cancel them now.
	if peerHungUp(nc) {
		c.markGone()
	}
	waitOrGone(&handlers, c.gone)
	c.markGone()
	cancel()
	handlers.Wait()
	s.Handler.Closed(c)
	<-writerDone
	c.settle()
	nc.Close()
}

// quickOp reports whether op never waits on the network: such ops are
// answered on the reading goroutine, in order, which saves two goroutine
// hand-offs per request. (A switch, not a map: it runs every request.)
func quickOp(op string) bool {
	switch op {
	case OpHello, OpStatus, OpCheck, OpWatch, OpClock, OpResetRho:
		return true
	}
	return false
}

// subscribeOp reports whether op starts a subscription (watch,
// observe): the events it brings wait until its reply is queued
// (Conn.holdEvents), so the reply comes first, as PROTOCOL.md says. Their
// handlers never wait on the network, so nothing is held for long.
func subscribeOp(op string) bool { return op == OpWatch || op == OpObserve }

// holdFor holds c's events while a request of op is answered, if op
// starts a subscription; release ends the hold.
func holdFor(c *Conn, op string) (release func()) {
	if !subscribeOp(op) {
		return func() {}
	}
	return c.holdEvents()
}

// answer has the Handler answer req and returns the reply to send.
func (s *Server) answer(ctx context.Context, c *Conn, req *Request, id *uint64) *Response {
	resp := s.Handler.Handle(ctx, c, req)
	if resp == nil {
		resp = &Response{Error: Errorf(CodeInternal, "no reply")}
	}
	resp.ID = id
	resp.OK = resp.Error == nil
	return resp
}

var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its newline. A line longer than
// MaxLineBytes is consumed to its end and reported as errLineTooLong. A
// line that the reader holds whole is returned in the reader's buffer,
// not copied: it is good until the next read.
func readLine(r *bufio.Reader) ([]byte, error) {
	frag, err := r.ReadSlice('\n')
	if err == nil && len(frag) <= MaxLineBytes+1 {
		return frag[:len(frag)-1], nil
	}
	var line []byte
	tooLong := false
	for {
		if !tooLong {
			line = append(line, frag...)
			if len(line) > MaxLineBytes+1 {
				tooLong, line = true, nil
			}
		}
		switch {
		case err == nil:
			if tooLong {
				return nil, errLineTooLong
			}
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF) && len(line) > 0 && !tooLong:
			return line, nil // a last line without newline
		default:
			return nil, err
		}
		frag, err = r.ReadSlice('\n')
	}
}

// peerHungUp reports whether the peer closed its socket entirely (POLLHUP),
// as opposed to shutting down only its writing side.
func peerHungUp(nc *net.UnixConn) bool {
	raw, err := nc.SyscallConn()
	if err != nil {
		return true
	}
	hup := true
	raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		if n, err := unix.Poll(fds, 0); err == nil && n == 1 {
			hup = fds[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0
		} else if err == nil {
			hup = false
		}
	})
	return hup
}

func waitOrGone(wg *sync.WaitGroup, gone <-chan struct{}) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-gone:
	}
}

func errorLine(id *uint64, e *Error) *Response { return &Response{ID: id, Error: e} }
