package grantor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
)

// A rules file that cannot be used is refused, naming its line.
func TestParseNameRulesRefusesBadLines(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{name: "too few words", text: "# ok\nweb-* acquire\n", want: "rules:2: want IDENTITY ACCESS PREFIX... or IDENTITY join, got 2 words"},
		{name: "unknown access", text: "web-* write web/\n", want: "rules:1: access \"write\": want acquire, read or join"},
		{name: "join with a prefix", text: "grantor/g* join web/\n", want: "rules:1: a join rule takes no prefix"},
		{name: "join with a bad glob", text: "grantor/g[ join\n", want: "rules:1: identity \"grantor/g[\" is not a valid glob"},
		{name: "bad glob", text: "\n\nweb-[ acquire web/\n", want: "rules:3: identity \"web-[\" is not a valid glob"},
		{name: "bad prefix", text: "web-* read web/ jobs/$x\n", want: "rules:1: prefix \"jobs/$x\": byte '$' at 5"},
		{name: "star inside a prefix", text: "web-* read web/*\n", want: "rules:1: prefix \"web/*\""},
		{name: "prefix too long", text: "web-* read " + strings.Repeat("a", 257) + "\n", want: "257 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseNameRules("rules", []byte(tt.text))
			if !errors.Is(err, ErrBadNameRules) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseNameRules: %v, want ErrBadNameRules saying %q", err, tt.want)
			}
		})
	}
}

// Join rules decide which grantor certificates may become servers of the
// raft configuration: every one without rules, only those a join rule
// names with rules (none with a file of name rules only); they give no
// access to names, and name rules give no join.
func TestJoinRulesAdmitGrantors(t *testing.T) {
	var none *NameRules
	if !none.admitsGrantor("g9") {
		t.Fatal("without rules, grantor g9 may not join")
	}
	r, err := ParseNameRules("rules", []byte("grantor/g[1-3] join\ngrantor/db-* join # spares\n*/* acquire *\n* acquire *\n"))
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"g1": true, "g3": true, "db-7": true, "g4": false, "g9": false, "": false, "x/g1": false} {
		if got := r.admitsGrantor(id); got != want {
			t.Errorf("admitsGrantor(%q) = %v, want %v", id, got, want)
		}
	}
	if r.Len() != 4 || r.joinRules() != 2 {
		t.Errorf("%d rules, %d join rules; want 4, 2", r.Len(), r.joinRules())
	}
	names, err := ParseNameRules("rules", []byte("*/* acquire *\n* acquire *\n"))
	if err != nil {
		t.Fatal(err)
	}
	if names.admitsGrantor("g1") {
		t.Error("a file of name rules only lets grantor g1 join")
	}
	joins, err := ParseNameRules("rules", []byte("*/* join\n"))
	if err != nil {
		t.Fatal(err)
	}
	if joins.allows("grantor/g1", "a", AccessRead) || !joins.admitsGrantor("g1") {
		t.Error("a join rule for every grantor gives names, or no join")
	}
}

// A rules file another user could change is refused, naming it: whoever
// may write it decides who may take every name.
func TestLoadNameRulesRefusesAFileOthersMayWrite(t *testing.T) {
	for _, tt := range []struct {
		name string
		prep func(path string) error
		want string
	}{
		{name: "this user's, 0644", prep: func(string) error { return nil }},
		{name: "writable by others", prep: func(p string) error { return os.Chmod(p, 0o666) }, want: "is writable by its group or by others (mode 0666)"},
		{name: "writable by its group", prep: func(p string) error { return os.Chmod(p, 0o664) }, want: "is writable by its group or by others"},
		{name: "another user's", prep: func(p string) error { return os.Chown(p, nobody, nobody) }, want: "belongs to uid 65534"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rules")
			if err := os.WriteFile(path, []byte("web-* acquire web/\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := tt.prep(path); err != nil {
				t.Fatal(err)
			}
			r, err := LoadNameRules(path)
			if tt.want == "" {
				if err != nil || r.Len() != 1 {
					t.Fatalf("LoadNameRules: %v, %v", r, err)
				}
				return
			}
			if !errors.Is(err, ErrBadNameRules) || !strings.Contains(err.Error(), path+" "+tt.want) {
				t.Fatalf("LoadNameRules: %v, want ErrBadNameRules saying %q", err, tt.want)
			}
		})
	}
}

