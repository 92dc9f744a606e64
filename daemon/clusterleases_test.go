package daemon

import (
	"strings"
	"testing"

	"github.com/leaseside/leaseside/ipc"
)

// The leases op names every host's leases and identities, which the ACL
// does not cover: another local user is refused with permission_denied
// before anything is asked; root's is relayed to the grantors (this
// scripted one does not implement Leases: not_supported says so).
func TestClusterLeasesOnlyForRoot(t *testing.T) {
	r := newRig(t)
	other := &ipc.Conn{Cred: ipc.Cred{UID: 4242, GID: 4242}}
	root := &ipc.Conn{Cred: ipc.Cred{UID: 0}}
	resp := r.d.Handle(ctxT(t), other, &ipc.Request{Op: ipc.OpLeases})
	if resp.Error == nil || resp.Error.Code != ipc.CodePermissionDenied || !strings.Contains(resp.Error.Message, "uid 4242") ||
		!strings.Contains(resp.Error.Message, "--grantors") {
		t.Fatalf("uid 4242's leases: %+v, want permission_denied naming the uid and --grantors", resp.Error)
	}
	resp = r.d.Handle(ctxT(t), root, &ipc.Request{Op: ipc.OpLeases, Prefix: "jobs/"})
	if resp.Error == nil || resp.Error.Code != ipc.CodeNotSupported {
		t.Fatalf("root's leases against a grantor without Leases: %+v, want not_supported", resp)
	}
}
