package connlimit

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// pair dials ln and returns the client end and the server end, admitted
// or not.
func pair(t *testing.T, ln net.Listener, l *Limiter) (client net.Conn, server *Conn, ok bool) {
	t.Helper()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	raw, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	server, ok = l.Admit(raw)
	if ok {
		t.Cleanup(func() { server.Close() })
	}
	return client, server, ok
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// speak makes the client send a byte and the server read it.
func speak(t *testing.T, client net.Conn, server *Conn) {
	t.Helper()
	if _, err := client.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(server, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
}

type refusals struct {
	mu  sync.Mutex
	got []string
}

func (r *refusals) add(src, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, reason)
}

func (r *refusals) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// A full limiter evicts the oldest silent connection for a newcomer, and
// refuses the newcomer only when every held connection has spoken.
func TestEvictsSilentFirst(t *testing.T) {
	ln := listen(t)
	var rf refusals
	l := New(Limits{Total: 3}, rf.add)
	var clients []net.Conn
	var servers []*Conn
	for range 3 {
		c, s, ok := pair(t, ln, l)
		if !ok {
			t.Fatal("refused under the limit")
		}
		clients, servers = append(clients, c), append(servers, s)
	}
	speak(t, clients[0], servers[0]) // the oldest has spoken: not evictable
	_, _, ok := pair(t, ln, l)
	if !ok {
		t.Fatal("a newcomer was refused while silent connections were held")
	}
	// The oldest silent one (the second) was closed: its client sees EOF.
	clients[1].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := clients[1].Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("evicted connection: read %v, want EOF", err)
	}
	if got := l.Held(); got != 3 {
		t.Fatalf("held %d, want 3", got)
	}
	speak(t, clients[2], servers[2])
	_, _, ok = pair(t, ln, l) // evicts the fourth, the last silent one
	if !ok {
		t.Fatal("refused while one silent connection was held")
	}
	_, _, ok = pair(t, ln, l) // the last newcomer is silent: it goes
	if !ok {
		t.Fatal("refused while one silent connection was held")
	}
	speak(t, clients[0], servers[0])
	want := []string{ReasonEvicted, ReasonEvicted, ReasonEvicted}
	if got := rf.list(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("refusals %q, want %q", got, want)
	}
}

// Every held connection has spoken: the newcomer is refused and closed,
// and a released or closed connection frees its slot.
func TestRefusesWhenAllSpoke(t *testing.T) {
	ln := listen(t)
	var rf refusals
	l := New(Limits{Total: 2, PerSource: 1}, rf.add)
	c1, s1, ok := pair(t, ln, l)
	if !ok {
		t.Fatal("refused under the limit")
	}
	speak(t, c1, s1)
	c2, _, ok := pair(t, ln, l)
	if ok {
		t.Fatal("a second connection from one source was admitted with PerSource 1")
	}
	c2.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c2.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("refused connection: read %v, want EOF", err)
	}
	if got := rf.list(); len(got) != 1 || got[0] != ReasonPerSource {
		t.Fatalf("refusals %q, want one %q", got, ReasonPerSource)
	}
	s1.Release()
	if _, _, ok := pair(t, ln, l); !ok {
		t.Fatal("refused after the only held connection was released")
	}
	if got := l.Held(); got != 1 {
		t.Fatalf("held %d, want 1", got)
	}
	s1.Close() // released already: counts nothing twice
	if got := l.Held(); got != 1 {
		t.Fatalf("held %d after closing a released connection, want 1", got)
	}
}

// A connection reads at most MaxBytes; then Read fails with ErrTooMuch.
func TestMaxBytes(t *testing.T) {
	ln := listen(t)
	l := New(Limits{MaxBytes: 10}, nil)
	c, s, _ := pair(t, ln, l)
	go c.Write(make([]byte, 100))
	got, err := io.ReadAll(s)
	if !errors.Is(err, ErrTooMuch) || len(got) != 10 {
		t.Fatalf("read %d bytes, err %v; want 10 and ErrTooMuch", len(got), err)
	}
}

