// Package connlimit bounds what a server holds for connections it cannot
// trust yet, or ever: how many it holds at once, in total and from one
// source address, and how many bytes one may send. A server wraps its
// accepted connections (Limiter.Admit, or Limiter.Listener around a
// net.Listener) and tells the limiter when a connection no longer needs
// counting (Conn.Release: a raft peer that finished its handshake) or
// closes it.
//
// When a limit is reached, a newcomer evicts the oldest connection that
// has not sent a single byte yet (of its own source when that source is
// at its limit), and is refused only when every held connection has sent
// something. A client that speaks first (a TLS client sends its hello at
// once; so does a gossip peer) therefore always gets a slot, however many
// silent connections a stranger opens, also from the same address.
//
// Refusals and evictions go to a Reporter, which turns a flood into a
// bounded number of lines: one at once for the first refusal of a
// (source, reason) pair, then one count per pair at the end of each
// interval.
package connlimit

import (
	"container/list"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
)

// Limits of a Limiter. A zero field means no limit.
type Limits struct {
	// Total bounds the connections held at once.
	Total int
	// PerSource bounds the connections held at once from one source: an
	// IP address (an IPv6 address's /64, which one host usually holds).
	PerSource int
	// MaxBytes bounds what one connection may send; a Read past it fails
	// with ErrTooMuch.
	MaxBytes int64
	// EvictSpoken: when no silent connection can make room, the oldest
	// one does, instead of the newcomer being refused. For connections
	// counted only while they authenticate (Conn.Release after a
	// handshake): a stranger who speaks and then stalls cannot hold a
	// slot against newcomers either, unless it opens connections faster
	// than a handshake completes.
	EvictSpoken bool
}

// ErrTooMuch is a Read's error on a connection that sent more than
// Limits.MaxBytes.
var ErrTooMuch = errors.New("connlimit: connection sent more than its limit")

// Refused reasons a Limiter reports.
const (
	ReasonTotal         = "too many connections held at once"
	ReasonPerSource     = "too many connections held at once from this address"
	ReasonEvicted       = "closed silent (no byte sent) to make room for a newer connection"
	ReasonEvictedSpoken = "closed unfinished to make room for a newer connection"
)

// Limiter counts connections against Limits. Safe for concurrent use.
type Limiter struct {
	lim     Limits
	refused func(source, reason string)

	mu       sync.Mutex
	held     list.List // of *Conn, oldest first
	bySource map[string]int
}

// New returns a Limiter; refused (nil: ignored) is told the source and
// reason of every connection it refuses or evicts, outside its lock
// (a Reporter's Refused fits).
func New(lim Limits, refused func(source, reason string)) *Limiter {
	if refused == nil {
		refused = func(string, string) {}
	}
	return &Limiter{lim: lim, refused: refused, bySource: map[string]int{}}
}

