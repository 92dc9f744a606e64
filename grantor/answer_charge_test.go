package grantor

import (
	"bytes"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
)

// h2Answers reads every frame a grantor sends on h's connection, as a
// client that reads its socket but never opens a flow-control window
// would, and keeps how each stream was answered: "headers" (the answer's
// headers, its data waiting for a window), or the grpc-status of its
// trailers.
type h2Answers struct {
	mu      sync.Mutex
	how     map[uint32]string
	changed chan struct{}
	err     error
}

func readAnswers(h *h2Caller) *h2Answers {
	a := &h2Answers{how: map[uint32]string{}, changed: make(chan struct{})}
	go func() {
		dec := hpack.NewDecoder(4096, nil)
		for {
			f, err := h.fr.ReadFrame()
			a.mu.Lock()
			if err != nil {
				a.err = err
				close(a.changed)
				a.mu.Unlock()
				return
			}
			if hf, ok := f.(*http2.HeadersFrame); ok {
				fields, err := dec.DecodeFull(hf.HeaderBlockFragment())
				if err != nil {
					a.err = err
				}
				if a.how[hf.StreamID] == "" {
					a.how[hf.StreamID] = "headers"
				}
				for _, fl := range fields {
					if fl.Name == "grpc-status" {
						a.how[hf.StreamID] = "grpc-status " + fl.Value
					}
				}
				close(a.changed)
				a.changed = make(chan struct{})
			}
			a.mu.Unlock()
		}
	}()
	return a
}

// wait waits until every stream of ids was answered, and returns how.
func (a *h2Answers) wait(t *testing.T, ids []uint32) []string {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		a.mu.Lock()
		out := make([]string, len(ids))
		done := true
		for i, id := range ids {
			out[i] = a.how[id]
			done = done && out[i] != ""
		}
		ch, err := a.changed, a.err
		a.mu.Unlock()
		if done {
			return out
		}
		if err != nil {
			t.Fatalf("reading the grantor's answers: %v", err)
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("streams not answered: %v", out)
		}
	}
}

// call sends a whole unary call of method with msg.
func (h *h2Caller) call(method string, msg proto.Message) uint32 {
	h.t.Helper()
	id, err := h.sendCall(method, msg)
	if err != nil {
		h.t.Fatal(err)
	}
	return id
}

