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
	h, hub := watchHarness(t, DefaultLimits())
	h.takeOffice()
	fillSemaphore(t, h, "sem")
	const streams, requests = 2, 1000 // before the fix, 22 MiB per stream
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var ws []*watchStream
	for s := 0; s < streams; s++ {
		w, err := hub.open(sc("attacker"))
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
	if perStream*DefaultMaxWatchStreams > DefaultMaxQueuedBytes {
		t.Fatalf("one identity can make the leader hold %d MiB of queued watch events", perStream*DefaultMaxWatchStreams>>20)
	}
	if u, ok := hub.accounts.snapshot()["attacker"]; ok {
		t.Fatalf("closed streams left %+v charged", u)
	}
}

// R8-1, the bound itself, now the account's queued_bytes: an identity's
// stream is dropped with RESOURCE_EXHAUSTED naming the limit once its
// streams together would hold more bytes of events unread than it may;
// what the others hold stays charged, and is given back when they close.
func TestWatchQueuedBytesAreChargedToTheAccount(t *testing.T) {
	h, hub := watchHarness(t, DefaultLimits())
	h.takeOffice()
	for _, name := range []string{"a", "b", "c"} {
		fillSemaphore(t, h, name)
	}
	one := func() int { // the bytes of one full snapshot
		w, err := hub.open(sc("probe"))
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
		return status.Code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), "queued_bytes")
	}
	lim := DefaultLimits()
	lim.QueuedBytes = 3*one + one/2 // snapshots differ in a few bytes (tokens)
	hub.accounts.limits.Identities = map[string]Limits{"sidecar/x": lim}
	var ws []*watchStream
	for i, name := range []string{"a", "b", "c", "a"} {
		w, err := hub.open(sc("x"))
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
	acct := ws[0].acct
	if got := acct.queued.Load(); got != int64(sending) || sending < 3*one-one/2 {
		t.Fatalf("the account holds %d bytes, its streams are sending %d (three snapshots of about %d)", got, sending, one)
	}
	for _, w := range ws {
		w.close()
	}
	if u, ok := hub.accounts.snapshot()["x"]; ok {
		t.Fatalf("the account outlived its streams: %+v", u)
	}
}

// The names an identity watches are charged over all its streams: a
// request that would pass watch_names adds none of its names and is
// refused naming the limit; removing names and closing streams gives
// them back (the flood of issue 21: 256 streams x 4,096 names).
func TestWatchNamesAreChargedOverStreams(t *testing.T) {
	lim := DefaultLimits()
	lim.WatchNames = 10
	_, hub := watchHarness(t, lim)
	names := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s/%d", prefix, i)
		}
		return out
	}
	w1, _ := hub.open(sc("x"))
	w2, _ := hub.open(sc("x"))
	if err := w1.add(names("a", 6)); err != nil {
		t.Fatal(err)
	}
	if err := w1.add(names("a", 6)); err != nil {
		t.Fatalf("names it watches already are not charged again: %v", err)
	}
	err := w2.add(names("b", 5))
	if status.Code(toStatus(err)) != codes.ResourceExhausted || !strings.Contains(err.Error(), "watch_names (6 of 10)") {
		t.Fatalf("11 names over two streams: %v, want RESOURCE_EXHAUSTED naming watch_names", err)
	}
	if len(w2.names) != 0 || len(hub.byName) != 6 {
		t.Fatalf("the refused request added names: %d on the stream, %d in the hub", len(w2.names), len(hub.byName))
	}
	if err := w2.add(names("b", 4)); err != nil {
		t.Fatal(err)
	}
	if _, err := hub.open(sc("y")); err != nil {
		t.Fatalf("another identity: %v", err)
	}
	w1.remove(names("a", 3))
	if err := w2.add(names("c", 3)); err != nil {
		t.Fatalf("after removing 3: %v", err)
	}
	w1.close()
	w2.close()
	if u := hub.accounts.snapshot()["x"]; u.WatchNames != 0 || u.WatchStreams != 0 {
		t.Fatalf("closed streams left %+v charged", u)
	}
}