// Source is the key a connection from a counts under: its IP, or the /64
// of an IPv6 address; a's String when it is not an IP address.
func Source(a net.Addr) string {
	var ip net.IP
	switch a := a.(type) {
	case *net.TCPAddr:
		ip = a.IP
	case *net.UDPAddr:
		ip = a.IP
	default:
		return a.String()
	}
	if ip4 := ip.To4(); ip4 != nil {
		return ip4.String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// Held returns how many connections are counted now.
func (l *Limiter) Held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held.Len()
}

// Admit counts c in, evicting a silent connection when a limit is
// reached (see the package doc). It returns the wrapped connection, or
// false when it closed c instead.
func (l *Limiter) Admit(c net.Conn) (*Conn, bool) {
	src := Source(c.RemoteAddr())
	l.mu.Lock()
	var victim *Conn
	reason := ""
	from := "" // the source a victim must be from; "" for any
	switch {
	case l.lim.PerSource > 0 && l.bySource[src] >= l.lim.PerSource:
		reason, from = ReasonPerSource, src
	case l.lim.Total > 0 && l.held.Len() >= l.lim.Total:
		reason = ReasonTotal
	}
	evicted := ReasonEvicted
	if reason != "" {
		victim = l.silentLocked(from)
		if victim == nil && l.lim.EvictSpoken {
			victim, evicted = l.oldestLocked(from), ReasonEvictedSpoken
		}
	}
	if reason != "" && victim == nil {
		l.mu.Unlock()
		c.Close()
		l.refused(src, reason)
		return nil, false
	}
	if victim != nil {
		l.releaseLocked(victim)
	}
	lc := &Conn{Conn: c, l: l, src: src}
	lc.elem = l.held.PushBack(lc)
	l.bySource[src]++
	l.mu.Unlock()
	if victim != nil {
		victim.Conn.Close()
		l.refused(victim.src, evicted)
	}
	return lc, true
}

// silentLocked returns the oldest held connection that has sent nothing,
// from src ("" for any source), or nil. What has arrived but was not read
// yet counts as sent: a busy server may not have read a hello yet.
func (l *Limiter) silentLocked(src string) *Conn {
	for e := l.held.Front(); e != nil; e = e.Next() {
		c := e.Value.(*Conn)
		if src != "" && c.src != src || c.spoke.Load() {
			continue
		}
		if pending(c.Conn) {
			c.spoke.Store(true)
			continue
		}
		return c
	}
	return nil
}

// oldestLocked returns the oldest held connection from src ("" for any
// source); nil when there is none.
func (l *Limiter) oldestLocked(src string) *Conn {
	for e := l.held.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*Conn); src == "" || c.src == src {
			return c
		}
	}
	return nil
}

// pending reports whether c has bytes received and not read yet (a peek
// that does not wait). A connection that cannot tell (not a socket) is
// taken as having some: it is never evicted.
func pending(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	var b [1]byte
	n := 0
	var peekErr error = syscall.EAGAIN
	// Control, not Read: Read would wait for the read lock that a
	// reader blocked on the connection holds.
	err = rc.Control(func(fd uintptr) {
		n, _, peekErr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	})
	// Data, or an end or error the reader will meet: not silent.
	return err != nil || n > 0 || peekErr == nil
}

func (l *Limiter) releaseLocked(c *Conn) {
	if c.elem == nil {
		return
	}
	l.held.Remove(c.elem)
	c.elem = nil
	if l.bySource[c.src]--; l.bySource[c.src] <= 0 {
		delete(l.bySource, c.src)
	}
}

// Conn is a connection a Limiter counts.
type Conn struct {
	net.Conn
	l     *Limiter
	src   string
	elem  *list.Element // nil once released; guarded by l.mu
	spoke atomic.Bool   // a Read returned data
	read  atomic.Int64
}

// Source returns the key the connection counts under (see Source).
func (c *Conn) Source() string { return c.src }

// Read implements net.Conn, within Limits.MaxBytes.
func (c *Conn) Read(b []byte) (int, error) {
	max := c.l.lim.MaxBytes
	if max > 0 {
		left := max - c.read.Load()
		if left <= 0 {
			return 0, fmt.Errorf("%w (%d bytes)", ErrTooMuch, max)
		}
		if int64(len(b)) > left {
			b = b[:left]
		}
	}
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.spoke.Store(true)
		c.read.Add(int64(n))
	}
	return n, err
}

// Release stops counting the connection (it stays open).
func (c *Conn) Release() {
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
}

// Close implements net.Conn: it releases the connection and closes it.
func (c *Conn) Close() error {
	c.Release()
	return c.Conn.Close()
}

// Listener returns ln whose Accept hands out only connections the
// Limiter admitted (as *Conn).
func (l *Limiter) Listener(ln net.Listener) net.Listener { return listener{ln, l} }

type listener struct {
	net.Listener
	l *Limiter
}

func (ln listener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc, ok := ln.l.Admit(c); ok {
			return lc, nil
		}
	}
}
