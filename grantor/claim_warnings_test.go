package grantor

import (
	"fmt"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

// claimWarnings logs a claim once per claimWarnEvery, the next line
// counting the refusals it did not log, and remembers at most
// maxClaimWarnKeys claims: past that, a new claim is not logged until
// the remembered ones are claimWarnEvery old.
func TestClaimWarningsRules(t *testing.T) {
	clock := clockwatch.NewFake(clockwatch.Instant(1000 * time.Second))
	w := claimWarnings{clock: clock}
	k := claimKey{raftAddr: "127.0.0.1:1", nodeID: "g9", reason: "no join rule"}
	if log, _ := w.note(k); !log {
		t.Fatal("a claim's first refusal is not logged")
	}
	for range 5 {
		if log, _ := w.note(k); log {
			t.Fatal("a claim logged again within claimWarnEvery")
		}
	}
	if log, _ := w.note(claimKey{raftAddr: k.raftAddr, nodeID: k.nodeID, reason: "no certificate"}); !log {
		t.Fatal("another reason of the claim is not logged")
	}
	clock.Advance(claimWarnEvery)
	if log, unlogged := w.note(k); !log || unlogged != 5 {
		t.Fatalf("claimWarnEvery later: logged %v counting %d unlogged, want true and 5", log, unlogged)
	}
	// k is remembered, logged just now; its other reason, logged
	// claimWarnEvery ago, is forgotten when the map is full.
	logged := 0
	for i := range 2 * maxClaimWarnKeys {
		if log, _ := w.note(claimKey{raftAddr: fmt.Sprintf("127.0.0.2:%d", i), nodeID: "g9", reason: "x"}); log {
			logged++
		}
	}
	if logged != maxClaimWarnKeys-1 || len(w.last) != maxClaimWarnKeys {
		t.Fatalf("%d of %d new claims logged, %d remembered; want %d and %d", logged, 2*maxClaimWarnKeys, len(w.last), maxClaimWarnKeys-1, maxClaimWarnKeys)
	}
	clock.Advance(claimWarnEvery)
	if log, _ := w.note(claimKey{raftAddr: "127.0.0.3:1", nodeID: "g9", reason: "x"}); !log || len(w.last) != 1 {
		t.Fatalf("once the remembered claims are old, a new one: logged %v, %d remembered", log, len(w.last))
	}
}
