package grantor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Binary command bodies (issue 25, lock cycles round 2). The Acquire and
// the Release are a lock cycle's two entries, applied by every server: as
// JSON, decoding them took 60% of the FSM's apply and 3.9% of a busy
// leader's CPU, and encoding them 2.0%. cmdAcquireB and cmdReleaseB carry
// the same fields, with the meaning of cmdAcquire9 and cmdRelease7, in a
// fixed order:
//
//	string   uvarint length, then the bytes
//	uint     uvarint
//	int      zigzag varint (Duration in nanoseconds)
//	flags    one byte; a bit this binary does not know is an error
//
//	requestID:  string session, uint seq, uint first_unacked,
//	            uint count, then count uints also_received
//	acquireCmd: requestID, string lease, string owner, int ttl,
//	            string identity, int limit, int max_holders, string value,
//	            int lock_delay, flags (1 final, 2 shared)
//	releaseCmd: requestID, string lease, string owner, uint token,
//	            string identity, flags (1 owner_ended, 2 lapsed, 4 next),
//	            then with flag 4 the acquireCmd of next
//
// A body that does not decode to exactly its bytes (short, too long, a
// varint out of range) halts the FSM like any entry it cannot decode. A
// new field needs a new command type: the layout has no room for one.

// binaryCmd is the oldest binary type: a leader writes binary Acquires
// and Releases once every server applies cmdReleaseB (versions.go).
const binaryCmd = cmdReleaseB

// Flag bits of the binary bodies.
const (
	flagFinal  = 1 << 0 // acquireCmd.Final
	flagShared = 1 << 1 // acquireCmd.Shared

	flagOwnerEnded = 1 << 0 // releaseCmd.OwnerEnded
	flagLapsed     = 1 << 1 // releaseCmd.Lapsed
	flagNext       = 1 << 2 // releaseCmd.Next follows
)

// meaning returns the JSON type whose meaning a binary type has, and any
// other type unchanged: the FSM applies cmdAcquireB as cmdAcquire9 and
// cmdReleaseB as cmdRelease7.
func (t cmdType) meaning() cmdType {
	switch t {
	case cmdAcquireB:
		return cmdAcquire9
	case cmdReleaseB:
		return cmdRelease7
	}
	return t
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendRequestID(b []byte, id *requestID) []byte {
	b = appendString(b, id.Session)
	b = binary.AppendUvarint(b, id.Seq)
	b = binary.AppendUvarint(b, id.FirstUnacked)
	b = binary.AppendUvarint(b, uint64(len(id.AlsoReceived)))
	for _, s := range id.AlsoReceived {
		b = binary.AppendUvarint(b, s)
	}
	return b
}

// appendAcquireB appends c's binary body to b.
func appendAcquireB(b []byte, c *acquireCmd) []byte {
	b = appendRequestID(b, &c.ID)
	b = appendString(b, c.Lease)
	b = appendString(b, c.Owner)
	b = binary.AppendVarint(b, int64(c.TTL))
	b = appendString(b, c.Identity)
	b = binary.AppendVarint(b, int64(c.Limit))
	b = binary.AppendVarint(b, int64(c.MaxHolders))
	b = appendString(b, c.Value)
	b = binary.AppendVarint(b, int64(c.LockDelay))
	var flags byte
	if c.Final {
		flags |= flagFinal
	}
	if c.Shared {
		flags |= flagShared
	}
	return append(b, flags)
}

// appendReleaseB appends c's binary body to b.
func appendReleaseB(b []byte, c *releaseCmd) []byte {
	b = appendRequestID(b, &c.ID)
	b = appendString(b, c.Lease)
	b = appendString(b, c.Owner)
	b = binary.AppendUvarint(b, c.Token)
	b = appendString(b, c.Identity)
	var flags byte
	if c.OwnerEnded {
		flags |= flagOwnerEnded
	}
	if c.Lapsed {
		flags |= flagLapsed
	}
	if c.Next != nil {
		flags |= flagNext
	}
	b = append(b, flags)
	if c.Next != nil {
		b = appendAcquireB(b, c.Next)
	}
	return b
}

// errShortBody is the error of a binary body that ends inside a field.
var errShortBody = errors.New("body ends inside a field")

// binReader reads a binary body; the first error sticks.
type binReader struct {
	b   []byte
	err error
}

func (r *binReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *binReader) uint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errShortBody)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *binReader) int() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(errShortBody)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// smallInt reads an int that must fit this platform's int.
func (r *binReader) smallInt() int {
	v := r.int()
	if int64(int(v)) != v {
		r.fail(fmt.Errorf("integer %d out of range", v))
		return 0
	}
	return int(v)
}

func (r *binReader) string() string {
	n := r.uint()
	if n > uint64(len(r.b)) {
		r.fail(errShortBody)
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// flags reads a flags byte with no bit outside known.
func (r *binReader) flags(known byte) byte {
	if len(r.b) == 0 {
		r.fail(errShortBody)
		return 0
	}
	f := r.b[0]
	r.b = r.b[1:]
	if f&^known != 0 {
		r.fail(fmt.Errorf("unknown flags %#x", f&^known))
		return 0
	}
	return f
}

func (r *binReader) requestID(id *requestID) {
	id.Session = r.string()
	id.Seq = r.uint()
	id.FirstUnacked = r.uint()
	n := r.uint()
	if n > uint64(len(r.b)) { // each takes a byte at least: no allocation beyond the body
		r.fail(errShortBody)
		return
	}
	if n > 0 {
		id.AlsoReceived = make([]uint64, n)
		for i := range id.AlsoReceived {
			id.AlsoReceived[i] = r.uint()
		}
	}
}

func (r *binReader) acquire(c *acquireCmd) {
	r.requestID(&c.ID)
	c.Lease = r.string()
	c.Owner = r.string()
	c.TTL = time.Duration(r.int())
	c.Identity = r.string()
	c.Limit = r.smallInt()
	c.MaxHolders = r.smallInt()
	c.Value = r.string()
	c.LockDelay = time.Duration(r.int())
	f := r.flags(flagFinal | flagShared)
	c.Final, c.Shared = f&flagFinal != 0, f&flagShared != 0
}

func (r *binReader) release(c *releaseCmd) {
	r.requestID(&c.ID)
	c.Lease = r.string()
	c.Owner = r.string()
	c.Token = r.uint()
	c.Identity = r.string()
	f := r.flags(flagOwnerEnded | flagLapsed | flagNext)
	c.OwnerEnded, c.Lapsed = f&flagOwnerEnded != 0, f&flagLapsed != 0
	if f&flagNext != 0 {
		c.Next = &acquireCmd{}
		r.acquire(c.Next)
	}
}

// decodeBinary decodes the body of a binary type t (cmdAcquireB or
// cmdReleaseB), which must end where the body ends.
func decodeBinary(t cmdType, data []byte) (any, error) {
	r := &binReader{b: data}
	var body any
	switch t {
	case cmdAcquireB:
		c := &acquireCmd{}
		r.acquire(c)
		body = c
	case cmdReleaseB:
		c := &releaseCmd{}
		r.release(c)
		body = c
	default:
		return nil, fmt.Errorf("%v is not a binary type", t)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d bytes after the body", len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	return body, nil
}
