package grantor

import (
	"reflect"
	"testing"
	"time"
)

// FuzzBinaryEntry: whatever bytes a binary entry holds, decoding never
// panics; a body that decodes encodes again to a body that decodes to the
// same command; and the FSM applies it or halts naming the entry, never
// panics, on a state that holds a grant and a waiter's session.
func FuzzBinaryEntry(f *testing.F) {
	next := fullAcquire("waiter")
	f.Add(acquireEntry(fullAcquire("s"), newestCmd))
	f.Add(releaseEntry(fullRelease(), newestCmd))
	f.Add(releaseEntry(releaseCmd{ID: requestID{Session: "h", Seq: 2}, Lease: "x", Owner: "o", Token: 1, Next: &next}, newestCmd))
	f.Add(acquireEntry(acquireCmd{ID: requestID{Session: "h", Seq: 3}, Lease: "x", Owner: "o", TTL: time.Second}, newestCmd))
	f.Fuzz(func(t *testing.T, data []byte) {
		typ, body, err := decodeCmd(data)
		if err == nil && (typ == cmdAcquireB || typ == cmdReleaseB) {
			var again []byte
			switch c := body.(type) {
			case *acquireCmd:
				again = appendAcquireB([]byte{byte(cmdAcquireB)}, c)
			case *releaseCmd:
				again = appendReleaseB([]byte{byte(cmdReleaseB)}, c)
			default:
				t.Fatalf("%v decoded to %T", typ, body)
			}
			_, body2, err := decodeCmd(again)
			if err != nil {
				t.Fatalf("re-encoded %v does not decode: %v", typ, err)
			}
			if !reflect.DeepEqual(body, body2) {
				t.Fatalf("re-encoded %v decodes to %+v, not %+v", typ, body2, body)
			}
		}
		fs := newFSM()
		fs.Apply(rlog{1, acquireEntry(acquireCmd{ID: requestID{Session: "h", Seq: 1}, Lease: "x", Owner: "o", TTL: time.Second, Identity: "sidecar/h"}, newestCmd)}.log())
		fs.Apply(rlog{2, data}.log())
	})
}
