package ipc

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// unixPair returns the two ends of a connected Unix stream socket pair,
// closed when the test ends.
func unixPair(t *testing.T) (a, b *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conns [2]*net.UnixConn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "pair")
		nc, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = nc.(*net.UnixConn)
		t.Cleanup(func() { nc.Close() })
	}
	return conns[0], conns[1]
}

// The raw reads wait for data as net.Conn's do, end on the read deadline
// and at the peer's close.
func TestSockIORead(t *testing.T) {
	a, b := unixPair(t)
	s, err := newSockIO(a)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		p := make([]byte, 64)
		n, err := s.Read(p) // waits: nothing was sent yet
		if err != nil {
			t.Error(err)
		}
		got <- p[:n]
	}()
	b.Write([]byte("hello\n"))
	if g := <-got; string(g) != "hello\n" {
		t.Fatalf("read %q", g)
	}

	a.SetReadDeadline(time.Now()) // as the server stops a reader
	if _, err := s.Read(make([]byte, 64)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after the deadline: %v, want the deadline's error", err)
	}
	a.SetReadDeadline(time.Time{})

	b.Close()
	if n, err := s.Read(make([]byte, 64)); n != 0 || err != io.EOF {
		t.Fatalf("read after the peer closed: %d, %v; want io.EOF", n, err)
	}
}

// A raw write takes what the socket takes at once and never waits: on a
// full socket it writes nothing and reports no error (writeWait writes
// the rest); to a closed peer it fails.
func TestSockIOWriteNow(t *testing.T) {
	a, b := unixPair(t)
	s, err := newSockIO(a)
	if err != nil {
		t.Fatal(err)
	}
	line := bytes.Repeat([]byte("x"), 64<<10)
	total := 0
	for range 1000 {
		n, err := s.writeNow(line)
		if err != nil {
			t.Fatal(err)
		}
		if total += n; n == 0 {
			break
		}
	}
	if n, err := s.writeNow(line); n != 0 || err != nil || total == 0 {
		t.Fatalf("write to a full socket after %d bytes: %d, %v; want 0, nil", total, n, err)
	}

	a.SetWriteDeadline(time.Now()) // passed: writeNow leaves it to writeWait
	b.Close()
	if n, err := s.writeNow(line); n != 0 || err != nil {
		t.Fatalf("write after the deadline: %d, %v; want 0, nil", n, err)
	}
	a.SetWriteDeadline(time.Time{})
	if _, err := s.writeNow(line); !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("write to a closed peer: %v, want EPIPE or ECONNRESET", err)
	}
	var none *sockIO
	if n, err := none.writeNow(line); n != 0 || err != nil {
		t.Fatalf("nil writeNow: %d, %v", n, err)
	}
}
