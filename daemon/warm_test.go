package daemon

import (
	"net"
	"testing"

	"google.golang.org/grpc"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// acceptCounter is a listener that reports every connection it accepts.
type acceptCounter struct {
	net.Listener
	accepted chan struct{}
}

func (a acceptCounter) Accept() (net.Conn, error) {
	c, err := a.Listener.Accept()
	if err == nil {
		select {
		case a.accepted <- struct{}{}:
		default:
		}
	}
	return c, err
}

// Issue 25 item 2: the sidecar keeps a connection open to every grantor it
// knows, not only to the leader, so that a failover needs no new
// connection (and no TLS handshake) at the new leader. Here the leader
// answers everything, and the other grantor still gets a connection
// within a probe interval.
func TestConnectionsToEveryGrantorKeptWarm(t *testing.T) {
	accepted := make(chan struct{}, 1)
	r := newRigWith(t, func(c *Config) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		other := &scriptedGrantor{clock: c.Clock.(*clockwatch.Fake), keepalives: make(chan *grantorpb.KeepAliveRequest, 64)}
		srv := grpc.NewServer()
		grantorpb.RegisterGrantorServer(srv, other)
		go srv.Serve(acceptCounter{ln, accepted})
		t.Cleanup(srv.Stop)
		c.Grantors = append(c.Grantors, ln.Addr().String()) // after the leader
	})
	if _, err := r.c.Acquire(ctxT(t), "jobs/a", ipc.AcquireOptions{TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(probeInterval)
	select {
	case <-accepted:
	case <-ctxT(t).Done():
		t.Fatal("the sidecar never connected to the grantor that does not lead")
	}
}
