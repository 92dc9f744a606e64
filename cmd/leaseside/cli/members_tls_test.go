package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leaseside/leaseside/grantor"
	"github.com/leaseside/leaseside/grantor/pki"
)

// `members` and `members remove` against a grantor with mutual TLS, as a
// script meets them: a refusal the grantor answered is exit 1 in its own
// words (not 69 "no leader answered", which a script retries forever),
// and a missing TLS flag is named instead of gRPC's transport text.
func TestMembersAgainstTLSGrantor(t *testing.T) {
	ca := t.TempDir()
	if err := pki.CreateCA(ca, 0); err != nil {
		t.Fatal(err)
	}
	cert := func(role, name string) (string, string) {
		c, k, err := pki.CreateCert(ca, pki.CertRequest{Identity: pki.Identity{Role: role, Name: name}})
		if err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	gc, gk := cert(pki.RoleGrantor, "g1")
	conf, err := pki.NewConfigurator(pki.Files{CA: filepath.Join(ca, pki.CAFile), Cert: gc, Key: gk})
	if err != nil {
		t.Fatal(err)
	}
	cfg := grantor.DefaultConfig()
	cfg.NodeID = "g1"
	cfg.DataDir = t.TempDir()
	cfg.Bootstrap = true
	cfg.RPCAddr = "127.0.0.1:0"
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.TLS = conf
	node, err := grantor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- node.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-ran
	})
	if err := node.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	addr := node.RPCAddr()
	sc, sk := cert(pki.RoleSidecar, "h1")
	sidecarTLS := []string{"--tls-ca", filepath.Join(ca, pki.CAFile), "--tls-cert", sc, "--tls-key", sk}

	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{name: "no TLS flags", args: []string{"members", "--grantors", addr, "--timeout", "10s"}, code: ExitUnavailable,
			want: "it wants TLS, give --tls-ca, --tls-cert and --tls-key"},
		{name: "remove with a sidecar certificate", args: append([]string{"members", "remove", "g9", "--grantors", addr, "--timeout", "10s"}, sidecarTLS...),
			code: ExitError, want: "a sidecar certificate may not call RemoveServer"},
		{name: "timeout 0", args: []string{"members", "--grantors", addr, "--timeout", "0s"}, code: ExitUsage,
			want: "--timeout 0s: must be more than 0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := runMain(tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, want %d saying %q; stderr:\n%s", code, tt.code, tt.want, stderr)
			}
			for _, raw := range []string{"rpc error", "code =", "server preface", "no leader answered"} {
				if strings.Contains(stderr, raw) {
					t.Errorf("stderr has the raw %q:\n%s", raw, stderr)
				}
			}
		})
	}
}
