package ipc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// A client that sends requests and never reads the replies is held back:
// once a little is queued for it, the server stops reading its requests
// (its writes block), so what it costs stays bounded; a client that stays
// so past the stall timeout is disconnected. Meanwhile another client is
// answered as usual.
func TestNonReadingClientIsHeldBackThenCutOff(t *testing.T) {
	const stall = 2 * time.Second
	srv := &Server{Handler: &bigHandler{stubHandler{done: make(chan struct{})}}, Limits: Limits{QueueBytes: 64 << 10, StallTimeout: stall}}
	path := startServerWith(t, srv)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	slow, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	// Flood until a write blocks: the server stopped reading.
	line := []byte(`{"id":1,"op":"status"}` + "\n")
	sent := 0
	for {
		slow.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := slow.Write(line); err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the flood's write failed after %d requests: %v; want it held back (blocked)", sent, err)
			}
			break
		}
		sent++
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("held back after %d unread status requests (%d KiB each reply); the server's heap grew %d KiB", sent, len(bigLeases)*100/1024, grew/1024)
	if grew > 32<<20 {
		t.Fatalf("a non-reading client made the server's heap grow %d MiB", grew>>20)
	}

	fast := &Client{Socket: path}
	defer fast.Close()
	var slowest time.Duration
	for i := 0; i < 100; i++ {
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		t0 := time.Now()
		if _, err := fast.Hello(cctx); err != nil {
			t.Fatalf("a reading client was held up by a non-reading one: %v", err)
		}
		slowest = max(slowest, time.Since(t0))
		ccancel()
	}
	t.Logf("meanwhile, the slowest of 100 round trips of another client: %v", slowest)

	// Past the stall timeout the server hangs up: the blocked write fails.
	slow.SetWriteDeadline(time.Now().Add(timeoutIPC))
	for {
		if _, err := slow.Write(line); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the non-reading client was never cut off")
			}
			break
		}
	}
}

// timeoutIPC bounds the waits of these tests for an event: generous.
const timeoutIPC = 60 * time.Second

// bigLeases is a status reply of a host with many leases.
var bigLeases = func() []Grant {
	gs := make([]Grant, 200)
	for i := range gs {
		gs[i] = Grant{Lease: "jobs/many", Token: "1", ValidMs: 100000}
	}
	return gs
}()

// bigMembers is a members reply of a cluster of many hosts: about 30 KB.
var bigMembers = func() []Member {
	ms := make([]Member, 200)
	for i := range ms {
		ms[i] = Member{Name: fmt.Sprintf("host-%03d.example.internal", i), Role: "sidecar", GossipAddr: fmt.Sprintf("10.1.%d.%d:7946", i/250, i%250),
			GossipState: "alive", LastContactMs: -1}
	}
	return ms
}()

// bigHandler answers status with bigLeases, members with bigMembers.
type bigHandler struct{ stubHandler }

func (h *bigHandler) Handle(ctx context.Context, c *Conn, req *Request) *Response {
	switch req.Op {
	case OpStatus:
		gs := append([]Grant(nil), bigLeases...)
		return &Response{Leases: &gs}
	case OpMembers:
		ms := append([]Member(nil), bigMembers...)
		return &Response{Members: &ms}
	}
	return h.stubHandler.Handle(ctx, c, req)
}

