package attack

import (
	"bytes"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// callHeaders writes the HEADERS of unary gRPC calls of one method on one
// raw HTTP/2 connection, as grpc-go's client would open each stream.
type callHeaders struct {
	fr                *http2.Framer
	enc               *hpack.Encoder
	buf               bytes.Buffer
	method, authority string
}

// newCallHeaders returns the headers writer of method's calls on fr, to
// the grantor at addr.
func newCallHeaders(fr *http2.Framer, method, addr string) *callHeaders {
	h := &callHeaders{fr: fr, method: method, authority: addr}
	h.enc = hpack.NewEncoder(&h.buf)
	return h
}

// write opens stream id with the call's headers (no END_STREAM: its
// request follows in DATA).
func (h *callHeaders) write(id uint32) error {
	h.buf.Reset()
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":path", h.method}, {":authority", h.authority},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = h.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.buf.Bytes(), EndHeaders: true})
}
