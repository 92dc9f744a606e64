package grantor

import (
	"crypto/tls"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
)

// h2Caller speaks raw HTTP/2 to a grantor's gRPC port, as review finding
// R8-14's attacker did: it starts calls and never finishes them.
type h2Caller struct {
	t    *testing.T
	conn *tls.Conn
	fr   *http2.Framer
	next uint32 // next stream ID
}

// dialH2 connects with conf's certificate; it returns nil when the
// grantor closes the connection before its first SETTINGS (a refused
// connection).
func dialH2(t *testing.T, addr string, conf *pki.Configurator) *h2Caller {
	t.Helper()
	c, err := tls.Dial("tcp", addr, conf.ClientConfig(pki.ALPNgRPC, pki.Peer{Roles: []string{pki.RoleGrantor}}))
	if err != nil {
		return nil
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		return nil
	}
	h := &h2Caller{t: t, conn: c, fr: http2.NewFramer(c, c), next: 1}
	if err := h.fr.WriteSettings(); err != nil {
		return nil
	}
	if _, err := h.fr.ReadFrame(); err != nil { // the server's SETTINGS
		return nil
	}
	return h
}

// start opens a call to method whose request declares size bytes and
// sends only its first few.
func (h *h2Caller) start(method string, size int) uint32 {
	h.t.Helper()
	id, err := h.openStream(method)
	if err != nil {
		h.t.Fatal(err)
	}
	msg := []byte{0, byte(size >> 24), byte(size >> 16), byte(size >> 8), byte(size), 0x0a, 0x01}
	if err := h.fr.WriteData(id, false, msg); err != nil {
		h.t.Fatal(err)
	}
	return id
}

// answers reads until the server has handled everything sent so far (it
// answers a PING after the frames before it) and returns, per stream it
// answered, how: "refused" (RST_STREAM) or the grpc-status of its
// trailers.
func (h *h2Caller) answers() map[uint32]string {
	h.t.Helper()
	if err := h.fr.WritePing(false, [8]byte{1}); err != nil {
		h.t.Fatal(err)
	}
	return h.read(true)
}

// read reads frames until the PING's answer (untilPing) or the first
// answer of a stream, and returns the answers read as answers does.
func (h *h2Caller) read(untilPing bool) map[uint32]string {
	h.t.Helper()
	out := map[uint32]string{}
	dec := hpack.NewDecoder(4096, nil)
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			h.t.Fatalf("reading the grantor's answers: %v", err)
		}
		if !untilPing && len(out) > 0 {
			return out
		}
		switch f := f.(type) {
		case *http2.PingFrame:
			if f.IsAck() && untilPing {
				return out
			}
		case *http2.RSTStreamFrame:
			if _, done := out[f.StreamID]; !done {
				out[f.StreamID] = "refused"
			}
		case *http2.HeadersFrame:
			fields, err := dec.DecodeFull(f.HeaderBlockFragment())
			if err != nil {
				h.t.Fatal(err)
			}
			for _, hf := range fields {
				if hf.Name == "grpc-status" {
					out[f.StreamID] = "grpc-status " + hf.Value
				}
			}
		}
	}
}

