package ipc

import (
	"context"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A client that sends requests and never reads the replies is cut off,
// and meanwhile another client is answered as usual.
func TestNonReadingClientIsCutOff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := &Server{Handler: &stubHandler{done: make(chan struct{})}, WriteTimeout: 200 * time.Millisecond, QueueLen: 16}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ctx, ln)
	}()
	defer func() {
		cancel()
		<-served
	}()

	slow, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	// Flood: the replies fill the socket buffers, then the queue.
	flooded := make(chan error, 1)
	go func() {
		line := []byte(`{"id":1,"op":"status"}` + "\n")
		for {
			if _, err := slow.Write(line); err != nil {
				flooded <- err
				return
			}
		}
	}()

	fast := &Client{Socket: path}
	defer fast.Close()
	for i := 0; i < 100; i++ {
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		if _, err := fast.Status(cctx); err != nil {
			t.Fatalf("a reading client was held up by a non-reading one: %v", err)
		}
		ccancel()
	}
	select {
	case err := <-flooded: // the server closed the slow connection
		if !strings.Contains(err.Error(), "broken pipe") && !strings.Contains(err.Error(), "reset") {
			t.Logf("slow client write ended with: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the non-reading client was never cut off")
	}
}

// Idle connections cost the server two goroutines each and little memory.
func TestIdleConnectionsAreCheap(t *testing.T) {
	path := startServer(t, &stubHandler{done: make(chan struct{})})
	const n = 1000
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	conns := make([]*Client, n)
	for i := range conns {
		conns[i] = &Client{Socket: path}
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if _, err := conns[i].Hello(cctx); err != nil { // connected and served once
			t.Fatal(err)
		}
		cancel()
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// Each Client has one reader goroutine of its own in this process too.
	perConn := float64(runtime.NumGoroutine()-g0)/n - 1
	heap := float64(after.HeapInuse+after.StackInuse-before.HeapInuse-before.StackInuse) / n
	t.Logf("per idle connection: %.1f server goroutines, %.1f KiB heap+stack (client side included)", perConn, heap/1024)
	if perConn > 2.01 {
		t.Fatalf("%.2f server goroutines per idle connection, want at most 2 (reader, writer)", perConn)
	}
}
