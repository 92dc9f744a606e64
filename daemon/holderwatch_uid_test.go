package daemon

import (
	"fmt"
	"log/slog"
	"os"
	"testing"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// One local user watching as many names as its connections allow must
// leave other users room to watch theirs: found by the local-account red
// team (issue 21), where uid A's five connections of 1,024 `watch
// --holders` each filled the host's 4,096 names and every other user's
// `watch --holders` and `observe` got resource_exhausted.
func TestOneUserCannotTakeEveryWatchedName(t *testing.T) {
	if os.Geteuid() == 1001 || os.Geteuid() == 1002 {
		t.Fatal("this test needs the uids 1001 and 1002 not to be the test's own")
	}
	hw := newHolderWatch(nil, clockwatch.System, slog.New(slog.DiscardHandler))
	attacker := func() *ipc.Conn { return &ipc.Conn{Cred: ipc.Cred{UID: 1001}} }
	conns := []*ipc.Conn{attacker(), attacker(), attacker(), attacker(), attacker()}
	took := 0
	for i, c := range conns {
		for j := 0; j < maxConnWatches; j++ {
			if hw.subscribe(c, fmt.Sprintf("atk/%d/%d", i, j), j%2 == 0) == nil {
				took++
			}
		}
	}
	if took > maxUIDWatches {
		t.Fatalf("uid 1001 watches %d names, more than a user's %d", took, maxUIDWatches)
	}
	victim := &ipc.Conn{Cred: ipc.Cred{UID: 1002}}
	if err := hw.subscribe(victim, "svc/primary", true); err != nil {
		t.Fatalf("another user's observe after uid 1001 watched all it could: %v", err)
	}
	if err := hw.subscribe(attacker(), "atk/more", false); err == nil || err.Code != ipc.CodeResourceExhausted {
		t.Fatalf("uid 1001 past its share on a new connection: %v, want resource_exhausted", err)
	}
	// Its connections closing give its share back.
	for _, c := range conns {
		hw.dropConn(c)
	}
	if err := hw.subscribe(attacker(), "atk/again", false); err != nil {
		t.Fatalf("uid 1001 after its connections closed: %v", err)
	}
	// Root is not held to a user's share.
	for i := 0; i < 2; i++ {
		root := &ipc.Conn{Cred: ipc.Cred{UID: 0}}
		for j := 0; j < maxConnWatches; j++ {
			if err := hw.subscribe(root, fmt.Sprintf("root/%d/%d", i, j), false); err != nil {
				t.Fatalf("root's watch %d on its connection %d: %v", j, i, err)
			}
		}
	}
}
