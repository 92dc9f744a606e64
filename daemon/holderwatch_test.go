package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// serveGated serves srv as a grantor that is not up until open is closed:
// every call fails unavailable before, as while the sidecar cannot reach
// it yet. It returns its address.
func serveGated(t *testing.T, srv grantorpb.GrantorServer, open <-chan struct{}) string {
	t.Helper()
	up := func() error {
		select {
		case <-open:
			return nil
		default:
			return status.Error(codes.Unavailable, "gated: the grantor is not up yet")
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := up(); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := up(); err != nil {
				return err
			}
			return h(srv, ss)
		}))
	grantorpb.RegisterGrantorServer(gs, srv)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	return ln.Addr().String()
}

// rawConn is a socket client that reads the lines as they come, as the
// protocol's Python example does.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dialRaw(t *testing.T, sock string) *rawConn {
	t.Helper()
	nc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	return &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
}

func (c *rawConn) send(line string) {
	c.t.Helper()
	if _, err := c.nc.Write([]byte(line + "\n")); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawConn) next() map[string]any {
	c.t.Helper()
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		c.t.Fatalf("reading: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		c.t.Fatalf("line %q: %v", line, err)
	}
	return m
}

// An observer that subscribes while its sidecar cannot reach the grantor
// gets the reply at once and its first event (no_leader) once the grantor
// is up; a second observer of the name, whose holders the daemon knows by
// then, gets its reply before its first event too. The second failed
// before the server held a subscription's events until its reply: the
// daemon told it the leader while still handling the request, so the
// event came first, and a client that reads up to its reply (PROTOCOL.md's
// Python example) skipped it and waited for ever (TestProtocolExamplesRun
// beside two CPU hogs, where the first observer's event came from the
// grantor before its reply was queued).
func TestObserverGetsReplyThenFirstEvent(t *testing.T) {
	addr := startGrantor(t, clockwatch.System, clockwatch.DefaultTiming())
	open := make(chan struct{})
	cfg := DefaultConfig()
	cfg.Grantors = []string{serveGated(t, newFaultProxy(t, addr, faults{}, 1), open)}
	_, sock := startDaemon(t, cfg)

	first := dialRaw(t, sock)
	first.send(`{"id":1,"op":"observe","lease":"svc/primary"}`)
	if m := first.next(); m["id"] != 1.0 || m["ok"] != true {
		t.Fatalf("first observer: %v, want its reply", m)
	}
	close(open)
	if m := first.next(); m["event"] != "no_leader" || m["lease"] != "svc/primary" {
		t.Fatalf("first observer: %v, want no_leader", m)
	}
	second := dialRaw(t, sock)
	second.send(`{"id":7,"op":"observe","lease":"svc/primary"}`)
	if m := second.next(); m["id"] != 7.0 || m["ok"] != true {
		t.Fatalf("second observer: %v, want its reply first", m)
	}
	if m := second.next(); m["event"] != "no_leader" {
		t.Fatalf("second observer: %v, want no_leader", m)
	}
}

// A name that is no longer watched, and watched again before the stream
// was told, is removed in one request and added in the next: the grantor
// takes a request that removes and adds a name as no change (no new
// snapshot), so the new subscriber would wait for its first event until
// the name's holders changed.
func TestRewatchedNameIsAddedAfterItsRemoval(t *testing.T) {
	hw := newHolderWatch(nil, clockwatch.System, slog.New(slog.DiscardHandler))
	a, b := &ipc.Conn{}, &ipc.Conn{}
	if err := hw.subscribe(a, "svc/x", true); err != nil {
		t.Fatal(err)
	}
	if req := hw.changes(); !slices.Equal(req.GetAdd(), []string{"svc/x"}) || len(req.GetRemove()) != 0 {
		t.Fatalf("first request %v, want svc/x added", req)
	}
	hw.apply(&grantorpb.WatchEvent{Lease: "svc/x", Kind: grantorpb.WatchEvent_SNAPSHOT})
	hw.dropConn(a)
	if err := hw.subscribe(b, "svc/x", true); err != nil {
		t.Fatal(err)
	}
	if req := hw.changes(); !slices.Equal(req.GetRemove(), []string{"svc/x"}) || len(req.GetAdd()) != 0 {
		t.Fatalf("second request %v, want svc/x removed only", req)
	}
	select {
	case <-hw.wake:
	default:
		t.Fatal("the stream loop was not woken to add the name again")
	}
	if req := hw.changes(); !slices.Equal(req.GetAdd(), []string{"svc/x"}) || len(req.GetRemove()) != 0 {
		t.Fatalf("third request %v, want svc/x added", req)
	}
	if hw.changes() != nil {
		t.Fatal("a fourth request with nothing to change")
	}
}
