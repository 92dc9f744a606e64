package daemon

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/ipc"
)

// No reply to a local caller other than root or the daemon's own uid
// names a grantor session: not hello, not a grantor's refusal relayed in
// an error (one that names the session it refused). Root still sees both.
func TestRepliesToOtherUsersNameNoSession(t *testing.T) {
	r := newRig(t)
	session := r.d.g.sessionFor(ttl).id
	other := &ipc.Conn{Cred: ipc.Cred{UID: 4242, GID: 4242}}
	root := &ipc.Conn{Cred: ipc.Cred{UID: 0}}

	if h := r.d.Handle(ctxT(t), root, &ipc.Request{Op: ipc.OpHello}).Hello; h == nil || h.Session != r.d.g.session {
		t.Fatalf("root's hello %+v, want session %s", h, r.d.g.session)
	}
	h := r.d.Handle(ctxT(t), other, &ipc.Request{Op: ipc.OpHello}).Hello
	if h == nil || h.Server != "leaseside" || h.Session != "" {
		t.Fatalf("uid 4242's hello %+v, want one without a session", h)
	}

	refused := &ipc.Response{Error: grantorError(status.Errorf(codes.PermissionDenied,
		"grantor: permission denied: session %q belongs to another identity than %q", session, "host-a"))}
	if !strings.Contains(refused.Error.Message, session) {
		t.Fatalf("the relayed refusal %q does not name the session: the test proves nothing", refused.Error.Message)
	}
	hidden := r.d.hideSession(refused)
	if strings.Contains(hidden.Error.Message, r.d.g.session) || hidden.Error.Code != ipc.CodePermissionDenied ||
		!strings.Contains(hidden.Error.Message, "belongs to another identity") {
		t.Fatalf("the refusal told uid 4242: %+v", hidden.Error)
	}
	if !strings.Contains(refused.Error.Message, session) {
		t.Fatal("hiding the session changed the reply root would get")
	}

	// status tells the last grantor error, which may name the session.
	r.d.contact("g", status.Errorf(codes.OutOfRange, "grantor: stale request: session %q seq 3 is below first_unacked 4", session))
	if g := r.d.Handle(ctxT(t), root, &ipc.Request{Op: ipc.OpStatus}).Grantor; g == nil || !strings.Contains(g.Error, session) {
		t.Fatalf("root's status %+v does not tell the grantor's error: the test proves nothing", g)
	}
	if g := r.d.Handle(ctxT(t), other, &ipc.Request{Op: ipc.OpStatus}).Grantor; g == nil || strings.Contains(g.Error, r.d.g.session) ||
		!strings.Contains(g.Error, "stale request") {
		t.Fatalf("uid 4242's status tells the grantor's error as %+v", g)
	}
}
