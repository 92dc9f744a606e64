package ipc

import "testing"

// BenchmarkDecodeRequest measures the daemon's parse and check of one
// request line, as a client library writes it: an acquire with a wait,
// a release, and a status. make bench-compare compares it across
// revisions.
func BenchmarkDecodeRequest(b *testing.B) {
	for _, c := range []struct {
		name string
		line string
	}{
		{name: "acquire", line: `{"id":7,"op":"acquire","lease":"jobs/render-42","ttl_ms":15000,"wait_ms":5000}`},
		{name: "release", line: `{"id":8,"op":"release","lease":"jobs/render-42","token":"42"}`},
		{name: "status", line: `{"id":9,"op":"status"}`},
	} {
		line := []byte(c.line)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := DecodeRequest(line); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
