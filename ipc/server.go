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
	// the connection's reader and must not block. ctx ends when the
	// connection is gone or the server stops. The server fills in the id.
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
	// WriteTimeout bounds each write to a client; a client that does not
	// read its replies for this long is disconnected. Default 5s.
	WriteTimeout time.Duration
	// QueueLen is how many replies and events may wait for a slow
	// client before it is disconnected. Default 256.
	QueueLen int
	// MinTTL and MaxTTL bound the terms acquire may ask for: outside,
	// the request is answered with TTLError before it reaches Handler.
	// Zero: the protocol's bounds (MinTTL, MaxTTL).
	MinTTL, MaxTTL time.Duration

	nextID atomic.Uint64
}

// Serve accepts connections on ln until ctx ends, then closes ln and every
// connection and waits for their handlers. It returns nil on ctx's end.
func (s *Server) Serve(ctx context.Context, ln *net.UnixListener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		nc, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveConn(ctx, nc)
		}()
	}
}

// Conn is one client connection, as a Handler sees it.
type Conn struct {
	// ID numbers connections from 1 in the order they were accepted.
	ID uint64
	// Cred identifies the peer process (SO_PEERCRED).
	Cred Cred

	out    chan queued
	gone   chan struct{} // closed when the connection is unusable
	goneMu sync.Once
	onGone func() // unblocks the reader
	log    *slog.Logger
}

// Send pushes an event to the client. It never blocks: a client whose
// queue is full is disconnected.
func (c *Conn) Send(ev *Event) { c.enqueue(ev) }

// Done is closed when the connection has gone.
func (c *Conn) Done() <-chan struct{} { return c.gone }

func (c *Conn) enqueue(v any) {
	select {
	case <-c.gone:
	case c.out <- queued{v: v, at: boottime()}:
	default:
		c.log.Warn("ipc: client does not read its replies; disconnecting", "conn", c.ID, "pid", c.Cred.PID)
		c.markGone()
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

func (s *Server) serveConn(ctx context.Context, nc *net.UnixConn) {
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	qlen := s.QueueLen
	if qlen <= 0 {
		qlen = 256
	}
	wt := s.WriteTimeout
	if wt <= 0 {
		wt = 5 * time.Second
	}
	c := &Conn{ID: s.nextID.Add(1), out: make(chan queued, qlen), gone: make(chan struct{}), log: log}
	cred, err := PeerCred(nc)
	if err != nil {
		log.Warn("ipc: no peer credentials; refusing connection", "err", err)
		nc.Close()
		return
	}
	c.Cred = cred

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The connection ends when the server stops or the client goes; both
	// unblock the reader. No goroutine waits for it: idle connections
	// cost a reader and a writer only.
	stopRead := func() { nc.SetReadDeadline(time.Now()) }
	defer context.AfterFunc(ctx, func() {
		c.markGone()
		stopRead()
	})()
	c.onGone = stopRead

	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		s.writeLoop(nc, c, wt)
	}()

	var handlers sync.WaitGroup
	r := bufio.NewReaderSize(nc, 4096)
	for {
		line, err := readLine(r)
		if errors.Is(err, errLineTooLong) {
			c.enqueue(errorLine(nil, Errorf(CodeLineTooLong, "request line is over %d bytes; skipped", MaxLineBytes)))
			continue
		}
		if err != nil {
			break
		}
		if len(line) == 0 {
			continue
		}
		req, id, derr := decodeRequest(line, cmp.Or(s.MinTTL, MinTTL), cmp.Or(s.MaxTTL, MaxTTL))
		if derr != nil {
			c.enqueue(errorLine(id, derr))
			continue
		}
		if quickOps[req.Op] {
			s.answer(cctx, c, req, id)
			continue
		}
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			s.answer(cctx, c, req, id)
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
	nc.Close()
}

// quickOps never wait on the network; they are answered on the reading
// goroutine, in order, which saves two goroutine hand-offs per request.
var quickOps = map[string]bool{OpHello: true, OpStatus: true, OpCheck: true, OpWatch: true, OpClock: true, OpResetRho: true}

func (s *Server) answer(ctx context.Context, c *Conn, req *Request, id *uint64) {
	resp := s.Handler.Handle(ctx, c, req)
	if resp == nil {
		resp = &Response{Error: Errorf(CodeInternal, "no reply")}
	}
	resp.ID = id
	resp.OK = resp.Error == nil
	c.enqueue(resp)
}

func (s *Server) writeLoop(nc *net.UnixConn, c *Conn, timeout time.Duration) {
	write := func(q queued) bool {
		b, err := q.encode()
		if err != nil {
			c.log.Error("ipc: encoding reply", "err", err)
			return true
		}
		nc.SetWriteDeadline(time.Now().Add(timeout))
		_, err = nc.Write(b)
		return err == nil
	}
	for {
		select {
		case q := <-c.out:
			if !write(q) {
				c.markGone()
				return
			}
		case <-c.gone:
			// Flush what is queued without waiting for more.
			for {
				select {
				case q := <-c.out:
					if !write(q) {
						return
					}
				default:
					return
				}
			}
		}
	}
}

var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its newline. A line longer than
// MaxLineBytes is consumed to its end and reported as errLineTooLong.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		frag, err := r.ReadSlice('\n')
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
			continue
		case errors.Is(err, io.EOF) && len(line) > 0 && !tooLong:
			return line, nil // a last line without newline
		default:
			return nil, err
		}
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