// Review of 2026-12-03 (lane review, finding Q1): the pages of Leases (and
// Members) are charged to the caller's queued_bytes until its connection
// has written as many bytes (6126578), but any bytes paid them off: the
// trailers of calls refused at once, which are not flow-controlled. An
// operator that reads its socket and never opens a window (so that no
// page is ever sent) made its pages' charge go away with calls of a
// method that does not exist, each answered UNIMPLEMENTED naming it, and
// had the leader keep far more pages than its queued_bytes. Now only a
// page's own bytes sent, or its stream's end, pay it off: past the
// operator's queued_bytes its listings are refused RESOURCE_EXHAUSTED
// whatever else it makes the leader write.
func TestUnsentPagesStayChargedWhateverElseIsWritten(t *testing.T) {
	p := newTestPKI(t)
	cfg := fastConfig(t, t.TempDir())
	cfg.TLS = p.conf(pki.RoleGrantor, cfg.NodeID)
	lim := DefaultLimits()
	lim.QueuedBytes = 256 << 10
	cfg.Limits.Identities = map[string]Limits{"operator/lister": lim}
	n := start(t, cfg, true)
	side := dialWith(t, n.RPCAddr(), p.conf(pki.RoleSidecar, "filler").ClientCredentials())
	const held = 300
	for i := range held {
		seq := uint64(i + 1)
		req := acqReq("fill", seq, fmt.Sprintf("page/%03d/%s", i, strings.Repeat("x", 200)))
		req.Id.FirstUnacked = seq
		// Held for the whole test: nothing renews them, and beside two
		// CPU hogs the test took 26 s, past acqReq's 10 s term; the
		// pages listed after they lapsed were empty (4 bytes) and went
		// out, so the last listing was not refused.
		req.TtlNs = int64(time.Hour)
		if r := mustAcquire(t, side, req); !r.Granted {
			t.Fatalf("acquire %d: %v", i, r)
		}
	}

	h := dialH2(t, n.RPCAddr(), p.conf(pki.RoleOperator, "lister"))
	answers := readAnswers(h)
	const rounds, payers = 20, 100
	var pages []uint32
	for r := range rounds {
		pages = append(pages, h.call(grantorpb.Grantor_Leases_FullMethodName, &grantorpb.LeasesRequest{Limit: maxLeasesPage}))
		answers.wait(t, pages[len(pages)-1:])
		// Calls answered at once, each with a long grpc-message: what
		// the grantor writes for them is no page.
		var payer []uint32
		for i := range payers {
			payer = append(payer, h.call(fmt.Sprintf("/leaseside.grantor.v1.Grantor/No%d-%d-%s", r, i, strings.Repeat("y", 900)), &grantorpb.MembersRequest{}))
		}
		answers.wait(t, payer)
	}
	how := answers.wait(t, pages)
	kept := 0
	for _, s := range how {
		if s == "headers" {
			kept++
		}
	}
	resp, err := n.listLeases(tctx(t), Identity{Role: RoleOperator, Name: "lister"}, &grantorpb.LeasesRequest{Limit: maxLeasesPage})
	if err != nil {
		t.Fatal(err)
	}
	page := proto.Size(resp)
	t.Logf("%d of %d listings of %d bytes taken and never sent (%d KiB), with queued_bytes %d KiB; answers %v",
		kept, rounds, page, kept*page>>10, lim.QueuedBytes>>10, how)
	// The connection's first 64 KiB (its window) went out; a page more
	// may pass the check at the limit.
	if max := lim.QueuedBytes/page + 2; kept > max {
		t.Fatalf("the leader keeps %d unsent pages of %d bytes for the operator, more than its queued_bytes allow (%d)", kept, page, max)
	}
	if refused := fmt.Sprintf("grpc-status %d", codes.ResourceExhausted); how[len(how)-1] != refused {
		t.Fatalf("the last listing: %q, want %q", how[len(how)-1], refused)
	}
}

// queuedOf returns the queued bytes of the account of name (ROLE/NAME).
func queuedOf(n *running, name string) int { return n.accounts.snapshot()[name].QueuedBytes }

// waitQueued waits until the account of name has want queued bytes.
func waitQueued(t *testing.T, n *running, name string, want int) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(waitTimeout)
	for queuedOf(n, name) != want {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s has %d bytes queued, want %d", name, queuedOf(n, name), want)
		}
	}
}

// A page's charge is given back when the page is sent, and when the
// client resets its stream before it was (grpc-go then drops it): an
// operator that reads its answers, or gives up on them, is not locked
// out of its listings.
func TestAnswersSentOrResetAreNoLongerCharged(t *testing.T) {
	p := newTestPKI(t)
	cfg := fastConfig(t, t.TempDir())
	cfg.TLS = p.conf(pki.RoleGrantor, cfg.NodeID)
	n := start(t, cfg, true)
	side := dialWith(t, n.RPCAddr(), p.conf(pki.RoleSidecar, "filler").ClientCredentials())
	for i := range 100 {
		seq := uint64(i + 1)
		req := acqReq("fill", seq, fmt.Sprintf("page/%03d/%s", i, strings.Repeat("x", 200)))
		req.Id.FirstUnacked = seq
		req.TtlNs = int64(time.Hour) // nothing renews them: held for the whole test, however slow
		mustAcquire(t, side, req)
	}
	op := dialWith(t, n.RPCAddr(), p.conf(pki.RoleOperator, "reader").ClientCredentials())
	for range 50 {
		if _, err := op.Leases(tctx(t), &grantorpb.LeasesRequest{}); err != nil {
			t.Fatal(err)
		}
		if _, err := op.Members(tctx(t), &grantorpb.MembersRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	waitQueued(t, n, "operator/reader", 0)

	h := dialH2(t, n.RPCAddr(), p.conf(pki.RoleOperator, "reader"))
	answers := readAnswers(h)
	var ids []uint32
	for range 3 {
		ids = append(ids, h.call(grantorpb.Grantor_Leases_FullMethodName, &grantorpb.LeasesRequest{}))
	}
	answers.wait(t, ids)
	if q := queuedOf(n, "operator/reader"); q == 0 {
		t.Fatal("three pages that cannot be sent are not charged")
	}
	for _, id := range ids {
		if err := h.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			t.Fatal(err)
		}
	}
	waitQueued(t, n, "operator/reader", 0)
}

// streamID reads the stream ID grpc-go does not export; if a grpc-go
// upgrade moves it, this fails (and chargeAnswer charges nothing).
func TestStreamIDOfACall(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ids := make(chan uint32, 3)
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		id, ok := streamID(stream.Context())
		if !ok {
			t.Error("no stream ID in the call's context")
		}
		ids <- id
		return status.Error(codes.Unimplemented, "test")
	}))
	go srv.Serve(ln)
	defer srv.Stop()
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	var got []uint32
	for range 3 {
		_ = cc.Invoke(tctx(t), "/x.Y/Z", &grantorpb.MembersRequest{}, &grantorpb.MembersResponse{})
		got = append(got, <-ids)
	}
	if !slices.Equal(got, []uint32{1, 3, 5}) {
		t.Fatalf("stream IDs %v, want [1 3 5]", got)
	}
}

