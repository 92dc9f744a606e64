package grantor

import "encoding/binary"

// HTTP/2 frame types and flags (RFC 9113 section 6) that frameScanner
// reports.
const (
	h2FrameData      = 0x0
	h2FrameHeaders   = 0x1
	h2FrameRSTStream = 0x3
	h2FlagEndStream  = 0x1
	h2HeaderLen      = 9
	// h2ClientPreface is the length of the connection preface a client
	// sends before its first frame.
	h2ClientPreface = 24
)

// frameScanner follows the HTTP/2 frames of one direction of a
// connection through the chunks they are written or read in, looking
// only at each frame's 9-byte header: it reports the payload bytes of
// DATA frames as they pass (data), and each frame that ends a stream
// when its header has passed (ended): RST_STREAM, and, when the scanner
// follows what the server writes (trailers), HEADERS with END_STREAM.
// (A client's HEADERS with END_STREAM ends only its own side: its answer
// is still to come.) Not safe for concurrent use.
type frameScanner struct {
	trailers bool // HEADERS with END_STREAM end a stream
	skip     int  // bytes of the client preface still to pass
	hdr      [h2HeaderLen]byte
	hn       int    // header bytes collected
	left     int    // payload bytes of the current frame still to pass
	inDat    bool   // the current frame is DATA
	id       uint32 // the current frame's stream
}

// scan passes p, calling data(id, n) for n payload bytes of a DATA frame
// of stream id, and ended(id) for a frame that ends stream id.
func (s *frameScanner) scan(p []byte, data func(id uint32, n int), ended func(id uint32)) {
	if s.skip > 0 {
		k := min(s.skip, len(p))
		s.skip -= k
		p = p[k:]
	}
	for len(p) > 0 {
		if s.left > 0 {
			k := min(s.left, len(p))
			if s.inDat {
				data(s.id, k)
			}
			s.left -= k
			p = p[k:]
			continue
		}
		k := copy(s.hdr[s.hn:], p)
		s.hn += k
		p = p[k:]
		if s.hn < h2HeaderLen {
			return
		}
		s.hn = 0
		s.left = int(s.hdr[0])<<16 | int(s.hdr[1])<<8 | int(s.hdr[2])
		typ, flags := s.hdr[3], s.hdr[4]
		s.id = binary.BigEndian.Uint32(s.hdr[5:]) &^ (1 << 31)
		s.inDat = typ == h2FrameData
		if typ == h2FrameRSTStream || s.trailers && typ == h2FrameHeaders && flags&h2FlagEndStream != 0 {
			ended(s.id)
		}
	}
}
