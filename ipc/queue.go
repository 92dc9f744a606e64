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

// readOnlyOps are the ops that wait on the network and only read: their
// replies can be large (the members of a cluster, a page of its leases),
// and nothing is lost by answering them resource_exhausted
// (enqueueAnswer).
var readOnlyOps = map[string]bool{OpMembers: true, OpLeases: true}

// enqueueAnswer queues resp, the reply a handler's goroutine made. A reply
// to an op that only reads is answered resource_exhausted instead when the
// connection, or its uid, has its budget unread already (review finding
// U1): every request a burst started while the uid was under its budget
// would otherwise queue its reply, however far over (768 members replies
// of 28 KB started at once on 64 connections left 7 MiB queued against a
// budget of 256 KiB). Of replies queued at once, only the first may pass
// the uid's budget.
func (c *Conn) enqueueAnswer(resp *Response, readOnly bool) {
	if !readOnly {
		c.enqueue(resp, false)
		return
	}
	if c.isGone() {
		return
	}
	b, err := marshalLine(resp)
	if err != nil {
		c.log.Error("ipc: encoding reply", "err", err)
		return
	}
	c.mu.Lock()
	if c.settled {
		c.mu.Unlock()
		return
	}
	if c.bytes > c.budget || !c.uid.addUnder(len(b)) {
		c.mu.Unlock()
		c.enqueue(errorLine(resp.ID, Errorf(CodeResourceExhausted,
			"uid %d leaves more replies unread than the daemon holds for one user (socket_queue_bytes_per_uid, socket_queue_bytes); read them, then ask again", c.Cred.UID)), false)
		return
	}
	c.bytes += len(b) // the uid's count has it already (addUnder)
	c.queue = append(c.queue, queued{v: resp, at: boottime(), b: b})
	c.mu.Unlock()
	poke(c.wake)
}
