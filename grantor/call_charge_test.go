package grantor

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
)

// callsOf returns the calls in progress of the account of name (as
// accounts.snapshot names it).
func callsOf(n *running, name string) int { return n.accounts.snapshot()[name].Calls }

// waitCalls waits until the account of name has want calls in progress.
func waitCalls(t *testing.T, n *running, name string, want int) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(waitTimeout)
	for callsOf(n, name) != want {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s has %d calls in progress, want %d", name, callsOf(n, name), want)
		}
	}
}

// Issue 21, found by lane k2: a call's answer that cannot be written (its
// client opens no flow-control window) keeps its stream, and the answer,
// at the grantor after the handler returned, when grpc-go ended the
// call's context and the account's calls were given back: one
// certificate kept up to MaxConcurrentStreams (1,000) of them per
// connection, times its 32 connections, charged to nothing. Now a call is
// charged to its caller's calls until its stream ends at the transport:
// past the limit (64) the next calls are refused RESOURCE_EXHAUSTED, and
// resetting the streams gives the calls back. Without the change all 400
// answers are kept and the account shows no call.
func TestUnreadAnswersStayCharged(t *testing.T) {
	p := newTestPKI(t)
	cfg := fastConfig(t, t.TempDir())
	cfg.TLS = p.conf(pki.RoleGrantor, cfg.NodeID)
	n := start(t, cfg, true)
	const who, sent = "flood", 400 // a sidecar's account is named by its name
	limit := DefaultLimits().Calls

	h := dialH2(t, n.RPCAddr(), p.conf(pki.RoleSidecar, "flood"))
	// No window for any stream: no answer's DATA is ever sent.
	if err := h.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	answers := readAnswers(h)
	before := liveHeap()
	var ids []uint32
	for range sent {
		ids = append(ids, h.call(grantorpb.Grantor_Members_FullMethodName, &grantorpb.MembersRequest{}))
	}
	how := answers.wait(t, ids)
	kept, refused := 0, 0
	var keptIDs []uint32
	for i, s := range how {
		switch s {
		case "headers":
			kept++
			keptIDs = append(keptIDs, ids[i])
		case fmt.Sprintf("grpc-status %d", codes.ResourceExhausted):
			refused++
		}
	}
	calls := callsOf(n, who)
	t.Logf("%d of %d answers kept unsent (live heap +%d KiB), %d refused; the account has %d calls in progress",
		kept, sent, (liveHeap()-before)>>10, refused, calls)
	if kept > limit || calls != kept {
		t.Fatalf("the grantor keeps %d unsent answers for %s, charged as %d calls; want at most its %d calls, all charged", kept, who, calls, limit)
	}
	if kept+refused != sent {
		t.Fatalf("answers %v", how)
	}

	// Another sidecar is not held up.
	side := dialWith(t, n.RPCAddr(), p.conf(pki.RoleSidecar, "honest").ClientCredentials())
	if a := mustAcquire(t, side, acqReq("s1", 1, "x")); !a.Granted {
		t.Fatalf("another sidecar's acquire: %v", a)
	}
	// The client gives up on its answers: its calls are given back.
	for _, id := range keptIDs {
		if err := h.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			t.Fatal(err)
		}
	}
	waitCalls(t, n, who, 0)
}
