package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/leaseside/leaseside/grantor"
)

// The account limits come from the defaults, then the config file's
// "limits" (a role's keys one by one, an identity's over its role's),
// then --limit; a bad key, identity or count is refused naming it.
func TestGrantorLimits(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "grantor.json")
	if err := os.WriteFile(conf, []byte(`{"node_id": "g1", "data_dir": "`+dir+`", "limits": {
		"sidecar": {"leases": 500, "watch_names": 100},
		"operator": {"calls": 4096},
		"identities": {"sidecar/big": {"leases": 100000}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	parse := func(args ...string) (grantorOptions, error) {
		var g grantorFlagValues
		fs := pflag.NewFlagSet("grantor", pflag.ContinueOnError)
		g.register(fs)
		if err := fs.Parse(append([]string{"--config", conf}, args...)); err != nil {
			t.Fatal(err)
		}
		return g.options(fs)
	}
	o, err := parse("--limit", "sidecar/big.waiters=2000", "--limit", "operator/bench.leases=0", "--limit", "sidecar.sessions=64")
	if err != nil {
		t.Fatal(err)
	}
	l := o.Limits
	def := grantor.DefaultLimits()
	if l.Sidecar.Leases != 500 || l.Sidecar.WatchNames != 100 || l.Sidecar.Sessions != 64 || l.Sidecar.Calls != def.Calls {
		t.Errorf("sidecar limits %+v: want leases 500, watch_names 100, sessions 64, the rest default", l.Sidecar)
	}
	if l.Operator.Calls != 4096 || l.Operator.Leases != def.Leases {
		t.Errorf("operator limits %+v", l.Operator)
	}
	big := o.config().Limits.For(grantor.Identity{Role: grantor.RoleSidecar, Name: "big"})
	if big.Leases != 100000 || big.Waiters != 2000 || big.WatchNames != 100 {
		t.Errorf("sidecar/big %+v: want leases 100000 (file), waiters 2000 (flag), watch_names 100 (its role's)", big)
	}
	bench := o.config().Limits.For(grantor.Identity{Role: grantor.RoleOperator, Name: "bench"})
	if bench.Leases != 0 || bench.Calls != 4096 {
		t.Errorf("operator/bench %+v: want no lease limit, its role's calls", bench)
	}
	for _, tt := range []struct{ flag, want string }{
		{"sidecar.lease=5", `no limit named "lease"`},
		{"sidecar.leases=-1", "not a count"},
		{"sidecar.leases", "want ROLE.KEY=N"},
		{"admin.leases=5", `unknown role "admin"`},
		{"sidecar/.leases=5", "want ROLE/NAME"},
	} {
		if _, err := parse("--limit", tt.flag); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("--limit %s: %v, want an error saying %q", tt.flag, err, tt.want)
		}
	}
	if err := os.WriteFile(conf, []byte(`{"limits": {"sidecar": {"leasez": 1}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := parse(); err == nil || !strings.Contains(err.Error(), "limits.sidecar") || !strings.Contains(err.Error(), "leasez") {
		t.Errorf("unknown key in limits.sidecar: %v", err)
	}
}
