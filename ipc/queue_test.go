package ipc

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A reply that sat in the queue (a stall, a suspend) leaves with its
// validity shortened by the wait, never with what it had when queued.
func TestQueuedValidityAges(t *testing.T) {
	g := &Grant{Lease: "a", Token: "1", ValidMs: 10_000, DeadlineBoottimeNs: 99}
	leases := []Grant{{Lease: "b", ValidMs: 5_000}}
	for _, tc := range []struct {
		name string
		v    any
		get  func(map[string]any) float64
	}{
		{name: "grant", v: &Response{Grant: g}, get: func(m map[string]any) float64 { return m["valid_ms"].(float64) }},
		{name: "status", v: &Response{Leases: &leases}, get: func(m map[string]any) float64 {
			return m["leases"].([]any)[0].(map[string]any)["valid_ms"].(float64)
		}},
		{name: "event", v: &Event{Event: EventRenewed, ValidMs: 3_000}, get: func(m map[string]any) float64 { return m["valid_ms"].(float64) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before map[string]any
			b, _ := json.Marshal(tc.v)
			json.Unmarshal(b, &before)
			q := queued{v: tc.v, at: boottime() - int64(2*time.Second)} // queued 2s ago
			line, err := q.encode()
			if err != nil {
				t.Fatal(err)
			}
			var after map[string]any
			if err := json.Unmarshal(line, &after); err != nil {
				t.Fatal(err)
			}
			if got, was := tc.get(after), tc.get(before); got > was-2000 {
				t.Fatalf("valid_ms %v after 2s in the queue, was %v", got, was)
			}
		})
	}
	if g.DeadlineBoottimeNs != 99 {
		t.Fatal("the absolute deadline changed")
	}
}

// A grant whose deadline passed while its reply was queued leaves as a
// lost error, never as ok; status leaves such leases out.
func TestQueuedPastDeadlineIsNotOK(t *testing.T) {
	id := uint64(3)
	q := queued{v: &Response{ID: &id, OK: true, Grant: &Grant{Lease: "a", ValidMs: 500}}, at: boottime() - int64(time.Second)}
	line, err := q.encode()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(line, &m)
	if m["ok"] != false || m["error"].(map[string]any)["code"] != CodeLost || m["id"] != 3.0 {
		t.Fatalf("a grant past its deadline left as %s", line)
	}
	leases := []Grant{{Lease: "gone", ValidMs: 100}, {Lease: "kept", ValidMs: 5000}}
	line, _ = queued{v: &Response{OK: true, Leases: &leases}, at: boottime() - int64(time.Second)}.encode()
	if strings.Contains(string(line), "gone") || !strings.Contains(string(line), "kept") {
		t.Fatalf("status after a stall: %s", line)
	}
}

// One event goes to every watcher's queue: each ages its own copy, and
// the event itself is left alone (aging it in place was a data race
// between the connections' writers, and aged it once per connection).
func TestQueuedEventAgedOnACopy(t *testing.T) {
	ev := &Event{Event: EventRenewed, Lease: "a", ValidMs: 5000}
	for i := 0; i < 2; i++ {
		b, err := queued{v: ev, at: boottime() - int64(time.Second)}.encode()
		if err != nil {
			t.Fatal(err)
		}
		var got Event
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if got.ValidMs > 4000 || got.ValidMs < 3000 {
			t.Fatalf("written %d: valid_ms %d, want about 4000 (a second in the queue)", i, got.ValidMs)
		}
	}
	if ev.ValidMs != 5000 {
		t.Fatalf("the queued event itself was changed: valid_ms %d", ev.ValidMs)
	}
}

// A line that aged in the queue may encode shorter (10000 ms of validity
// left becomes 8000 ms) or longer than when it was queued; what it was
// counted as comes off the connection's unread bytes, so that they return
// to zero and the connection is never held back for bytes it does not
// have.
func TestAgedLineLeavesTheCountAtZero(t *testing.T) {
	ours, theirs := unixPair(t)
	lim := Limits{}.withDefaults()
	c := newConn(1, ours, lim, newUIDBytes(0, lim.QueueBytesPerUID), slog.New(slog.DiscardHandler))
	resp := &Response{Grant: &Grant{Lease: "a", Token: "1", ValidMs: 10_000}}
	b, err := marshalLine(resp)
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.queue = append(c.queue, queued{v: resp, at: boottime() - int64(2*time.Second), b: b})
	c.addBytesLocked(len(b))
	c.mu.Unlock()
	poke(c.wake)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.writeLoop()
	}()
	line, err := bufio.NewReader(theirs).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if len(line) == len(b) {
		t.Fatalf("the aged line %q is as long as the queued %q: the test shows nothing", line, b)
	}
	c.markGone()
	<-done
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bytes != 0 {
		t.Fatalf("%d bytes counted unread after the only line was written (queued %d bytes, written %d)", c.bytes, len(b), len(line))
	}
}

// A quick op's reply that waits in the queue keeps its own id: the id it
// was answered with points into the connection's request, which the
// reader overwrites with the next request, and a reply that ages in the
// queue is encoded again from its Response.
func TestQueuedReplyKeepsItsID(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[1])
	f := os.NewFile(uintptr(fds[0]), "pair") // closed by f.Close; nc holds a copy
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	lim := Limits{}.withDefaults()
	c := newConn(1, nc.(*net.UnixConn), lim, newUIDBytes(0, lim.QueueBytesPerUID), slog.New(slog.DiscardHandler))
	c.mu.Lock()
	c.writing = true // the writer is busy: the reply is queued
	c.mu.Unlock()
	c.req.ID = 7
	c.reply(&Response{ID: &c.req.ID, OK: true, Leases: &[]Grant{}})
	c.req.ID = 8 // the reader's next request
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) != 1 {
		t.Fatalf("%d lines queued, want the reply", len(c.queue))
	}
	if id := c.queue[0].v.(*Response).ID; id == nil || *id != 7 {
		t.Fatalf("the queued reply's id is %v after the next request, want 7", id)
	}
}