// Review finding R8-14: a certificate holder starts calls that declare a
// large request and never finish it; grpc-go holds what arrives of each
// until the call ends. What one certificate can make a grantor hold is
// bounded: a request larger than MaxRecvMsgSize (now 256 KiB; was 4 MiB)
// is refused as soon as its length is read, a connection carries at most
// MaxConcurrentStreams calls, a certificate at most its account's calls
// over all its connections and at most its conns. Here (limits lowered to
// keep the test small: 50 calls a connection, 120 calls and 4
// connections a certificate) the attacker's fifth connection is refused,
// exactly 120 of its 300 unfinished calls are held, and a sidecar with
// another certificate acquires meanwhile.
func TestRPCUnfinishedCallsAreBounded(t *testing.T) {
	p := newTestPKI(t)
	cfg := fastConfig(t, t.TempDir())
	cfg.TLS = p.conf(pki.RoleGrantor, cfg.NodeID)
	cfg.MaxConcurrentStreams = 50
	lim := DefaultLimits()
	lim.Calls, lim.Conns = 120, 4
	cfg.Limits.Identities = map[string]Limits{"sidecar/h2": lim}
	n := start(t, cfg, true)
	attacker := p.conf(pki.RoleSidecar, "h2")

	// A request declaring the old limit is refused before it is read
	// (under a certificate of its own: the grantor may count this
	// connection a moment after it is closed).
	h := dialH2(t, n.RPCAddr(), p.conf(pki.RoleSidecar, "h3"))
	big := h.start(grantorpb.Grantor_Acquire_FullMethodName, 4<<20-16)
	// The refusal comes from the call's goroutine, maybe after the PING's
	// answer: read on until it comes (one PING only: the grantor's
	// keepalive policy closes a connection that pings too often).
	got := h.answers()
	for got[big] == "" {
		got = h.read(false)
	}
	if want := fmt.Sprintf("grpc-status %d", codes.ResourceExhausted); got[big] != want {
		t.Fatalf("a 4 MiB request: %q, want %q", got[big], want)
	}
	h.conn.Close()

	held, refusedConns := 0, 0
	status := map[string]int{}
	for range 5 {
		h := dialH2(t, n.RPCAddr(), attacker)
		if h == nil {
			refusedConns++
			continue
		}
		for range 60 {
			h.start(grantorpb.Grantor_Acquire_FullMethodName, DefaultMaxRecvMsgSize)
		}
		got := h.answers()
		held += 60 - len(got)
		for _, how := range got {
			status[how]++
		}
	}
	t.Logf("held %d unfinished calls of %d KiB each (%d KiB), refused %d connections; refused calls: %v",
		held, DefaultMaxRecvMsgSize>>10, held*DefaultMaxRecvMsgSize>>10, refusedConns, status)
	if held != 120 || refusedConns != 1 {
		t.Fatalf("held %d unfinished calls and refused %d connections of the same certificate, want 120 and 1", held, refusedConns)
	}
	// The first two connections: 10 calls each over their 50; the third
	// reaches the certificate's 120 after 20, the fourth has none left.
	if status["refused"] != 2*10 || status[fmt.Sprintf("grpc-status %d", codes.ResourceExhausted)] != 40+60 {
		t.Fatalf("refused calls %v, want 20 over the connections' limit and 100 over the certificate's", status)
	}
	side := dialWith(t, n.RPCAddr(), p.conf(pki.RoleSidecar, "h1").ClientCredentials())
	if a := mustAcquire(t, side, acqReq("s1", 1, "x")); !a.Granted {
		t.Fatalf("a sidecar's acquire during the attack: %v", a)
	}
}

// Issue 21's flood (c), cut short: a sidecar's Releases under sessions
// that never existed change nothing; past its unchanged_calls_per_sec (2
// here) the next Release is refused with RESOURCE_EXHAUSTED naming the
// limit, before the grantor does anything with it. Its Acquire still
// goes through, and another sidecar's Release is answered.
func TestUnchangedCallsRefusedAtTheEdge(t *testing.T) {
	p := newTestPKI(t)
	cfg := fastConfig(t, t.TempDir())
	cfg.TLS = p.conf(pki.RoleGrantor, cfg.NodeID)
	lim := DefaultLimits()
	lim.UnchangedCalls = 2
	cfg.Limits.Identities = map[string]Limits{"sidecar/evil": lim}
	n := start(t, cfg, true)
	evil := dialWith(t, n.RPCAddr(), p.conf(pki.RoleSidecar, "evil").ClientCredentials())
	answered := 0
	var refusal error
	for i := 0; i < 1000 && refusal == nil; i++ {
		_, err := evil.Release(tctx(t), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: fmt.Sprintf("never-%d", i), Seq: 1},
			Lease: "jobs/x", Owner: "o", Token: 1})
		if err != nil {
			refusal = err
			break
		}
		answered++
	}
	if status.Code(refusal) != codes.ResourceExhausted || !strings.Contains(status.Convert(refusal).Message(), "sidecar/evil is at its limit of unchanged_calls_per_sec") {
		t.Fatalf("after %d Releases under unknown sessions answered: %v, want RESOURCE_EXHAUSTED naming unchanged_calls_per_sec", answered, refusal)
	}
	if answered < 2 {
		t.Errorf("only %d Releases answered before the first refusal, want the bucket's 2", answered)
	}
	if got := n.accounts.refused[limUnchangedCalls].Load(); got == 0 {
		t.Error("the refusal is not counted")
	}
	if a := mustAcquire(t, evil, acqReq("evil-s", 1, "jobs/evil")); !a.Granted {
		t.Fatalf("the same sidecar's Acquire: %v", a)
	}
	other := dialWith(t, n.RPCAddr(), p.conf(pki.RoleSidecar, "victim").ClientCredentials())
	if _, err := other.Release(tctx(t), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: "never-v", Seq: 1},
		Lease: "jobs/x", Owner: "o", Token: 1}); err != nil {
		t.Fatalf("another sidecar's Release: %v", err)
	}
}
