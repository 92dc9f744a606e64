package grantor

import (
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
)

// Rule (SECURITY.md, "leaving raft"): a grantor leaves the configuration
// by its own Leave or by an operator's RemoveServer. A grantor
// certificate removes only its own server and makes only its own grantor
// leave: one of a name in no configuration (or another member's) is
// refused with PermissionDenied and audited, and the member stays. Before,
// any grantor certificate of the CA removed any member at the leader and
// made any grantor leave and stop (red team, issue 21: gx, refused as a
// member by the join rules, removed g1 of a running cluster).
func TestGrantorCertificateRemovesOnlyItself(t *testing.T) {
	p := newTestPKI(t)
	audits := make([]*lineLog, 3)
	i := 0
	c := startClusterWith(t, 3, func(cfg *Config) {
		cfg.TLS = p.conf(pki.RoleGrantor, cfg.NodeID)
		audits[i] = newLineLog()
		cfg.Audit = audits[i].logger()
		i++
	})
	li := c.leader()
	l := c.nodes[li]
	fi := (li + 1) % 3
	f := c.nodes[fi]
	for _, who := range []string{"gx", c.nodes[(li+2)%3].cfg.NodeID} {
		creds := p.conf(pki.RoleGrantor, who).ClientCredentials()
		_, err := dialWith(t, l.RPCAddr(), creds).RemoveServer(tctx(t), &grantorpb.RemoveServerRequest{NodeId: f.cfg.NodeID})
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("grantor/%s removing %s: %v, want PermissionDenied", who, f.cfg.NodeID, err)
		}
		audits[li].wait(t, "event=refused", "role=grantor", "name="+who, "call=RemoveServer")
		_, err = dialWith(t, f.RPCAddr(), creds).Leave(tctx(t), &grantorpb.LeaveRequest{})
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("grantor/%s making %s leave: %v, want PermissionDenied", who, f.cfg.NodeID, err)
		}
		audits[fi].wait(t, "event=refused", "role=grantor", "name="+who, "call=Leave")
	}
	if !slices.Contains(servers(l), f.cfg.NodeID+"=Voter") || f.leaving.Load() {
		t.Fatalf("%s after the refused calls: servers %v, leaving %v", f.cfg.NodeID, servers(l), f.leaving.Load())
	}
	// Its own certificate still makes it leave, and an operator's still
	// removes a server.
	own := p.conf(pki.RoleGrantor, f.cfg.NodeID).ClientCredentials()
	if r, err := dialWith(t, f.RPCAddr(), own).Leave(tctx(t), &grantorpb.LeaveRequest{}); err != nil || r.NodeId != f.cfg.NodeID {
		t.Fatalf("%s's own Leave: %v %v", f.cfg.NodeID, r, err)
	}
	last := c.nodes[(li+2)%3].cfg.NodeID
	op := p.conf(pki.RoleOperator, "alice").ClientCredentials()
	if _, err := dialWith(t, l.RPCAddr(), op).RemoveServer(tctx(t), &grantorpb.RemoveServerRequest{NodeId: last}); err != nil {
		t.Fatalf("an operator removing %s: %v", last, err)
	}
}
