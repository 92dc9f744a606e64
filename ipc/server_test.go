package ipc

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// stubHandler answers status with no leases and records closed connections.
type stubHandler struct {
	mu     sync.Mutex
	closed []uint64
	done   chan struct{} // closed when the first connection closes
	once   sync.Once
}

func (h *stubHandler) Handle(ctx context.Context, c *Conn, req *Request) *Response {
	switch req.Op {
	case OpStatus:
		return &Response{Leases: &[]Grant{}}
	case OpAcquire:
		c.Send(&Event{Event: EventLost, Lease: req.Lease, Token: "7", Reason: ReasonRevoked})
		now := boottime()
		return &Response{Grant: NewGrant(req.Lease, 7, time.Second, now+int64(time.Hour), now)}
	}
	return &Response{Hello: &Hello{Server: "stub"}}
}

func (h *stubHandler) Closed(c *Conn) {
	h.mu.Lock()
	h.closed = append(h.closed, c.ID)
	h.mu.Unlock()
	h.once.Do(func() { close(h.done) })
}

func startServer(t *testing.T, h Handler) string {
	t.Helper()
	return startServerWith(t, &Server{Handler: h})
}

// startServerWith serves srv on a new socket until the test ends.
func startServerWith(t *testing.T, srv *Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return path
}

func dialT(t *testing.T, path string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return c, bufio.NewReader(c)
}

func readMsg(t *testing.T, r *bufio.Reader) map[string]any {
	t.Helper()
	line, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading reply: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("reply %q is not JSON: %v", line, err)
	}
	return m
}

func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

// One connection gets malformed JSON, an unknown op, a 100 KiB line and a
// valid request: three errors and one answer, in order, and the connection
// keeps working throughout.
func TestBadInputKeepsConnection(t *testing.T) {
	path := startServer(t, &stubHandler{done: make(chan struct{})})
	c, r := dialT(t, path)
	lines := []string{
		`{"id":1,"op":`,
		`{"id":2,"op":"frobnicate"}`,
		`{"id":3,"op":"status","pad":"` + strings.Repeat("x", 100<<10) + `"}`,
		`{"id":4,"op":"status"}`,
	}
	want := []struct {
		id   any
		code string
	}{
		{nil, CodeBadJSON},
		{2.0, CodeUnknownOp},
		{nil, CodeLineTooLong},
		{4.0, ""},
	}
	for i, l := range lines {
		if _, err := c.Write([]byte(l + "\n")); err != nil {
			t.Fatal(err)
		}
		m := readMsg(t, r)
		if m["id"] != want[i].id || errCode(m) != want[i].code {
			t.Errorf("line %d: got id %v code %q (%v), want id %v code %q", i, m["id"], errCode(m), m, want[i].id, want[i].code)
		}
		if want[i].code == "" {
			if m["ok"] != true || m["leases"] == nil {
				t.Errorf("line %d: want ok with leases, got %v", i, m)
			}
		} else if m["ok"] != false {
			t.Errorf("line %d: error reply must have ok false: %v", i, m)
		}
	}
}

