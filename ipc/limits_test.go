package ipc

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// blockHandler holds every acquire until release is closed; entered
// hears of each.
type blockHandler struct {
	stubHandler
	release chan struct{}
	entered chan struct{}
}

func (h *blockHandler) Handle(ctx context.Context, c *Conn, req *Request) *Response {
	if req.Op == OpAcquire {
		h.entered <- struct{}{}
		select {
		case <-h.release:
		case <-ctx.Done():
		}
	}
	return h.stubHandler.Handle(ctx, c, req)
}

// A uid at its connection limit gets one resource_exhausted line on its
// next connection, which is then closed; its open connections, and a
// connection opened once one of them closed, are served as before.
func TestConnectionsPerUIDAreLimited(t *testing.T) {
	path := startServerWith(t, &Server{Handler: &stubHandler{done: make(chan struct{})}, Limits: Limits{ConnsPerUID: 3}})
	ctx, cancel := context.WithTimeout(context.Background(), timeoutIPC)
	defer cancel()
	var open []*Client
	for i := 0; i < 3; i++ {
		c := &Client{Socket: path}
		defer c.Close()
		if _, err := c.Hello(ctx); err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
	}
	over, r := dialT(t, path)
	defer over.Close()
	over.SetReadDeadline(time.Now().Add(timeoutIPC))
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("the connection over the limit got no line: %v", err)
	}
	assertCode(t, line, CodeResourceExhausted)
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("the connection over the limit was not closed")
	}
	for _, c := range open {
		if _, err := c.Hello(ctx); err != nil {
			t.Fatalf("an open connection after the refusal: %v", err)
		}
	}
	open[0].Close()
	// The server counts the closed connection off when it sees it end;
	// until then a new one may still be refused, so ask until served.
	for {
		c := &Client{Socket: path}
		_, err := c.Hello(ctx)
		c.Close()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("no connection served after one closed: %v", err)
		}
	}
}

// A uid at its limit of requests in flight gets resource_exhausted for
// the next, at once and for that request only; quick requests are still
// answered, and once one finishes the next is taken.
func TestInFlightRequestsPerUIDAreLimited(t *testing.T) {
	h := &blockHandler{stubHandler: stubHandler{done: make(chan struct{})}, release: make(chan struct{}), entered: make(chan struct{}, 8)}
	path := startServerWith(t, &Server{Handler: h, Limits: Limits{InFlightPerUID: 2}})
	ctx, cancel := context.WithTimeout(context.Background(), timeoutIPC)
	defer cancel()
	a, b := &Client{Socket: path}, &Client{Socket: path}
	defer a.Close()
	defer b.Close()
	held := make(chan error, 2)
	for _, c := range []*Client{a, b} {
		go func() {
			_, err := c.Acquire(ctx, "x", AcquireOptions{TTL: time.Second})
			held <- err
		}()
	}
	for range 2 {
		<-h.entered
	}
	if _, err := a.Acquire(ctx, "y", AcquireOptions{TTL: time.Second}); !errors.Is(err, &Error{Code: CodeResourceExhausted}) {
		t.Fatalf("a third request while two are in flight: %v, want resource_exhausted", err)
	}
	if _, err := b.Hello(ctx); err != nil {
		t.Fatalf("a quick request at the limit: %v", err)
	}
	close(h.release)
	for range 2 {
		if err := <-held; err != nil {
			t.Fatalf("a request held at the limit: %v", err)
		}
	}
	if _, err := a.Acquire(ctx, "y", AcquireOptions{TTL: time.Second}); err != nil {
		t.Fatalf("after the limit freed: %v", err)
	}
}

// assertCode fails the test unless line is an error reply with code.
func assertCode(t *testing.T, line, code string) {
	t.Helper()
	var m struct {
		OK    bool   `json:"ok"`
		Error *Error `json:"error"`
	}
	if err := json.Unmarshal([]byte(line), &m); err != nil || m.OK || m.Error == nil || m.Error.Code != code {
		t.Fatalf("got %q, want an error with code %s", line, code)
	}
}
