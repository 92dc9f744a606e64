package grantor

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
)

// The attack of issue 8 is audited, over real TLS (review R8-13): a
// Release and a KeepAlive under another sidecar's session are refused and
// each is one audit line naming the caller, the call and the lease. Those
// lines are limited per identity (its account's audit_lines_per_sec, 2
// here): more refusals within the second write nothing, and the next line
// after it says how many were held back.
func TestAuditRefusedSessionUse(t *testing.T) {
	p := newTestPKI(t)
	audit := newLineLog()
	cfg := fastConfig(t, t.TempDir())
	cfg.TLS = p.conf(pki.RoleGrantor, "n1")
	cfg.Audit = audit.logger()
	lim := DefaultLimits()
	lim.AuditLines = 2
	cfg.Limits.Identities = map[string]Limits{"sidecar/host-b": lim}
	clock := clockwatch.NewFake(clockwatch.Instant(time.Hour))
	n := start(t, cfg, true, func(n *Node) { n.accounts.clock = clock })
	hostA := dialWith(t, n.RPCAddr(), p.conf(pki.RoleSidecar, "host-a").ClientCredentials())
	hostB := dialWith(t, n.RPCAddr(), p.conf(pki.RoleSidecar, "host-b").ClientCredentials())
	a, err := hostA.Acquire(tctx(t), acqReq("sa", 1, "x"))
	if err != nil || !a.Granted {
		t.Fatalf("host-a: %v %v", a, err)
	}
	release := func(seq uint64) {
		t.Helper()
		_, err := hostB.Release(tctx(t), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: "sa", Seq: seq}, Lease: "x", Owner: "o", Token: a.Token})
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("host-b releasing under host-a's session: %v, want PermissionDenied", err)
		}
	}
	release(2)
	audit.wait(t, "event=refused", "role=sidecar", "name=host-b", "call=Release", "lease=x", "another identity")
	ka, err := hostB.KeepAlive(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := ka.Send(&grantorpb.KeepAliveRequest{Session: "sa", Batch: 1, Leases: []*grantorpb.LeaseRef{{Lease: "x", Token: a.Token}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ka.Recv(); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("host-b's keepalive of host-a's session: %v, want PermissionDenied", err)
	}
	audit.wait(t, "event=refused", "role=sidecar", "name=host-b", "call=KeepAlive", "another identity")

	// The limiter: host-b's two lines of the second are written; four
	// more refused Releases write nothing; one a second later writes a
	// line that counts them.
	releases := func() (n int) {
		audit.mu.Lock()
		defer audit.mu.Unlock()
		for _, l := range audit.lines {
			if containsAll(l, []string{"event=refused", "name=host-b", "call=Release"}) {
				n++
			}
		}
		return n
	}
	for seq := range uint64(4) {
		release(3 + seq)
	}
	if got := releases(); got != 1 {
		t.Fatalf("%d refused Release lines after 5 refusals within the second (and a KeepAlive's), want 1", got)
	}
	clock.Advance(time.Second)
	release(7)
	line := audit.wait(t, "event=refused", "name=host-b", "call=Release", "suppressed=4")
	if got := releases(); got != 2 || !strings.Contains(line, "lease=x") {
		t.Fatalf("%d refused Release lines, the last %q; want 2, the last counting 4 held back", got, line)
	}
}

// TestAuditLineAsLoggerWritesIt: the trail hands its handler the record
// Logger.Log would (audit.write builds it without the caller's program
// counter), so a line reads the same: here a grant and a release, against
// Logger.Log with the same attributes, through one text handler without
// the time.
func TestAuditLineAsLoggerWritesIt(t *testing.T) {
	var got, want strings.Builder
	noTime := &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey && len(groups) == 0 {
			return slog.Attr{}
		}
		return a
	}}
	a := newAudit(slog.New(slog.NewTextHandler(&got, noTime)), nil, "g1")
	defer a.close()
	who := Identity{Role: RoleSidecar, Name: "host-1"}
	a.grant(who, "db/primary", 7, "s1", "o \"quoted\"")
	a.release(who, releaseCmd{Lease: "db/primary", Token: 7, OwnerEnded: true}, true)
	l := slog.New(slog.NewTextHandler(&want, noTime))
	l.Info("audit", "event", "grant", "role", "sidecar", "name", "host-1", "lease", "db/primary", "token", uint64(7), "session", "s1", "owner", "o \"quoted\"")
	l.Info("audit", "event", "release", "role", "sidecar", "name", "host-1", "lease", "db/primary", "token", uint64(7), "released", true, "ended", "owner_ended")
	if got.String() != want.String() {
		t.Fatalf("audit lines:\n%s\nwant, as Logger.Log writes them:\n%s", got.String(), want.String())
	}
}
