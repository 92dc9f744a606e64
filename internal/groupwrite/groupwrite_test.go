package groupwrite

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// recorder is an io.Writer that keeps every Write; a Write blocks while
// gate is set, until it is closed, and tells entered first.
type recorder struct {
	mu      sync.Mutex
	writes  []string
	gate    chan struct{}
	entered chan struct{}
	fail    error
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	gate, entered := r.gate, r.entered
	r.gate, r.entered = nil, nil
	r.mu.Unlock()
	if gate != nil {
		close(entered)
		<-gate
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return 0, r.fail
	}
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.writes...)
}

func TestWriteHoldsUntilFlush(t *testing.T) {
	r := &recorder{}
	g := New(r)
	fmt.Fprintln(g, "a")
	fmt.Fprintln(g, "b")
	if got := r.all(); len(got) != 0 {
		t.Fatalf("written before Flush: %q", got)
	}
	if err := g.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := r.all(); len(got) != 1 || got[0] != "a\nb\n" {
		t.Fatalf("after Flush: %q, want one write of both lines", got)
	}
	if err := g.Flush(); err != nil || len(r.all()) != 1 {
		t.Fatalf("a Flush with nothing appended wrote: %q %v", r.all(), err)
	}
}

// Lines appended while a write is under way go out together in the next
// write, and each caller's Flush returns only once its line was written.
func TestCallersDuringAWriteShareTheNextWrite(t *testing.T) {
	gate, entered := make(chan struct{}), make(chan struct{})
	r := &recorder{gate: gate, entered: entered}
	g := New(r)
	fmt.Fprintln(g, "first")
	firstDone := make(chan error)
	go func() { firstDone <- g.Flush() }()
	<-entered // the first write is under way, held at the gate
	const n = 20
	var want bytes.Buffer
	for i := range n {
		fmt.Fprintf(g, "line %d\n", i)
		fmt.Fprintf(&want, "line %d\n", i)
	}
	flushed := make(chan error, n)
	for range n {
		go func() { flushed <- g.Flush() }()
	}
	close(gate)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-flushed; err != nil {
			t.Fatal(err)
		}
		// This Flush returned: its line is written.
		if got := r.all(); len(got) != 2 {
			t.Fatalf("a Flush returned before its line was written: %q", got)
		}
	}
	if got := r.all(); len(got) != 2 || got[0] != "first\n" || got[1] != want.String() {
		t.Fatalf("writes %q, want the first line, then the %d others in one write", got, n)
	}
}

func TestSyncedWritesAtOnceAndInOrder(t *testing.T) {
	r := &recorder{}
	g := New(r)
	fmt.Fprintln(g, "held")
	fmt.Fprintln(g.Synced(), "now")
	if got := r.all(); len(got) != 1 || got[0] != "held\nnow\n" {
		t.Fatalf("writes %q, want the held line and the synced one, in order", got)
	}
}

func TestFlushReturnsTheWriteError(t *testing.T) {
	broken := errors.New("disk full")
	r := &recorder{fail: broken}
	g := New(r)
	fmt.Fprintln(g, "lost")
	if err := g.Flush(); !errors.Is(err, broken) {
		t.Fatalf("Flush: %v, want %v", err, broken)
	}
	if _, err := fmt.Fprintln(g.Synced(), "lost too"); !errors.Is(err, broken) {
		t.Fatalf("synced Write: %v, want %v", err, broken)
	}
	r.mu.Lock()
	r.fail = nil
	r.mu.Unlock()
	fmt.Fprintln(g, "kept")
	if err := g.Flush(); err != nil {
		t.Fatalf("Flush after the writer recovered: %v", err)
	}
	if got := r.all(); len(got) != 1 || got[0] != "kept\n" {
		t.Fatalf("writes %q", got)
	}
}

// BenchmarkFlushParallel measures a line appended and flushed by many
// goroutines at once, and how many writes they shared.
func BenchmarkFlushParallel(b *testing.B) {
	r := &recorder{}
	g := New(r)
	line := []byte(`{"msg":"audit","event":"grant","lease":"bench/1","token":1}` + "\n")
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = g.Write(line)
			_ = g.Flush()
		}
	})
	b.ReportMetric(float64(len(r.all()))/float64(b.N), "writes/op")
}
