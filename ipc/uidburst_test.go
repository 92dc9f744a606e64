package ipc

import (
	"context"
	"net"
	"os"
	"testing"
	"time"
)

// gateHandler answers members as bigHandler does, once release is closed;
// started hears of each members request when it begins.
type gateHandler struct {
	bigHandler
	started chan struct{}
	release chan struct{}
}

func (h *gateHandler) Handle(ctx context.Context, c *Conn, req *Request) *Response {
	if req.Op == OpMembers {
		h.started <- struct{}{}
		<-h.release
	}
	return h.bigHandler.Handle(ctx, c, req)
}

// Review of 2026-12-03 (lane review, finding U1, on 5012ede): the replies
// of requests a uid started while under its unread budget were all
// queued, however far over the budget they took it: 64 connections each
// asking for the members 12 times at once (every request read and
// started before any reply came, as a burst does on a real daemon, whose
// members wait on the grantors) and reading nothing left 7,180 KiB queued
// against a budget of 256 KiB; with the default limits, 1,024 requests
// in flight, one user could make the daemon hold 1,024 members answers of
// the cluster (77 bytes a gossip member each). A reply that only reads
// (members, leases) that would take its uid or its connection past the
// budget is answered resource_exhausted instead: the uid holds at most its
// budget and one such reply, and small errors.
func TestBurstOfReadOnlyRepliesStaysWithinTheUIDBudget(t *testing.T) {
	// 12 requests a connection: the first replies fill the socket's
	// buffer in the kernel (about 200 KiB), the rest queue in the server.
	const conns, each, perConn, perUID = 64, 12, 64 << 10, 256 << 10
	h := &gateHandler{bigHandler: bigHandler{stubHandler{done: make(chan struct{})}}, started: make(chan struct{}, conns*each), release: make(chan struct{})}
	srv := &Server{Handler: h, Limits: Limits{ConnsPerUID: 2 * conns, InFlightPerUID: conns * each, QueueBytes: perConn, QueueBytesPerUID: perUID, StallTimeout: 10 * timeoutIPC}}
	path := startServerWith(t, srv)
	for range conns {
		nc, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		for range each {
			if _, err := nc.Write([]byte(`{"id":1,"op":"members"}` + "\n")); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range conns * each {
		<-h.started // every request started, under the budget
	}
	close(h.release)
	// Wait until every handler has queued its reply (or refusal).
	uid := os.Getuid()
	inflight := func() int {
		srv.users.mu.Lock()
		defer srv.users.mu.Unlock()
		return srv.users.m[uid].inflight
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeoutIPC)
	for inflight() > 0 {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%d members requests still in flight", inflight())
		}
	}
	srv.users.mu.Lock()
	queued := srv.users.m[uid].queued.n.Load()
	srv.users.mu.Unlock()
	reply := len(mustJSON(t, &Response{Members: &bigMembers}))
	t.Logf("%d members replies of %d bytes started under a budget of %d KiB: %d KiB queued for the uid", conns*each, reply, perUID>>10, queued>>10)
	if max := int64(perUID + reply + conns*each*256); queued > max {
		t.Fatalf("%d KiB queued for the uid, more than its budget and one reply (%d KiB)", queued>>10, max>>10)
	}
}