func TestSource(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 9}, "10.1.2.3"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6"), Port: 9}, "2001:db8:1:2::/64"},
		{&net.UDPAddr{IP: net.ParseIP("::ffff:10.0.0.1"), Port: 9}, "10.0.0.1"},
	} {
		if got := Source(tc.addr); got != tc.want {
			t.Errorf("Source(%v) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// A flood of refusals makes the first line of each (source, reason) at
// once and one count per pair at the end of the interval; pairs past
// MaxReportKeys are counted under OtherSources.
func TestReporterBoundsLines(t *testing.T) {
	type line struct {
		src, reason string
		n           int
	}
	var lines []line
	r := NewReporter(time.Hour, func(src, reason string, n int) { lines = append(lines, line{src, reason, n}) })
	defer r.Close()
	for range 1000 {
		r.Refused("10.0.0.1", "a")
	}
	r.Refused("10.0.0.1", "b")
	if len(lines) != 2 || lines[0] != (line{"10.0.0.1", "a", 1}) || lines[1] != (line{"10.0.0.1", "b", 1}) {
		t.Fatalf("before the interval ends: %v", lines)
	}
	r.Flush()
	if len(lines) != 3 || lines[2] != (line{"10.0.0.1", "a", 999}) {
		t.Fatalf("after the interval: %v", lines)
	}
	count := func() (n, total int) {
		for _, l := range lines {
			total += l.n
		}
		return len(lines), total
	}
	lines = nil
	for i := range 3 * MaxReportKeys {
		r.Refused(fmt.Sprintf("10.1.%d.%d", i/256, i%256), "a")
	}
	r.Flush()
	// MaxReportKeys first lines, the first of the others, and the
	// others' count.
	if n, total := count(); n != MaxReportKeys+2 || total != 3*MaxReportKeys {
		t.Fatalf("%d lines counting %d refusals, want %d lines counting %d", n, total, MaxReportKeys+2, 3*MaxReportKeys)
	}
	lines = nil
	for i := range 100 {
		r.Refused("10.0.0.1", fmt.Sprint("reason ", i))
	}
	r.Flush()
	if n, total := count(); n != MaxReasonsPerSource+2 || total != 100 || lines[MaxReasonsPerSource].reason != OtherReasons {
		t.Fatalf("one source, 100 reasons: %v", lines)
	}
}

// The interval's timer flushes by itself: the first refusal is emitted
// at once, the others' count when the interval ends.
func TestReporterTimer(t *testing.T) {
	got := make(chan int, 4)
	r := NewReporter(10*time.Millisecond, func(_, _ string, n int) { got <- n })
	defer r.Close()
	r.Refused("s", "a")
	r.Refused("s", "a")
	r.Refused("s", "a")
	if n := <-got; n != 1 {
		t.Fatalf("first emission %d, want 1", n)
	}
	// A slow machine may end an interval between the refusals: then a
	// new one starts with a line of its own. The counts add up to 3.
	total := 1
	timeout := time.After(30 * time.Second)
	for total < 3 {
		select {
		case n := <-got:
			total += n
		case <-timeout:
			t.Fatalf("emitted %d refusals of 3", total)
		}
	}
}

// A connection whose reader is blocked in Read (a handshake waiting for
// a hello) is still evictable, and one whose bytes have arrived but were
// not read yet is not.
func TestEvictsWhileReading(t *testing.T) {
	ln := listen(t)
	l := New(Limits{Total: 2}, nil)
	_, s1, _ := pair(t, ln, l)
	go io.ReadAll(s1) // blocked: the client sends nothing
	c2, _, _ := pair(t, ln, l)
	if _, err := c2.Write([]byte{1}); err != nil { // arrives at once on loopback, never read
		t.Fatal(err)
	}
	// The first newcomer evicts s1; the second finds c2 (unread data)
	// and the first newcomer (silent), and evicts the newcomer.
	_, _, ok := pair(t, ln, l)
	if !ok {
		t.Fatal("refused while a silent connection blocked in Read was held")
	}
	_, _, ok = pair(t, ln, l)
	if !ok {
		t.Fatal("refused while the previous newcomer was silent")
	}
	c2.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := c2.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection with unread data was closed: %v", err)
	}
}

// With EvictSpoken, the oldest connection makes room when none is
// silent: a newcomer is never refused.
func TestEvictSpoken(t *testing.T) {
	ln := listen(t)
	var rf refusals
	l := New(Limits{PerSource: 2, EvictSpoken: true}, rf.add)
	c1, s1, _ := pair(t, ln, l)
	c2, s2, _ := pair(t, ln, l)
	speak(t, c1, s1)
	speak(t, c2, s2)
	if _, _, ok := pair(t, ln, l); !ok {
		t.Fatal("a newcomer was refused with EvictSpoken")
	}
	c1.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c1.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the oldest connection: read %v, want EOF", err)
	}
	if got := rf.list(); len(got) != 1 || got[0] != ReasonEvictedSpoken {
		t.Fatalf("refusals %q, want one %q", got, ReasonEvictedSpoken)
	}
}
