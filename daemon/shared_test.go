package daemon

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// Shared (read/write) locks through two daemons on one real grantor:
// readers on both hosts hold the name together, each with its own token
// (two on one host, each its own slot); a writer is refused beside them,
// or queues; once a writer queues, a new reader is refused (waiting
// writers keep readers out); the writer gets the name when the readers
// leave, with a token above theirs; status shows shared grants.
func TestSharedLockThroughTheDaemon(t *testing.T) {
	r := newPrimsRig(t)
	read := ipc.AcquireOptions{TTL: 5 * time.Second, Shared: true}
	ca1, ca2, cb := client(t, r.a), client(t, r.a), client(t, r.b)
	var readers []*ipc.Lease
	for _, c := range []*ipc.Client{ca1, ca2, cb} {
		l, err := c.Acquire(ctxT(t), "rw/x", read)
		if err != nil {
			t.Fatal(err)
		}
		if !l.Shared || l.Holders != len(readers)+1 {
			t.Fatalf("reader %d: %+v", len(readers)+1, l.Grant)
		}
		readers = append(readers, l)
	}
	st, err := client(t, r.a).Status(ctxT(t))
	if err != nil || len(st) != 2 || !st[0].Shared || !st[1].Shared || st[0].Token == st[1].Token {
		t.Fatalf("status of two readers on one host: %+v %v", st, err)
	}
	cw := client(t, r.b)
	var ie *ipc.Error
	if _, err := cw.Acquire(ctxT(t), "rw/x", ipc.AcquireOptions{TTL: 5 * time.Second}); !errors.As(err, &ie) || ie.Code != ipc.CodeLeaseHeld || !strings.Contains(ie.Message, "held shared by 3") {
		t.Fatalf("writer beside readers: %v", err)
	}
	if _, err := ca1.Acquire(ctxT(t), "rw/x", ipc.AcquireOptions{TTL: 5 * time.Second}); !errors.As(err, &ie) || ie.Code != ipc.CodeBadRequest {
		t.Fatalf("a reader asking exclusive for what it holds shared: %v", err)
	}
	got := make(chan *ipc.Lease, 1)
	go func() {
		l, err := cw.Acquire(ctxT(t), "rw/x", ipc.AcquireOptions{TTL: 5 * time.Second, Wait: time.Minute})
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	// Once the writer waits, a new reader is refused.
	probe := client(t, r.b)
	waitFor(t, func() bool {
		_, err := probe.Acquire(ctxT(t), "rw/x", read)
		if err == nil { // before the writer queued: a reader like the others
			if err := probe.Release(ctxT(t), "rw/x"); err != nil {
				t.Fatal(err)
			}
			return false
		}
		return errors.As(err, &ie) && ie.Code == ipc.CodeLeaseHeld && strings.Contains(ie.Message, "waits for it ahead")
	})
	for i, c := range []*ipc.Client{ca1, ca2, cb} {
		if err := c.Release(ctxT(t), "rw/x"); err != nil {
			t.Fatalf("release reader %d: %v", i+1, err)
		}
	}
	w := <-got
	if w == nil || w.Shared {
		t.Fatalf("writer: %+v", w)
	}
	wt, _ := w.TokenValue()
	for _, l := range readers {
		if rt, _ := l.TokenValue(); wt <= rt {
			t.Fatalf("writer token %d not above reader token %d", wt, rt)
		}
	}
	if _, err := client(t, r.a).Acquire(ctxT(t), "rw/x", ipc.AcquireOptions{TTL: 5 * time.Second, Shared: true, Limit: 2}); !errors.As(err, &ie) || ie.Code != ipc.CodeBadRequest {
		t.Fatalf("shared with a limit: %v", err)
	}
}

// A grantor that does not know shared locks (older than grantor protocol
// 12: AcquireShared is UNIMPLEMENTED) refuses a shared acquire, which the
// daemon answers not_supported; it never takes it for an exclusive one.
func TestSharedLockRefusedByAnOlderGrantor(t *testing.T) {
	r := newRestartRig(t)
	r.start(t)
	c := &ipc.Client{Socket: r.sock}
	t.Cleanup(func() { c.Close() })
	var ie *ipc.Error
	if _, err := c.Acquire(ctxT(t), "rw/x", ipc.AcquireOptions{TTL: 5 * time.Second, Shared: true}); !errors.As(err, &ie) || ie.Code != ipc.CodeNotSupported {
		t.Fatalf("shared acquire at an older grantor: %v", err)
	}
	select {
	case req := <-r.g.acquires:
		t.Fatalf("the older grantor got an exclusive Acquire for a shared one: %v", req)
	default:
	}
}

// A shared grant survives a restart of the daemon as shared: the state
// file says so and the restored lease shows it.
func TestSharedLockKeptAcrossRestart(t *testing.T) {
	r := newRestartRig(t)
	d, stop := r.start(t)
	d.persisted(ctxT(t)) // the first write (a new log from the table) is done
	l := &lease{name: "rw/x", key: slotKey("rw/x", 1, true, "detached:1"), token: 7, ttl: 9 * time.Second, shared: true, holders: 2,
		owner: ownerDetached, ownerID: "detached:1", stopWatch: func() {}}
	d.mu.Lock()
	l.sess = d.g.sessionFor(l.ttl)
	l.t0 = d.clock.Now()
	l.deadline = d.timing().HolderDeadline(l.t0, l.ttl)
	d.stepLocked(l, evGranted, "", l.t0) // into the table and the lease log, as a grant
	d.mu.Unlock()
	stop()
	st := r.state(t)
	if len(st.Leases) != 1 || !st.Leases[0].Shared {
		t.Fatalf("state file: %+v", st.Leases)
	}
	r.start(t)
	c := &ipc.Client{Socket: r.sock}
	t.Cleanup(func() { c.Close() })
	g, err := c.Check(ctxT(t), "rw/x", strconv.FormatUint(l.token, 10))
	if err != nil || !g.Shared || g.Holders != 2 {
		t.Fatalf("after the restart: %+v %v", g, err)
	}
}