// Idle connections cost the server two goroutines each and little memory.
func TestIdleConnectionsAreCheap(t *testing.T) {
	path := startServerWith(t, &Server{Handler: &stubHandler{done: make(chan struct{})}, Limits: Limits{ConnsPerUID: 2000}})
	const n = 1000
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	conns := make([]*Client, n)
	for i := range conns {
		conns[i] = &Client{Socket: path}
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if _, err := conns[i].Hello(cctx); err != nil { // connected and served once
			t.Fatal(err)
		}
		cancel()
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// Each Client has one reader goroutine of its own in this process too.
	perConn := float64(runtime.NumGoroutine()-g0)/n - 1
	heap := float64(after.HeapInuse+after.StackInuse-before.HeapInuse-before.StackInuse) / n
	t.Logf("per idle connection: %.1f server goroutines, %.1f KiB heap+stack (client side included)", perConn, heap/1024)
	if perConn > 2.01 {
		t.Fatalf("%.2f server goroutines per idle connection, want at most 2 (reader, writer)", perConn)
	}
}

// A watcher that does not read, on a host whose leases keep ending, is
// sent events it may not miss (released) without end: once it has twice
// its budget unread it is disconnected, with the reason logged, rather
// than queued for without bound. Events it can be spared (renewed) are
// left out before that.
func TestNonReadingWatcherIsCutOff(t *testing.T) {
	const budget = 32 << 10
	h := &watchHandler{stubHandler: stubHandler{done: make(chan struct{})}, watching: make(chan *Conn, 1)}
	var logged strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logged.Write(b)
	}), nil))
	path := startServerWith(t, &Server{Handler: h, Logger: log, Limits: Limits{QueueBytes: budget}})
	w, _ := dialT(t, path)
	defer w.Close()
	if _, err := w.Write([]byte(`{"id":1,"op":"watch"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	var c *Conn
	select {
	case c = <-h.watching:
	case <-time.After(timeoutIPC):
		t.Fatal("the watch never reached the handler")
	}
	ev := &Event{Event: EventReleased, Lease: "jobs/churn", Token: "12345", Reason: ReasonExplicitRelease}
	size := len(mustJSON(t, ev)) + 1
	sent := 0
	for ; ; sent++ {
		select {
		case <-c.Done():
		default:
			c.Send(&Event{Event: EventRenewed, Lease: "jobs/churn", Token: "12345", ValidMs: 1000})
			c.Send(ev)
			if sent*size < 64<<20 {
				continue
			}
			t.Fatalf("a watcher that reads nothing was sent %d MiB of events and is still connected", sent*size>>20)
		}
		break
	}
	c.mu.Lock()
	queued, held := c.bytes, 0
	for _, q := range c.queue {
		held += cap(q.b)
	}
	c.mu.Unlock()
	t.Logf("cut off after %d released events (%d KiB); %d KiB were queued, in %d KiB of lines", sent, sent*size>>10, queued>>10, held>>10)
	if held > 2*queued {
		t.Fatalf("the queued lines hold %d bytes for the %d they count for against the budget", held, queued)
	}
	if queued > 2*budget+size {
		t.Fatalf("%d bytes were queued for a connection with a budget of %d", queued, budget)
	}
	if sent*size < budget {
		t.Fatalf("cut off after %d bytes of events, under the budget of %d: too early", sent*size, budget)
	}
	mu.Lock()
	out := logged.String()
	mu.Unlock()
	if !strings.Contains(out, "closing a connection that left more events unread") {
		t.Fatalf("no reason logged:\n%s", out)
	}
}

// watchHandler hands the connection of each watch request to the test.
type watchHandler struct {
	stubHandler
	watching chan *Conn
}

func (h *watchHandler) Handle(ctx context.Context, c *Conn, req *Request) *Response {
	if req.Op == OpWatch {
		h.watching <- c
		return &Response{}
	}
	return h.stubHandler.Handle(ctx, c, req)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// One uid's connections together hold at most QueueBytesPerUID of
// unread replies, not QueueBytes on each (issue 21: 256 connections of
// 256 KiB let one local user make the daemon hold 64 MiB): 100
// connections that ask for the members (a reply of 30 KB, answered on a
// goroutine of its own, as it waits on the network) and read nothing are
// held back once the uid's budget is unread, whatever each has queued.
// They leave nothing counted behind them: once they close, the uid is
// served again.
func TestOneUIDsUnreadRepliesAreBounded(t *testing.T) {
	const conns, perConn, perUID = 100, 64 << 10, 512 << 10
	srv := &Server{Handler: &bigHandler{stubHandler{done: make(chan struct{})}},
		Limits: Limits{ConnsPerUID: 2 * conns, InFlightPerUID: 8, QueueBytes: perConn, QueueBytesPerUID: perUID, StallTimeout: 10 * timeoutIPC}}
	path := startServerWith(t, srv)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	// Each connection floods until a write blocks for a second: the
	// server stopped reading it.
	line := []byte(`{"id":1,"op":"members"}` + "\n")
	slow := make([]net.Conn, conns)
	errs := make(chan error, conns)
	for i := range slow {
		nc, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		slow[i] = nc
		go func() {
			for {
				nc.SetWriteDeadline(time.Now().Add(time.Second))
				if _, err := nc.Write(line); err != nil {
					if errors.Is(err, os.ErrDeadlineExceeded) {
						err = nil
					}
					errs <- err
					return
				}
			}
		}()
	}
	for range conns {
		if err := <-errs; err != nil {
			t.Fatalf("a flood's write failed: %v; want it held back (blocked)", err)
		}
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapInuse) - int64(before.HeapInuse)
	uid := os.Getuid()
	srv.users.mu.Lock()
	queued := srv.users.m[uid].queued.n.Load()
	srv.users.mu.Unlock()
	t.Logf("%d connections held back, %d KiB queued for the uid (budget %d KiB, %d KiB a connection); the server's heap grew %d KiB",
		conns, queued>>10, perUID>>10, perConn>>10, grew>>10)
	// Its budget, the replies of the requests in flight when it was
	// reached, and what each connection has of its own (a buffered
	// reader); without the uid's budget, each connection holds 64 KiB of
	// encoded replies and their values: about 15 MiB.
	if max := int64(perUID + 8*40<<10 + 10<<10); queued > max {
		t.Errorf("%d KiB queued for the uid's connections, more than %d KiB", queued>>10, max>>10)
	}
	if grew > 8<<20 {
		t.Errorf("one uid's non-reading connections made the server's heap grow %d MiB", grew>>20)
	}

	for _, nc := range slow {
		nc.Close()
	}
	// The server counts a connection off once it sees it end; a client of
	// the uid is served once they all have.
	for {
		srv.users.mu.Lock()
		x := srv.users.m[uid]
		left := x != nil && x.conns > 0
		srv.users.mu.Unlock()
		if !left {
			break
		}
		<-time.After(10 * time.Millisecond) // polling the server's count; nothing to wait on
	}
	c := &Client{Socket: path}
	defer c.Close()
	hctx, hcancel := context.WithTimeout(context.Background(), timeoutIPC)
	defer hcancel()
	if _, err := c.Hello(hctx); err != nil {
		t.Fatalf("the uid after its non-reading connections closed: %v", err)
	}
}
