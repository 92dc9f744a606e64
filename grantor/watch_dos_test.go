package grantor

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fillSemaphore grants every slot of semaphore name, each with the
// largest value.
func fillSemaphore(t *testing.T, h *harness, name string) {
	t.Helper()
	value := strings.Repeat("v", MaxValueBytes)
	for i := 0; i < MaxHolders; i++ {
		c := semAcq(fmt.Sprintf("%s-s%d", name, i), 1, name, MaxHolders)
		c.Value = value
		if r := h.acquire(c); !r.Granted {
			t.Fatalf("%s slot %d: %+v", name, i, r)
		}
	}
}

// Review finding R8-1: each WatchRequest{remove: [X], add: [X]} queued a
// fresh SNAPSHOT of X's holders, up to maxWatchQueue per stream, and the
// reader never read: before the fix the heap grew 89 MiB per stream, ~22
// GiB for the streams one identity may open. A remove and add of one name
// in one request changes nothing now, and a removal drops the name's
// queued events, so the stream holds one snapshot whatever it sends.
func TestWatchReAddOfANameQueuesOneSnapshot(t *testing.T) {
	h, hub := watchHarness(t, DefaultMaxWatchStreams)
	h.takeOffice()
	fillSemaphore(t, h, "sem")
	const streams, requests = 2, 1000 // before the fix, 22 MiB per stream
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var ws []*watchStream
	for s := 0; s < streams; s++ {
		w, err := hub.open("attacker")
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
		for i := 0; i < requests; i++ {
			var err error
			if i%2 == 0 {
				err = w.update([]string{"sem"}, []string{"sem"}) // one request
			} else {
				w.remove([]string{"sem"}) // two requests
				err = w.add([]string{"sem"})
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	perStream := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / streams
	t.Logf("heap grew %d KiB per stream (x%d streams per identity = %d MiB)", perStream>>10, DefaultMaxWatchStreams, perStream*DefaultMaxWatchStreams>>20)
	for _, w := range ws {
		evs := drain(t, w)
		if len(evs) != 1 || len(evs[0].Holders) != MaxHolders {
			t.Fatalf("queued after re-adds: %s, want one snapshot of %d holders", describe(evs), MaxHolders)
		}
		w.close()
	}
	if perStream*DefaultMaxWatchStreams > 512<<20 {
		t.Fatalf("one identity can make the leader hold %d MiB of queued watch events", perStream*DefaultMaxWatchStreams>>20)
	}
	if n := hub.perIdentity["attacker"]; n != nil {
		t.Fatalf("closed streams left %d streams, %d bytes counted", n.streams, n.bytes.Load())
	}
}

// R8-1, the bound itself: a stream is dropped with RESOURCE_EXHAUSTED once
// it holds more bytes of events unread than it may, and once its
// identity's streams together do; what the others hold stays counted and
// is released when they close.
func TestWatchQueueIsBoundedInBytes(t *testing.T) {
	h, hub := watchHarness(t, DefaultMaxWatchStreams)
	h.takeOffice()
	for _, name := range []string{"a", "b", "c"} {
		fillSemaphore(t, h, name)
	}
	one := func() int { // the bytes of one full snapshot
		w, err := hub.open("probe")
		if err != nil {
			t.Fatal(err)
		}
		defer w.close()
		if err := w.add([]string{"a"}); err != nil {
			t.Fatal(err)
		}
		return w.bytes
	}()
	exhausted := func(w *watchStream) bool {
		_, err := w.take()
		return status.Code(err) == codes.ResourceExhausted
	}

	hub.streamBytes, hub.identityBytes = 2*one+one/2, 1<<30 // snapshots differ in a few bytes (tokens)
	w, _ := hub.open("x")
	if err := w.add([]string{"a", "b"}); err != nil || exhausted(w) {
		t.Fatalf("two snapshots within the stream's bound: %v", err)
	}
	w.add([]string{"c"})
	if !exhausted(w) {
		t.Fatalf("a stream holding three snapshots of %d bytes, more than %d, was not dropped", one, hub.streamBytes)
	}
	w.close()

	hub.streamBytes, hub.identityBytes = 1<<30, 3*one+one/2
	var ws []*watchStream
	for i, name := range []string{"a", "b", "c", "a"} {
		w, err := hub.open("x")
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
		w.add([]string{name})
		if got, want := exhausted(w), i == 3; got != want {
			t.Fatalf("stream %d of the identity dropped: %v, want %v", i, got, want)
		}
	}
	sending := 0
	for _, w := range ws {
		sending += w.inflight
	}
	if got := hub.perIdentity["x"].bytes.Load(); got != int64(sending) || sending < 3*one-one/2 {
		t.Fatalf("identity counts %d bytes, its streams are sending %d (three snapshots of about %d)", got, sending, one)
	}
	for _, w := range ws {
		w.close()
	}
	if hub.perIdentity["x"] != nil {
		t.Fatal("the identity's count outlived its streams")
	}
}
