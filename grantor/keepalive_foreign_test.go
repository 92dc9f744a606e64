package grantor

import (
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
)

// Lane review of 2026-12-03, finding K3: a keepalive that named one
// session of another identity (a host whose certificate was renamed still
// names the sessions it opened under the old name) failed with
// PERMISSION_DENIED as a whole, so one such session stopped the renewal of
// every other session of the host. Over real TLS: that session alone is
// answered refused, saying nothing of it (no term, digest or listing,
// although its digest differs), and nothing of it is done (the grant its
// request names untold stays its owner's); the host's own session is
// renewed in the same answer; the refusal is audited.
func TestKeepAliveRefusesAForeignSessionAloneOverTLS(t *testing.T) {
	p := newTestPKI(t)
	audit := newLineLog()
	cfg := fastConfig(t, t.TempDir())
	cfg.TLS = p.conf(pki.RoleGrantor, cfg.NodeID)
	cfg.Audit = audit.logger()
	n := start(t, cfg, true)
	hostA := dialWith(t, n.RPCAddr(), p.conf(pki.RoleSidecar, "host-a").ClientCredentials())
	hostB := dialWith(t, n.RPCAddr(), p.conf(pki.RoleSidecar, "host-b").ClientCredentials())
	a := mustAcquire(t, hostA, acqReq("sa", 1, "x"))
	b := mustAcquire(t, hostB, acqReq("sb", 1, "y"))
	if !a.Granted || !b.Granted {
		t.Fatalf("grants: %v %v", a, b)
	}

	ka, err := hostB.KeepAlive(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	ttl := int64(10 * time.Second)
	req := &grantorpb.KeepAliveRequest{Session: "sa", Batch: 1, Sessions: []*grantorpb.SessionRenewal{
		{Session: "sa", TtlNs: ttl, LeaseSetVersion: 1, Untold: []*grantorpb.LeaseRef{{Lease: "x", Token: a.Token}}},
		{Session: "sb", TtlNs: ttl, LeaseSetVersion: grantorpb.TokenDigest(b.Token)},
	}}
	if err := ka.Send(req); err != nil {
		t.Fatal(err)
	}
	resp, err := ka.Recv()
	if err != nil {
		t.Fatalf("host-b's keepalive naming host-a's session beside its own: %v, want an answer per session", err)
	}
	if len(resp.Sessions) != 2 {
		t.Fatalf("answer: %v, want two sessions", resp)
	}
	foreign, own := resp.Sessions[0], resp.Sessions[1]
	want := &grantorpb.SessionRenewed{Session: "sa", Refused: true}
	if foreign.Session != want.Session || !foreign.Refused || foreign.Renewed || foreign.TtlNs != 0 ||
		foreign.LeaseSetVersion != 0 || foreign.Listed || len(foreign.Leases) != 0 {
		t.Fatalf("host-a's session in host-b's keepalive: %v, want only %v", foreign, want)
	}
	if own.Session != "sb" || !own.Renewed || own.Refused || own.Listed {
		t.Fatalf("host-b's own session beside it: %v, want renewed", own)
	}
	audit.wait(t, "event=refused", "role=sidecar", "name=host-b", "call=KeepAlive", "another identity")
	if still, err := hostB.Acquire(tctx(t), acqReq("sb", 2, "x")); err != nil || still.Granted || still.Token != a.Token {
		t.Fatalf("x after host-b named it untold under host-a's session: %v %v, want still host-a's with token %d", still, err, a.Token)
	}
	// The stream goes on: the next keepalive is answered too.
	req.Batch = 2
	if err := ka.Send(req); err != nil {
		t.Fatal(err)
	}
	if resp, err := ka.Recv(); err != nil || resp.Batch != 2 || !resp.Sessions[1].Renewed {
		t.Fatalf("the next keepalive on the stream: %v %v", resp, err)
	}
}
