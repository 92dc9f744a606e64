package ipc

import (
	"time"

	"golang.org/x/sys/unix"
)

// queued is a reply or event waiting for the connection's writer, with the
// CLOCK_BOOTTIME instant it was queued at, and its line as encoded then
// (nil: encoded when written).
type queued struct {
	v  any
	at int64
	b  []byte
}

// encode renders q as a line. Validities (valid_ms) were computed when q
// was queued; the time q then spent waiting, a stall of this process or a
// host suspend included, is taken off them here, so that no line leaves
// with more validity than is left: a grant whose deadline passed in the
// queue leaves as a lost error, and status leaves such leases out.
// deadline_boottime_ns is absolute and needs no change.
func (q queued) encode() ([]byte, error) {
	v := q.v
	if age := time.Duration(boottime() - q.at); age >= time.Millisecond && hasValidity(v) {
		v = ageValidity(v, age)
	} else if q.b != nil {
		return q.b, nil
	}
	return marshalLine(v)
}

// hasValidity reports whether v carries a valid_ms that ages.
func hasValidity(v any) bool {
	switch m := v.(type) {
	case *Response:
		return m.Grant != nil || m.Leases != nil
	case *Event:
		return m.ValidMs != 0
	}
	return false
}

func ageValidity(v any, age time.Duration) any {
	ms := age.Milliseconds()
	switch m := v.(type) {
	case *Response:
		if m.Grant != nil {
			if m.Grant.ValidMs -= ms; m.Grant.ValidMs <= 0 {
				return &Response{ID: m.ID, Error: Errorf(CodeLost, "the deadline of %q passed before the reply could be written", m.Grant.Lease)}
			}
		}
		if m.Leases != nil {
			kept := (*m.Leases)[:0]
			for _, g := range *m.Leases {
				if g.ValidMs -= ms; g.ValidMs > 0 {
					kept = append(kept, g)
				}
			}
			*m.Leases = kept
		}
	case *Event:
		// One event goes to many connections: age a copy.
		if m.ValidMs != 0 {
			e := *m
			e.ValidMs -= ms
			return &e
		}
	}
	return v
}

// boottime reads CLOCK_BOOTTIME in nanoseconds.
func boottime() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	return ts.Nano()
}

// overflowed ends a connection that has more than twice its budget unread
// when an event it may not miss comes: it could only be told the truth
// by queueing without bound. (Replies cannot get there: the server reads
// no request while the connection is over its budget, and the requests
// it has in flight are bounded per uid.)
func (c *Conn) overflowed() {
	c.mu.Lock()
	n, bytes, dropped := len(c.queue), c.bytes, c.dropped
	c.mu.Unlock()
	c.log.Warn("ipc: closing a connection that left more events unread than it may have queued",
		"conn", c.ID, "pid", c.Cred.PID, "uid", c.Cred.UID, "queued", n, "queued_bytes", bytes, "limit_bytes", 2*c.budget, "events_left_out", dropped)
	c.markGone()
}
