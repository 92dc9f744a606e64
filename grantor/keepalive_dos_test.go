package grantor

import (
	"fmt"
	"testing"
	"time"
)

// Review finding R8-3: a KeepAlive that names sessions nobody opened made
// every name a sessionState in the leader's office, kept until
// SessionIdleTimeout (1 h) and walked by every expiry scan, without a raft
// entry (before the fix: 50 messages left 51,200 states). Such sessions are
// answered not renewed, and the leader keeps nothing for them.
func TestKeepAliveOfUnknownSessionsLeavesNoLeaderState(t *testing.T) {
	h := newHarness(t)
	h.takeOffice()
	o, err := h.l.await(h.ctx())
	if err != nil {
		t.Fatal(err)
	}
	h.l.mu.Lock()
	before := len(o.sessions)
	h.l.mu.Unlock()
	const msgs = 50
	for m := 0; m < msgs; m++ {
		ss := make([]sessionRenewal, maxKeepAliveSessions)
		for i := range ss {
			ss[i] = sessionRenewal{Session: fmt.Sprintf("nobody-%d-%d", m, i), TTL: 10 * time.Second}
		}
		res, _, err := h.l.renewSessions(h.ctx(), o, "evil", ss, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != len(ss) {
			t.Fatalf("%d answers to %d sessions", len(res), len(ss))
		}
		for _, r := range res {
			if r.Renewed {
				t.Fatalf("session %q, which nobody opened, was renewed", r.Session)
			}
		}
	}
	h.l.mu.Lock()
	n := len(o.sessions)
	h.l.mu.Unlock()
	t.Logf("%d keepalives of unknown sessions: %d session states at the leader before, %d after", msgs, before, n)
	if n != before {
		t.Fatalf("the leader keeps %d states for sessions that do not exist", n-before)
	}
}
