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
// way to wait for them; see the same helper in grantor/gossip.
func findLeaks(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		err := goleak.Find()
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}
