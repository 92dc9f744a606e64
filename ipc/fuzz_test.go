package ipc

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeRequest: whatever the line, DecodeRequest never panics, and
// either refuses it with a known code or returns a request that survives
// a round trip through JSON and validates again.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"op":"hello"}`,
		`{"id":2,"op":"acquire","lease":"jobs/render-42","ttl_ms":15000,"wait_ms":0}`,
		`{"id":3,"op":"acquire","lease":"a","ttl_ms":1000,"owner":"pid","owner_pid":1,"lock_delay_ms":5}`,
		`{"id":4,"op":"release","lease":"a/b.c_d-e"}`,
		`{"id":5,"op":"check","lease":"a","token":"18446744073709551615"}`,
		`{"id":6,"op":"watch"}`,
		`{"id":7,"op":"status","op":"status"}`,
		`{"ID":8,"op":"status"}`,
		"{\"id\":9,\"op\":\"status\",\"lease\":\"\xc3\x28\"}",
		`[]`, `null`, `{"id":1e400,"op":"status"}`, `{"id":-0,"op":"status"}`,
	} {
		f.Add([]byte(s))
	}
	known := map[string]bool{CodeBadJSON: true, CodeBadRequest: true, CodeUnknownOp: true, CodeInvalidName: true, CodeInvalidTTL: true}
	f.Fuzz(func(t *testing.T, line []byte) {
		req, _, err := DecodeRequest(line)
		if err != nil {
			if !known[err.Code] {
				t.Fatalf("unknown error code %q for %q", err.Code, line)
			}
			return
		}
		b, merr := json.Marshal(req)
		if merr != nil {
			t.Fatal(merr)
		}
		again, _, err := DecodeRequest(b)
		if err != nil {
			t.Fatalf("accepted %q but refused its re-encoding %s: %v", line, b, err)
		}
		if *again != *req {
			t.Fatalf("round trip changed the request: %+v vs %+v", req, again)
		}
	})
}