// frameScanner follows frames through chunks of any size.
func TestFrameScannerAcrossChunks(t *testing.T) {
	var buf bytes.Buffer
	buf.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&buf, nil)
	fr.WriteSettings()
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte("hdr"), EndHeaders: true})
	fr.WriteData(1, false, make([]byte, 1000))
	fr.WriteData(3, false, make([]byte, 77))
	fr.WriteData(1, false, make([]byte, 24))
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte("trailers"), EndHeaders: true, EndStream: true})
	fr.WriteRSTStream(3, http2.ErrCodeCancel)
	fr.WritePing(false, [8]byte{})
	all := buf.Bytes()
	for _, chunk := range []int{1, 2, 5, 9, 10, 100, len(all)} {
		s := frameScanner{trailers: true, skip: h2ClientPreface}
		data := map[uint32]int{}
		var ended []uint32
		for p := all; len(p) > 0; {
			k := min(chunk, len(p))
			s.scan(p[:k], func(id uint32, n int) { data[id] += n }, func(id uint32) { ended = append(ended, id) })
			p = p[k:]
		}
		if data[1] != 1024 || data[3] != 77 || len(data) != 2 || !slices.Equal(ended, []uint32{1, 3}) {
			t.Fatalf("chunks of %d: data %v, ended %v", chunk, data, ended)
		}
		// What a client sends: its END_STREAM ends only its side.
		r := frameScanner{skip: h2ClientPreface}
		ended = nil
		r.scan(all, func(uint32, int) {}, func(id uint32) { ended = append(ended, id) })
		if !slices.Equal(ended, []uint32{3}) {
			t.Fatalf("read side: ended %v, want only the reset stream 3", ended)
		}
	}
}

// Every client of a Unix socket has the same address, by which
// chargeAnswer finds a call's connection: each identityConn of one has an
// address of its own, so that no connection's answers are charged to
// another's, or to none.
func TestUnixSocketConnectionsAreToldApart(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	e := newEdgeLimits(newAccounts(DefaultAccountLimits(), nil, nil), nil)
	acct := &account{}
	var ics []*identityConn
	for range 2 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		ic := newIdentityConn(s, acct, e)
		defer ic.Close()
		ics = append(ics, ic)
	}
	a, b := ics[0].RemoteAddr().String(), ics[1].RemoteAddr().String()
	if a == b {
		t.Fatalf("two connections of a Unix socket both have address %q", a)
	}
	for _, ic := range ics {
		if v, ok := e.byAddr.Load(ic.RemoteAddr().String()); !ok || v != ic {
			t.Fatalf("connection %s is not found by its address", ic.RemoteAddr())
		}
	}
}
