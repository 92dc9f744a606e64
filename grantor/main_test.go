package grantor

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := findLeaks(30 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// findLeaks is goleak.VerifyTestMain with more patience: memberlist's
// Shutdown returns before all of its goroutines have (a probe in flight
// waits out its ack timer, a stream handler its TCP timeout), and gives no
// way to wait for them; see the same helper in grantor/gossip. It leaves
// out the goroutine raftProposer.await leaves on a raft future that raft
// never answers after Shutdown (a VerifyLeader future has no shutdown
// channel; hashicorp/raft issue 498): await's doc says so, and nothing
// else can end it.
func findLeaks(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		err := goleak.Find(goleak.IgnoreAnyFunction("github.com/leaseside/leaseside/grantor.raftProposer.await.func1"))
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}
