// Package stranger speaks to grantors as an outsider would, for the tests
// of the trust boundary (grantor's and internal/integration's): a raft
// transport that dials with a TLS configuration of the test's choosing,
// or none, to send forged raft RPCs.
package stranger

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// Raft returns a raft transport that dials with cfg (nil: plain TCP);
// t's cleanup closes it. Its own listener is bound on loopback and never
// served.
func Raft(t testing.TB, cfg *tls.Config) *raft.NetworkTransport {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: stream{ln, cfg}, Timeout: 5 * time.Second})
	t.Cleanup(func() { tr.Close() })
	return tr
}

// stream is the raft stream layer of Raft.
type stream struct {
	net.Listener
	cfg *tls.Config
}

// Dial implements raft.StreamLayer.
func (s stream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if s.cfg == nil {
		return d.Dial("tcp", string(addr))
	}
	return tls.DialWithDialer(d, "tcp", string(addr), s.cfg)
}
