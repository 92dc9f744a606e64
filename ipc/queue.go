package ipc

import (
	"encoding/json"
	"time"

	"golang.org/x/sys/unix"
)

// queued is a reply or event waiting for the connection's writer, with the
// CLOCK_BOOTTIME instant it was queued at.
type queued struct {
	v  any
	at int64
}

// encode renders q as a line. Validities (valid_ms) were computed when q
// was queued; the time q then spent waiting, a stall of this process or a
// host suspend included, is taken off them here, so that no line leaves
// with more validity than is left. deadline_boottime_ns is absolute and
// needs no change.
func (q queued) encode() ([]byte, error) {
	age := time.Duration(boottime() - q.at)
	if age >= time.Millisecond {
		ageValidity(q.v, age)
	}
	b, err := json.Marshal(q.v)
	return append(b, '\n'), err
}

func ageValidity(v any, age time.Duration) {
	ms := age.Milliseconds()
	switch m := v.(type) {
	case *Response:
		if m.Grant != nil {
			m.Grant.ValidMs -= ms
		}
		if m.Leases != nil {
			for i := range *m.Leases {
				(*m.Leases)[i].ValidMs -= ms
			}
		}
	case *Event:
		if m.ValidMs != 0 {
			m.ValidMs -= ms
		}
	}
}

// boottime reads CLOCK_BOOTTIME in nanoseconds.
func boottime() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	return ts.Nano()
}
