package daemon

import (
	"errors"
	"testing"

	"google.golang.org/grpc/credentials/insecure"
)

// A grantor that failed is not the next one tried, wherever the rotation
// over the known grantors stood (it used to land on the failed one again
// when the leader was the second of three, costing another confirm
// timeout).
func TestFailedGrantorIsNotTriedNext(t *testing.T) {
	addrs := []string{"a:1", "b:1", "c:1"}
	for _, failed := range addrs {
		g, err := newGrantorConn(addrs)
		if err != nil {
			t.Fatal(err)
		}
		g.creds = insecure.NewCredentials()
		g.leader = failed
		g.failed(failed, errors.New("silent"))
		_, next, err := g.client()
		if err != nil {
			t.Fatal(err)
		}
		g.close()
		if next == failed {
			t.Errorf("after %s failed, %s is tried next", failed, next)
		}
	}
}