func TestDecodeRequestStrict(t *testing.T) {
	tests := []struct {
		name string
		line string
		code string
	}{
		{name: "valid acquire", line: `{"id":1,"op":"acquire","lease":"jobs/render-42","ttl_ms":15000,"wait_ms":0}`},
		{name: "not an object", line: `[1,2]`, code: CodeBadJSON},
		{name: "trailing data", line: `{"id":1,"op":"status"} {}`, code: CodeBadJSON},
		{name: "invalid utf8", line: "{\"id\":1,\"op\":\"status\",\"lease\":\"\xff\"}", code: CodeBadJSON},
		{name: "unknown field", line: `{"id":1,"op":"status","extra":1}`, code: CodeBadRequest},
		{name: "wrong case", line: `{"id":1,"OP":"status"}`, code: CodeBadRequest},
		{name: "duplicate field", line: `{"id":1,"op":"status","op":"hello"}`, code: CodeBadRequest},
		{name: "missing id", line: `{"op":"status"}`, code: CodeBadRequest},
		{name: "negative id", line: `{"id":-1,"op":"status"}`, code: CodeBadRequest},
		{name: "ttl overflow", line: `{"id":1,"op":"acquire","lease":"a","ttl_ms":99999999999999999999}`, code: CodeBadRequest},
		{name: "zero ttl", line: `{"id":1,"op":"acquire","lease":"a","ttl_ms":0}`, code: CodeInvalidTTL},
		{name: "negative ttl", line: `{"id":1,"op":"acquire","lease":"a","ttl_ms":-5}`, code: CodeInvalidTTL},
		{name: "absurd ttl", line: `{"id":1,"op":"acquire","lease":"a","ttl_ms":864000000000}`, code: CodeInvalidTTL},
		{name: "negative wait", line: `{"id":1,"op":"acquire","lease":"a","ttl_ms":1000,"wait_ms":-1}`, code: CodeBadRequest},
		{name: "empty name", line: `{"id":1,"op":"acquire","lease":"","ttl_ms":1000}`, code: CodeInvalidName},
		{name: "dotdot segment", line: `{"id":1,"op":"acquire","lease":"a/../b","ttl_ms":1000}`, code: CodeInvalidName},
		{name: "empty segment", line: `{"id":1,"op":"acquire","lease":"a//b","ttl_ms":1000}`, code: CodeInvalidName},
		{name: "space in name", line: `{"id":1,"op":"acquire","lease":"a b","ttl_ms":1000}`, code: CodeInvalidName},
		{name: "long name", line: `{"id":1,"op":"acquire","lease":"` + strings.Repeat("a", 257) + `","ttl_ms":1000}`, code: CodeInvalidName},
		{name: "pid owner without pid", line: `{"id":1,"op":"acquire","lease":"a","ttl_ms":1000,"owner":"pid"}`, code: CodeBadRequest},
		{name: "unknown owner", line: `{"id":1,"op":"acquire","lease":"a","ttl_ms":1000,"owner":"me"}`, code: CodeBadRequest},
		{name: "status with lease", line: `{"id":1,"op":"status","lease":"a"}`, code: CodeBadRequest},
		{name: "unknown op", line: `{"id":1,"op":"nope"}`, code: CodeUnknownOp},
		{name: "release given up", line: `{"id":1,"op":"release","lease":"a","token":"3","reason":"renew_failed"}`},
		{name: "release with another reason", line: `{"id":1,"op":"release","lease":"a","reason":"bored"}`, code: CodeBadRequest},
		{name: "reason on renew", line: `{"id":1,"op":"renew","lease":"a","reason":"renew_failed"}`, code: CodeBadRequest},
		{name: "cluster leases", line: `{"id":1,"op":"leases","prefix":"jobs/","after":"jobs/a"}`},
		{name: "cluster leases, prefix with a space", line: `{"id":1,"op":"leases","prefix":"jobs /"}`, code: CodeBadRequest},
		{name: "cluster leases, long after", line: `{"id":1,"op":"leases","after":"` + strings.Repeat("a", 257) + `"}`, code: CodeBadRequest},
		{name: "cluster leases with a lease", line: `{"id":1,"op":"leases","lease":"a"}`, code: CodeBadRequest},
		{name: "prefix on acquire", line: `{"id":1,"op":"acquire","lease":"a","ttl_ms":1000,"prefix":"a"}`, code: CodeBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _, err := DecodeRequest([]byte(tt.line))
			switch {
			case tt.code == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tt.code == "" && req == nil:
				t.Fatal("no request")
			case tt.code != "" && (err == nil || err.Code != tt.code):
				t.Fatalf("got error %v, want code %s", err, tt.code)
			}
		})
	}
}

// The Go client matches replies to calls, routes pushed events to the
// lease they name, and ends connection-bound leases when the connection goes.
func TestClientEventsAndDone(t *testing.T) {
	h := &stubHandler{done: make(chan struct{})}
	path := startServer(t, h)
	c := &Client{Socket: path}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := c.Acquire(ctx, "a", AcquireOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
		if l.Reason() != ReasonRevoked {
			t.Errorf("reason %q, want %q", l.Reason(), ReasonRevoked)
		}
	case <-ctx.Done():
		t.Fatal("lost event did not end the lease")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.done:
	case <-ctx.Done():
		t.Fatal("server did not see the connection close")
	}
}

func TestListenReplacesStaleSocketOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "already listening") {
		t.Fatalf("second Listen on a live socket: %v, want ErrDaemonRunning", err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // leaves the file behind, as a crashed daemon would
	ln2, err := Listen(path)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	ln2.Close()
}

// deadlineHandler grants leases with a deadline d from now and pushes a
// renewal when asked to renew.
// deadlineHandler grants the lease "short" with a deadline d from now and
// every other with an hour, and renews for two hours, pushing a renewed
// event.
type deadlineHandler struct {
	stubHandler
	d time.Duration
}

func (h *deadlineHandler) Handle(ctx context.Context, c *Conn, req *Request) *Response {
	now := boottime()
	switch req.Op {
	case OpAcquire:
		d := time.Hour
		if req.Lease == "short" {
			d = h.d
		}
		return &Response{Grant: NewGrant(req.Lease, 1, time.Second, now+int64(d), now)}
	case OpRenew:
		dl := now + int64(2*time.Hour)
		c.Send(&Event{Event: EventRenewed, Lease: req.Lease, Token: "1", DeadlineBoottimeNs: dl})
		return &Response{Grant: NewGrant(req.Lease, 1, time.Second, dl, now)}
	}
	return h.stubHandler.Handle(ctx, c, req)
}

// The Go client ends a lease on its own when the deadline passes, even if
// the daemon says nothing (hung, stopped), and follows renewals. (The
// renewed lease's first deadline is an hour away, so that however slow
// the machine, the renewal comes first.)
func TestClientLeaseEndsAtDeadlineWithoutDaemon(t *testing.T) {
	path := startServer(t, &deadlineHandler{stubHandler: stubHandler{done: make(chan struct{})}, d: time.Second})
	c := &Client{Socket: path}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	short, err := c.Acquire(ctx, "short", AcquireOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	long, err := c.Acquire(ctx, "long", AcquireOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Renew(ctx, "long"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-short.Done():
		if short.Reason() != ReasonDeadlinePassed || short.Valid() {
			t.Fatalf("reason %q valid %v", short.Reason(), short.Valid())
		}
	case <-ctx.Done():
		t.Fatal("the lease outlived its deadline on the client")
	}
	if !long.Valid() || long.Deadline() <= long.DeadlineBoottimeNs {
		t.Fatalf("a renewed lease: valid %v, deadline %d (first %d)", long.Valid(), long.Deadline(), long.DeadlineBoottimeNs)
	}
}

// subscribingHandler answers watch and observe like the daemon: the
// subscription's first event is sent while the handler still runs, by
// the handler itself (the holders were known) or by another goroutine
// (they came from the grantor meanwhile).
type subscribingHandler struct{ stubHandler }

func (h *subscribingHandler) Handle(ctx context.Context, c *Conn, req *Request) *Response {
	switch req.Op {
	case OpObserve:
		c.Send(&Event{Event: EventNoLeader, Lease: req.Lease})
	case OpWatch:
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			c.Send(&Event{Event: EventHolder, Lease: req.Lease, Change: ChangeSync})
		}()
		<-sent
	}
	return &Response{}
}

// A subscription's reply comes before its first event, as PROTOCOL.md
// says (a client that reads up to the reply, as its Python example does,
// would otherwise skip the event and wait for it for ever), for the ops
// answered on the reading goroutine (watch) and the others (observe).
func TestSubscriptionReplyComesBeforeItsEvents(t *testing.T) {
	path := startServer(t, &subscribingHandler{stubHandler{done: make(chan struct{})}})
	c, r := dialT(t, path)
	for i, tc := range []struct {
		name, line, event string
	}{
		{name: "observe", line: `{"id":1,"op":"observe","lease":"svc/a"}`, event: EventNoLeader},
		{name: "watch with holders", line: `{"id":2,"op":"watch","lease":"svc/b","holders":true}`, event: EventHolder},
		{name: "observe again", line: `{"id":3,"op":"observe","lease":"svc/c"}`, event: EventNoLeader},
	} {
		if _, err := c.Write([]byte(tc.line + "\n")); err != nil {
			t.Fatal(err)
		}
		if m := readMsg(t, r); m["id"] != float64(i+1) || m["ok"] != true {
			t.Fatalf("%s: first line %v, want the reply", tc.name, m)
		}
		if m := readMsg(t, r); m["event"] != tc.event {
			t.Fatalf("%s: second line %v, want the %s event", tc.name, m, tc.event)
		}
	}
}
