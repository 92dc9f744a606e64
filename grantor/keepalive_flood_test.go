package grantor

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
)

// openStream opens a stream of h for a call of method: its headers.
func (h *h2Caller) openStream(method string) (uint32, error) {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":path", method},
		{":authority", "grantor"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	id := h.next
	h.next += 2
	return id, h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
}

// sendCall sends a whole call of method with msg on a new stream of h, as
// call does, without failing the test from another goroutine.
func (h *h2Caller) sendCall(method string, msg proto.Message) (uint32, error) {
	id, err := h.openStream(method)
	if err != nil {
		return 0, err
	}
	b, err := proto.Marshal(msg)
	if err != nil {
		return 0, err
	}
	body := make([]byte, 5+len(b))
	binary.BigEndian.PutUint32(body[1:5], uint32(len(b)))
	copy(body[5:], b)
	return id, h.fr.WriteData(id, true, body)
}

// Review rev2 of fce8abf (K2): a keepalive answer without a listing is
// charged to the caller's queued_bytes whatever the limit, "the request's
// own size bounds it"; but it bounds one answer, not how many. A sidecar
// certificate that opened streams on one connection it never opened a
// window on, each with one keepalive naming 200 made-up sessions (a 15 KB
// request, a 14 KB answer), had the leader keep every answer while a
// stream's call ended once its answer was queued: at fce8abf, 900 such
// streams left 11.6 MiB charged against a queued_bytes of 4 MiB and the
// leader's live heap 16 MiB up, on each of the identity's 32 connections.
// Since 5b00446 a call counts in calls until its stream ends at the
// transport, so what is charged past the limit is at most one answer a
// call (calls, 64): this test pins that bound for keepalives.
func TestKeepAliveAnswersNobodyReadsStayWithinCalls(t *testing.T) {
	p := newTestPKI(t)
	cfg := fastConfig(t, t.TempDir())
	cfg.TLS = p.conf(pki.RoleGrantor, cfg.NodeID)
	n := start(t, cfg, true)
	lim := DefaultLimits()
	const streams, sessions = 900, 200
	req := &grantorpb.KeepAliveRequest{Batch: 1}
	for i := range sessions {
		req.Sessions = append(req.Sessions, &grantorpb.SessionRenewal{Session: fmt.Sprintf("%064d", i), TtlNs: int64(time.Hour)})
	}
	answer := grpcMessageHeader + proto.Size(&grantorpb.KeepAliveResponse{Batch: 1, Rho: 1, EpsilonNs: 1, GrantorTimeNs: 1,
		Sessions: func() []*grantorpb.SessionRenewed {
			out := make([]*grantorpb.SessionRenewed, sessions)
			for i := range out {
				out[i] = &grantorpb.SessionRenewed{Session: req.Sessions[i].Session}
			}
			return out
		}()})

	before := liveHeap()
	h := dialH2(t, n.RPCAddr(), p.conf(pki.RoleSidecar, "flooder"))
	// The client sends within the connection window the grantor gives it
	// (its WINDOW_UPDATEs are followed) and never opens one of its own,
	// so the grantor can write 64 KiB of answers at most.
	headers := map[uint32]bool{}
	dec := hpack.NewDecoder(4096, nil)
	window := 65535
	h.conn.SetReadDeadline(time.Now().Add(waitTimeout))
	readFrame := func() {
		f, err := h.fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the grantor's answers: %v", err)
		}
		switch f := f.(type) {
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				window += int(f.Increment)
			}
		case *http2.GoAwayFrame:
			t.Fatalf("the grantor went away: %v %s", f.ErrCode, f.DebugData())
		case *http2.HeadersFrame:
			if _, err := dec.DecodeFull(f.HeaderBlockFragment()); err != nil {
				t.Fatal(err)
			}
			headers[f.StreamID] = true
		case *http2.RSTStreamFrame:
			headers[f.StreamID] = true
		}
	}
	size := 5 + proto.Size(req)
	var ids []uint32
	for len(ids) < streams {
		for window < size {
			readFrame()
		}
		id, err := h.sendCall(grantorpb.Grantor_KeepAlive_FullMethodName, req)
		if err != nil {
			t.Fatal(err)
		}
		window -= size
		ids = append(ids, id)
	}
	// Every stream answered (headers, or refused), or the read times out.
	for done := 0; done < len(ids); {
		readFrame()
		done = 0
		for _, id := range ids {
			if headers[id] {
				done++
			}
		}
	}
	grew := liveHeap() - before
	queued := queuedOf(n, "flooder")
	t.Logf("%d unread keepalives of %d made-up sessions (%d B answers): live heap +%d KiB, %d KiB queued (queued_bytes %d KiB)",
		streams, sessions, answer, grew>>10, queued>>10, lim.QueuedBytes>>10)
	if max := lim.QueuedBytes + lim.Calls*answer; queued > max {
		t.Errorf("%d KiB charged to the flooder, past its queued_bytes (%d KiB) and one answer a call in progress (%d KiB)", queued>>10, lim.QueuedBytes>>10, max>>10)
	}
	if bound := int64(3 * (lim.QueuedBytes + lim.Calls*answer)); grew > bound {
		t.Errorf("the leader's live heap grew %d MiB under the flood, more than %d MiB", grew>>20, bound>>20)
	}
	h.conn.Close()
	waitQueued(t, n, "flooder", 0)
}
