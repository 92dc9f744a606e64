package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// newCA makes a CA in a fresh directory.
func newCA(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := CreateCA(dir, 0); err != nil {
		t.Fatal(err)
	}
	return dir
}

// newFiles makes a certificate for role/name under the CA in dir.
func newFiles(t *testing.T, dir, role, name string) Files {
	t.Helper()
	cert, key, err := CreateCert(dir, CertRequest{Identity: Identity{Role: role, Name: name}})
	if err != nil {
		t.Fatal(err)
	}
	return Files{CA: filepath.Join(dir, CAFile), Cert: cert, Key: key}
}

func newConfigurator(t *testing.T, f Files) *Configurator {
	t.Helper()
	c, err := NewConfigurator(f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestCreateCAAndCert(t *testing.T) {
	dir := newCA(t)
	if m := mode(t, filepath.Join(dir, CAKeyFile)); m != 0o600 {
		t.Errorf("CA key mode %v, want 0600", m)
	}
	if err := CreateCA(dir, 0); !errors.Is(err, ErrExists) {
		t.Errorf("second CreateCA in one dir: %v, want ErrExists", err)
	}
	id := Identity{Role: RoleGrantor, Name: "g1"}
	cert, key, err := CreateCert(dir, CertRequest{Identity: id, IPs: []net.IP{net.ParseIP("10.0.0.1")}, DNSNames: []string{"g1.example"}, Validity: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(cert) != "grantor-g1.pem" || filepath.Base(key) != "grantor-g1-key.pem" {
		t.Errorf("file names %s, %s", cert, key)
	}
	if m := mode(t, key); m != 0o600 {
		t.Errorf("key mode %v, want 0600", m)
	}
	c := newConfigurator(t, Files{CA: filepath.Join(dir, CAFile), Cert: cert, Key: key})
	if got := c.Identity(); got != id {
		t.Errorf("identity %v, want %v", got, id)
	}
	leaf := c.cur.Load().cert.Leaf
	if got := leaf.URIs[0].String(); got != "leaseside://grantor/g1" {
		t.Errorf("URI SAN %q", got)
	}
	if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		t.Errorf("grantor key usage %v, want server and client", leaf.ExtKeyUsage)
	}
	if left := time.Until(leaf.NotAfter); left > 49*time.Hour || left < 47*time.Hour {
		t.Errorf("validity left %v, want about 48h", left)
	}
	if len(leaf.IPAddresses) != 1 || leaf.DNSNames[0] != "g1.example" {
		t.Errorf("SANs %v %v", leaf.IPAddresses, leaf.DNSNames)
	}
	if _, _, err := CreateCert(dir, CertRequest{Identity: id}); !errors.Is(err, ErrExists) {
		t.Errorf("second CreateCert: %v, want ErrExists", err)
	}
	if _, _, err := CreateCert(dir, CertRequest{Identity: id, Overwrite: true}); err != nil {
		t.Errorf("CreateCert with Overwrite: %v", err)
	}
	sc := newFiles(t, dir, RoleSidecar, "host-1")
	leaf = newConfigurator(t, sc).cur.Load().cert.Leaf
	if slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		t.Errorf("a sidecar certificate may serve: %v", leaf.ExtKeyUsage)
	}
}

func TestCreateCertRefuses(t *testing.T) {
	dir := newCA(t)
	for _, tc := range []struct {
		name string
		req  CertRequest
		want string
	}{
		{name: "unknown role", req: CertRequest{Identity: Identity{Role: "admin", Name: "x"}}, want: "unknown role"},
		{name: "empty name", req: CertRequest{Identity: Identity{Role: RoleSidecar}}, want: "name"},
		{name: "slash in name", req: CertRequest{Identity: Identity{Role: RoleSidecar, Name: "a/b"}}, want: "name"},
		{name: "outlasts the CA", req: CertRequest{Identity: Identity{Role: RoleSidecar, Name: "a"}, Validity: 20 * 365 * 24 * time.Hour}, want: "outlast"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := CreateCert(dir, tc.req)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, _, err := CreateCert(t.TempDir(), CertRequest{Identity: Identity{Role: RoleSidecar, Name: "a"}}); err == nil {
		t.Error("CreateCert without a CA succeeded")
	}
}

func TestIdentityOf(t *testing.T) {
	u := func(s string) *url.URL {
		v, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name string
		uris []*url.URL
		want Identity
		ok   bool
	}{
		{name: "grantor", uris: []*url.URL{u("leaseside://grantor/g1")}, want: Identity{RoleGrantor, "g1"}, ok: true},
		{name: "other schemes ignored", uris: []*url.URL{u("spiffe://x/y"), u("leaseside://sidecar/h")}, want: Identity{RoleSidecar, "h"}, ok: true},
		{name: "none", uris: []*url.URL{u("spiffe://x/y")}},
		{name: "two", uris: []*url.URL{u("leaseside://sidecar/a"), u("leaseside://sidecar/b")}},
		{name: "unknown role", uris: []*url.URL{u("leaseside://root/a")}},
		{name: "nested path", uris: []*url.URL{u("leaseside://sidecar/a/b")}},
		{name: "query", uris: []*url.URL{u("leaseside://sidecar/a?x=1")}},
		{name: "user", uris: []*url.URL{u("leaseside://u@sidecar/a")}},
		{name: "no name", uris: []*url.URL{u("leaseside://sidecar/")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := IdentityOf(&x509.Certificate{URIs: tc.uris})
			if tc.ok != (err == nil) || got != tc.want {
				t.Errorf("IdentityOf = %v, %v; want %v, ok %v", got, err, tc.want, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrNoIdentity) {
				t.Errorf("error %v does not wrap ErrNoIdentity", err)
			}
		})
	}
}

// handshake runs a TLS handshake between a server and a client config
// over a pipe and returns each side's error and the server's view.
func handshake(t *testing.T, server, client *tls.Config) (serverErr, clientErr error, cs tls.ConnectionState) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	srv := tls.Server(a, server)
	done := make(chan error, 1)
	go func() {
		err := srv.Handshake()
		if err != nil {
			a.Close() // unblock the client
		}
		done <- err
	}()
	cl := tls.Client(b, client)
	clientErr = cl.Handshake()
	if clientErr == nil {
		// TLS 1.3: the client is done before the server has checked its
		// certificate; a read sees the server's verdict.
		b.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, rerr := cl.Read(make([]byte, 1))
		var ne net.Error
		if rerr != nil && !(errors.As(rerr, &ne) && ne.Timeout()) {
			clientErr = rerr
		}
	}
	b.Close()
	serverErr = <-done
	return serverErr, clientErr, srv.ConnectionState()
}

func TestHandshakes(t *testing.T) {
	dir := newCA(t)
	other := newCA(t)
	g1 := newConfigurator(t, newFiles(t, dir, RoleGrantor, "g1"))
	g2 := newConfigurator(t, newFiles(t, dir, RoleGrantor, "g2"))
	side := newConfigurator(t, newFiles(t, dir, RoleSidecar, "h1"))
	stranger := newConfigurator(t, newFiles(t, other, RoleGrantor, "g2"))
	noCert := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true, NextProtos: []string{ALPNRaft}}
	raftFrom := func(c *Configurator) *tls.Config { return c.ServerConfig(ALPNRaft, Peer{Roles: []string{RoleGrantor}}) }

	for _, tc := range []struct {
		name     string
		server   *tls.Config
		client   *tls.Config
		ok       bool
		wantPeer Identity
	}{
		{name: "grantor to grantor", server: raftFrom(g1), client: g2.ClientConfig(ALPNRaft, Peer{Roles: []string{RoleGrantor}, Name: "g1"}), ok: true, wantPeer: Identity{RoleGrantor, "g2"}},
		{name: "sidecar to gRPC", server: g1.ServerConfig(ALPNgRPC, Peer{}), client: side.ClientConfig(ALPNgRPC, Peer{Roles: []string{RoleGrantor}}), ok: true, wantPeer: Identity{RoleSidecar, "h1"}},
		{name: "no client certificate", server: raftFrom(g1), client: noCert},
		{name: "client from another CA", server: raftFrom(g1), client: stranger.ClientConfig(ALPNRaft, Peer{})},
		{name: "server from another CA", server: raftFrom(stranger), client: g2.ClientConfig(ALPNRaft, Peer{})},
		{name: "sidecar as a raft peer", server: raftFrom(g1), client: side.ClientConfig(ALPNRaft, Peer{Roles: []string{RoleGrantor}})},
		{name: "server with the wrong name", server: raftFrom(g1), client: g2.ClientConfig(ALPNRaft, Peer{Roles: []string{RoleGrantor}, Name: "g3"})},
		{name: "sidecar cannot serve", server: side.ServerConfig(ALPNgRPC, Peer{}), client: g1.ClientConfig(ALPNgRPC, Peer{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			serr, cerr, cs := handshake(t, tc.server, tc.client)
			if tc.ok {
				if serr != nil || cerr != nil {
					t.Fatalf("handshake failed: server %v, client %v", serr, cerr)
				}
				if cs.Version != tls.VersionTLS13 {
					t.Errorf("version %x, want TLS 1.3", cs.Version)
				}
				id, err := PeerIdentity(cs)
				if err != nil || id != tc.wantPeer {
					t.Errorf("peer %v, %v; want %v", id, err, tc.wantPeer)
				}
				return
			}
			if serr == nil && cerr == nil {
				t.Fatal("handshake succeeded, want it refused")
			}
		})
	}
}

func TestReload(t *testing.T) {
	dir := newCA(t)
	f := newFiles(t, dir, RoleGrantor, "g1")
	c := newConfigurator(t, f)
	before := c.Expiries()[0].NotAfter
	if _, _, err := CreateCert(dir, CertRequest{Identity: Identity{RoleGrantor, "g1"}, Validity: 24 * time.Hour, Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	after := c.Expiries()[0].NotAfter
	if !after.Before(before) {
		t.Errorf("not after %v after the reload, want the new certificate's (earlier than %v)", after, before)
	}

	// A new CA with its own certificate, written over the files: both
	// change together, so the reload takes them.
	other := newCA(t)
	nf := newFiles(t, other, RoleGrantor, "g1")
	peer := newConfigurator(t, newFiles(t, dir, RoleGrantor, "g2"))
	if _, cerr, _ := handshake(t, c.ServerConfig(ALPNRaft, Peer{}), peer.ClientConfig(ALPNRaft, Peer{})); cerr != nil {
		t.Fatalf("handshake before the CA change: %v", cerr)
	}
	for _, p := range [][2]string{{nf.CA, f.CA}, {nf.Cert, f.Cert}, {nf.Key, f.Key}} {
		b, _ := os.ReadFile(p[0])
		if err := os.WriteFile(p[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	if serr, cerr, _ := handshake(t, c.ServerConfig(ALPNRaft, Peer{}), peer.ClientConfig(ALPNRaft, Peer{})); serr == nil && cerr == nil {
		t.Error("a peer of the old CA is still accepted after reloading a new CA")
	}

	// A broken file: the reload fails and what was loaded stays.
	if err := os.WriteFile(f.Cert, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Reload(); err == nil {
		t.Fatal("reload of a garbage certificate succeeded")
	}
	if c.Identity() != (Identity{RoleGrantor, "g1"}) {
		t.Errorf("identity after a failed reload: %v", c.Identity())
	}
}

func TestNewConfiguratorRefuses(t *testing.T) {
	dir := newCA(t)
	other := newCA(t)
	f := newFiles(t, dir, RoleSidecar, "h1")
	of := newFiles(t, other, RoleSidecar, "h2")
	for _, tc := range []struct {
		name  string
		files Files
		want  string
	}{
		{name: "missing key flag", files: Files{CA: f.CA, Cert: f.Cert}, want: "--tls-key"},
		{name: "key of another certificate", files: Files{CA: f.CA, Cert: f.Cert, Key: of.Key}, want: "private key does not match"},
		{name: "certificate of another CA", files: Files{CA: f.CA, Cert: of.Cert, Key: of.Key}, want: "not valid under the CA"},
		{name: "CA file holds a leaf", files: Files{CA: f.Cert, Cert: f.Cert, Key: f.Key}, want: "not a CA"},
		{name: "no such file", files: Files{CA: f.CA + ".x", Cert: f.Cert, Key: f.Key}, want: "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewConfigurator(tc.files)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// A certificate that ends within ExpiryWarning is logged (an error once
// it has ended), one further off is not; the collector exports the
// seconds left of the certificate and of the CA.
func TestExpiryLogAndMetric(t *testing.T) {
	dir := newCA(t)
	cert, key, err := CreateCert(dir, CertRequest{Identity: Identity{RoleSidecar, "h1"}, Validity: 10 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c := newConfigurator(t, Files{CA: filepath.Join(dir, CAFile), Cert: cert, Key: key})
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	c.LogExpiries(log, time.Now())
	if out := buf.String(); !strings.Contains(out, "expires soon") || !strings.Contains(out, "what=cert") || strings.Contains(out, "what=ca") {
		t.Errorf("log at 10 days left:\n%s", out)
	}
	buf.Reset()
	c.LogExpiries(log, time.Now().Add(11*24*time.Hour))
	if out := buf.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "has expired") {
		t.Errorf("log after the end:\n%s", out)
	}
	buf.Reset()
	c.LogExpiries(log, time.Now().Add(-30*24*time.Hour))
	if buf.Len() != 0 {
		t.Errorf("log at 40 days left: %s", buf.String())
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c.Collector("test"))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "what" {
					got[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	if d := got["cert"] - (10 * 24 * time.Hour).Seconds(); d > 60 || d < -60 {
		t.Errorf("cert expiry gauge %v, want about 10 days", got["cert"])
	}
	if got["ca"] < (4 * 365 * 24 * time.Hour).Seconds() {
		t.Errorf("CA expiry gauge %v, want about 5 years", got["ca"])
	}
}