// What the rules allow: the union of the rules that match the identity,
// acquire including read, prefixes as string prefixes, * every name; no
// rule, no access; no rules at all, everything.
func TestNameRulesAllow(t *testing.T) {
	r, err := ParseNameRules("rules", []byte(`
# sidecars of the web service
web-*       acquire  web/ jobs/web-   # two prefixes
web-*       read     shared/
db-1        acquire  db/
operator/*  acquire  *
`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 4 {
		t.Fatalf("%d rules, want 4", r.Len())
	}
	tests := []struct {
		name, identity, lease string
		access                NameAccess
		ok                    bool
	}{
		{name: "acquire on its prefix", identity: "web-1", lease: "web/a", access: AccessAcquire, ok: true},
		{name: "acquire on its second prefix", identity: "web-2", lease: "jobs/web-render", access: AccessAcquire, ok: true},
		{name: "read where it may acquire", identity: "web-1", lease: "web/a", access: AccessRead, ok: true},
		{name: "read on a read prefix", identity: "web-1", lease: "shared/config", access: AccessRead, ok: true},
		{name: "acquire on a read prefix", identity: "web-1", lease: "shared/config", access: AccessAcquire},
		{name: "another service's name", identity: "web-1", lease: "db/primary", access: AccessRead},
		{name: "prefix is not a glob", identity: "web-1", lease: "jobs/db-1", access: AccessAcquire},
		{name: "exact identity", identity: "db-1", lease: "db/primary", access: AccessAcquire, ok: true},
		{name: "unlisted identity", identity: "db-2", lease: "db/primary", access: AccessRead},
		{name: "operator, every name", identity: "operator/alice", lease: "anything/at/all", access: AccessAcquire, ok: true},
		{name: "a sidecar glob does not match other roles", identity: "grantor/web-1", lease: "web/a", access: AccessRead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.allows(tt.identity, tt.lease, tt.access); got != tt.ok {
				t.Fatalf("allows(%s, %s, %s) = %v, want %v", tt.identity, tt.lease, tt.access, got, tt.ok)
			}
		})
	}
	var none *NameRules
	if !none.allows("anyone", "any/name", AccessAcquire) {
		t.Fatal("no rules refused a name")
	}
	empty, err := ParseNameRules("empty", []byte("# nobody\n"))
	if err != nil || empty.allows("web-1", "web/a", AccessRead) {
		t.Fatalf("an empty rules file (%v) allowed a name", err)
	}
}

// Every RPC says what the name rules ask of its caller, and each checked
// unary one names its lease, so that a new RPC cannot slip past them.
func TestEveryRPCHasANameScope(t *testing.T) {
	desc := grantorpb.Grantor_ServiceDesc
	var methods []string
	for _, m := range desc.Methods {
		methods = append(methods, "/"+desc.ServiceName+"/"+m.MethodName)
	}
	for _, s := range desc.Streams {
		methods = append(methods, "/"+desc.ServiceName+"/"+s.StreamName)
	}
	for _, m := range methods {
		if _, ok := nameScopes[m]; !ok {
			t.Errorf("RPC %s has no entry in nameScopes: say what the name rules ask of it", m)
		}
	}
	if len(nameScopes) != len(methods) {
		t.Errorf("nameScopes has %d entries, the service %d methods", len(nameScopes), len(methods))
	}
	for m, req := range map[string]any{
		grantorpb.Grantor_Acquire_FullMethodName:       &grantorpb.AcquireRequest{},
		grantorpb.Grantor_AcquireShared_FullMethodName: &grantorpb.AcquireRequest{},
		grantorpb.Grantor_Proclaim_FullMethodName:      &grantorpb.ProclaimRequest{},
		grantorpb.Grantor_CheckToken_FullMethodName:    &grantorpb.CheckTokenRequest{},
	} {
		if _, ok := req.(leaseRequest); !ok || nameScopes[m] == AccessNone {
			t.Errorf("%s: checked %v, its request names a lease %v", m, nameScopes[m] != AccessNone, ok)
		}
	}
}

// Over TLS, as the interceptor sees certificates: a sidecar acquires,
// checks and watches within its rules and is refused (PERMISSION_DENIED
// with a NameNotAllowed detail, a DENIED event for a watch) outside them;
// new rules apply to the next call, and a grant made before them can
// still be released.
func TestNameRulesOverTLS(t *testing.T) {
	p := newTestPKI(t)
	rules, err := ParseNameRules("rules", []byte("web-* acquire web/\nweb-* read shared/\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig(t, t.TempDir())
	cfg.TLS = p.conf(pki.RoleGrantor, "n1")
	cfg.NameRules = rules
	n := start(t, cfg, true)
	web := dialWith(t, n.RPCAddr(), p.conf(pki.RoleSidecar, "web-1").ClientCredentials())

	a := mustAcquire(t, web, acqReq("s1", 1, "web/a"))
	refused := func(what string, err error, lease, access string) {
		t.Helper()
		st := status.Convert(err)
		if st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), "web-1") || !strings.Contains(st.Message(), lease) {
			t.Fatalf("%s: %v, want PERMISSION_DENIED naming web-1 and %s", what, err, lease)
		}
		for _, d := range st.Details() {
			if nn, ok := d.(*grantorpb.NameNotAllowed); ok && nn.Lease == lease && nn.Identity == "web-1" && nn.Access == access {
				return
			}
		}
		t.Fatalf("%s: details %v, want NameNotAllowed{%s web-1 %s}", what, st.Details(), lease, access)
	}
	_, err = web.Acquire(tctx(t), acqReq("s1", 2, "db/primary"))
	refused("acquire outside the rules", err, "db/primary", "acquire")
	_, err = web.Acquire(tctx(t), acqReq("s1", 3, "shared/config"))
	refused("acquire on a read prefix", err, "shared/config", "acquire")
	_, err = web.CheckToken(tctx(t), &grantorpb.CheckTokenRequest{Lease: "db/primary", Token: 1})
	refused("check outside the rules", err, "db/primary", "read")
	if _, err := web.CheckToken(tctx(t), &grantorpb.CheckTokenRequest{Lease: "shared/config", Token: 1}); err != nil {
		t.Fatalf("check on a read prefix: %v", err)
	}
	_, err = web.Proclaim(tctx(t), &grantorpb.ProclaimRequest{Id: &grantorpb.RequestID{Session: "s1", Seq: 4}, Lease: "db/primary", Token: 1, Value: "v"})
	refused("proclaim outside the rules", err, "db/primary", "acquire")

	ws, err := web.Watch(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Send(&grantorpb.WatchRequest{Add: []string{"db/primary", "shared/config"}}); err != nil {
		t.Fatal(err)
	}
	got := map[string]grantorpb.WatchEvent_Kind{}
	for len(got) < 2 {
		ev, err := ws.Recv()
		if err != nil {
			t.Fatalf("the watch stream ended: %v", err)
		}
		got[ev.Lease] = ev.Kind
	}
	if got["db/primary"] != grantorpb.WatchEvent_DENIED || got["shared/config"] != grantorpb.WatchEvent_SNAPSHOT {
		t.Fatalf("watch events %v, want db/primary DENIED and shared/config SNAPSHOT", got)
	}

	// Reload: web-* may now take db/ and no longer web/.
	next, err := ParseNameRules("rules", []byte("web-* acquire db/\n"))
	if err != nil {
		t.Fatal(err)
	}
	n.SetNameRules(next)
	mustAcquire(t, web, acqReq("s1", 5, "db/primary"))
	_, err = web.Acquire(tctx(t), acqReq("s1", 6, "web/b"))
	refused("acquire under the new rules", err, "web/b", "acquire")
	rel, err := web.Release(tctx(t), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: "s1", Seq: 7}, Lease: "web/a", Owner: "o", Token: a.Token})
	if err != nil || !rel.Released {
		t.Fatalf("releasing a grant the new rules would refuse: %v %v", rel, err)
	}
	// Counted: acquire (two Acquires, a Proclaim, one after the reload)
	// and read (a CheckToken, a watched name).
	if a, r := n.metrics.nameRefused[AccessAcquire].Load(), n.metrics.nameRefused[AccessRead].Load(); a != 4 || r != 2 {
		t.Fatalf("leaseside_grantor_name_refused_total: acquire %d, read %d; want 4 and 2", a, r)
	}
}

// A node without name rules says at start that every identity may use
// every name, and one with rules says they are in force.
func TestNameRulesAreLoggedAtStart(t *testing.T) {
	for _, tt := range []struct {
		name  string
		rules *NameRules
		want  []string
	}{
		{name: "none", want: []string{"name rules: none given", "every identity may acquire, watch and check every name"}},
		{name: "a file", rules: &NameRules{source: "/etc/leaseside/names", rules: []nameRule{{identity: "*", access: AccessRead, prefixes: []string{""}}}},
			want: []string{"name rules in force", "file=/etc/leaseside/names", "rules=1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			log := newLineLog()
			cfg := fastConfig(t, t.TempDir())
			cfg.Logger = log.logger()
			cfg.NameRules = tt.rules
			n, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer n.Shutdown()
			if _, ok := log.find(tt.want...); !ok {
				t.Fatalf("no log line with %q", tt.want)
			}
		})
	}
}
