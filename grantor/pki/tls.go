package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Files names the PEM files a node's TLS is made of. All three are given,
// or none (TLS off).
type Files struct {
	// CA holds the cluster CA's certificate; during a CA rotation, the
	// old and the new one, one after the other.
	CA string
	// Cert is this node's certificate, signed by the CA.
	Cert string
	// Key is Cert's private key (mode 0600).
	Key string
}

// Enabled reports whether any file is named.
func (f Files) Enabled() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }

// Validate reports an error unless all three files are named, or none.
// The message names the flags (--tls-ca, --tls-cert, --tls-key) missing.
func (f Files) Validate() error {
	if !f.Enabled() {
		return nil
	}
	var missing []string
	for _, s := range []struct{ v, flag string }{{f.CA, "--tls-ca"}, {f.Cert, "--tls-cert"}, {f.Key, "--tls-key"}} {
		if s.v == "" {
			missing = append(missing, s.flag)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("pki: TLS needs --tls-ca, --tls-cert and --tls-key together; missing %v", missing)
	}
	return nil
}

// ALPN protocol names: a raft connection and a gRPC one cannot be taken
// for each other, whatever port they reach.
const (
	// ALPNgRPC is HTTP/2, as gRPC requires.
	ALPNgRPC = "h2"
	// ALPNRaft names leaseside's raft transport.
	ALPNRaft = "leaseside-raft/1"
	// ALPNSeed names a grantor's proof that it is the process at its
	// gossip address (served on the gossip port; grantor/seed_proof.go).
	ALPNSeed = "leaseside-seed/1"
)

// Configurator holds a node's CA pool, certificate and key, and builds
// every TLS configuration of the node from them. Reload swaps them
// atomically. Its methods are safe for concurrent use.
type Configurator struct {
	files Files
	cur   atomic.Pointer[material]
}

// material is one reading of the files.
type material struct {
	pool *x509.CertPool
	cas  []*x509.Certificate
	cert tls.Certificate // Leaf set
	id   Identity
}

// NewConfigurator reads f and checks that the certificate carries an
// identity, belongs to the key and is signed by the CA.
func NewConfigurator(f Files) (*Configurator, error) {
	if !f.Enabled() {
		return nil, errors.New("pki: no TLS files given")
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	c := &Configurator{files: f}
	m, err := load(f)
	if err != nil {
		return nil, err
	}
	c.cur.Store(m)
	return c, nil
}

// Reload re-reads the files. On any error it keeps what it had and
// returns the error; a node's TLS never ends up half replaced. New
// handshakes use what it read; connections already up are not touched.
func (c *Configurator) Reload() error {
	m, err := load(c.files)
	if err != nil {
		return err
	}
	c.cur.Store(m)
	return nil
}

// Identity returns the identity in this node's certificate.
func (c *Configurator) Identity() Identity { return c.cur.Load().id }

// Files returns the files c reads.
func (c *Configurator) Files() Files { return c.files }

func load(f Files) (*material, error) {
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("pki: reading the CA: %w", err)
	}
	cas, err := parseCerts(caPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: CA file %s: %w", f.CA, err)
	}
	pool := x509.NewCertPool()
	for _, ca := range cas {
		if !ca.IsCA {
			return nil, fmt.Errorf("pki: CA file %s holds a certificate that is not a CA (%s)", f.CA, ca.Subject)
		}
		pool.AddCert(ca)
	}
	certPEM, err := os.ReadFile(f.Cert)
	if err != nil {
		return nil, fmt.Errorf("pki: reading the certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(f.Key)
	if err != nil {
		return nil, fmt.Errorf("pki: reading the key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: certificate %s and key %s: %w", f.Cert, f.Key, err)
	}
	leaf := cert.Leaf
	id, err := IdentityOf(leaf)
	if err != nil {
		return nil, fmt.Errorf("pki: certificate %s: %w", f.Cert, err)
	}
	usage := x509.ExtKeyUsageClientAuth
	if id.Role == RoleGrantor {
		usage = x509.ExtKeyUsageServerAuth
	}
	if err := verify(pool, leaf, cert.Certificate[1:], usage); err != nil {
		return nil, fmt.Errorf("pki: certificate %s is not valid under the CA in %s: %w", f.Cert, f.CA, err)
	}
	return &material{pool: pool, cas: cas, cert: cert, id: id}, nil
}

// verify checks leaf's chain to the pool, for usage, now.
func verify(pool *x509.CertPool, leaf *x509.Certificate, rest [][]byte, usage x509.ExtKeyUsage) error {
	inter := x509.NewCertPool()
	for _, der := range rest {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return err
		}
		inter.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

// Peer says which peers a TLS link accepts: a certificate from the CA
// with one of Roles (any role when empty) and, when Name is set, that
// name.
type Peer struct {
	Roles []string
	Name  string
	// Names, when not empty, are globs (path.Match) one of which the
	// peer's name must match.
	Names []string
}

// check reports whether id is acceptable.
func (p Peer) check(id Identity) error {
	if len(p.Roles) > 0 && !slices.Contains(p.Roles, id.Role) {
		return fmt.Errorf("pki: peer %s: a %s certificate is needed here", id, joinOr(p.Roles))
	}
	if p.Name != "" && id.Name != p.Name {
		return fmt.Errorf("pki: peer %s: expected %s/%s", id, id.Role, p.Name)
	}
	if len(p.Names) > 0 && !slices.ContainsFunc(p.Names, func(g string) bool { ok, _ := path.Match(g, id.Name); return ok }) {
		return fmt.Errorf("pki: peer %s: its name matches none of %s, the names taken here", id, strings.Join(p.Names, ", "))
	}
	return nil
}

func joinOr(roles []string) string {
	switch len(roles) {
	case 1:
		return roles[0]
	case 2:
		return roles[0] + " or " + roles[1]
	}
	return fmt.Sprint(roles)
}

// ServerConfig returns the configuration of a listener that speaks alpn:
// TLS 1.3, a client certificate from the CA required, and refused unless
// it carries an identity that want accepts. The certificate, key and CA
// are those current at each handshake.
func (c *Configurator) ServerConfig(alpn string, want Peer) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{alpn},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := c.cur.Load()
			return &tls.Config{
				MinVersion:                  tls.VersionTLS13,
				NextProtos:                  []string{alpn},
				DynamicRecordSizingDisabled: true,
				Certificates:                []tls.Certificate{m.cert},
				ClientAuth:                  tls.RequireAndVerifyClientCert,
				ClientCAs:                   m.pool,
				VerifyConnection: func(cs tls.ConnectionState) error {
					_, err := peerIdentity(cs, want)
					return err
				},
			}, nil
		},
	}
}

// ClientConfig returns the configuration of a dialer that speaks alpn:
// TLS 1.3, this node's certificate presented, and the server refused
// unless its certificate chains to the CA, may serve, and carries an
// identity that want accepts.
func (c *Configurator) ClientConfig(alpn string, want Peer) *tls.Config {
	return &tls.Config{
		MinVersion:                  tls.VersionTLS13,
		NextProtos:                  []string{alpn},
		DynamicRecordSizingDisabled: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			m := c.cur.Load()
			return &m.cert, nil
		},
		// The host name is not what identifies a leaseside peer (see the
		// package doc): VerifyConnection verifies the chain against the
		// current CA instead, and the identity in it.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("pki: the server presented no certificate")
			}
			if err := verify(c.cur.Load().pool, cs.PeerCertificates[0], rawCerts(cs.PeerCertificates[1:]), x509.ExtKeyUsageServerAuth); err != nil {
				return fmt.Errorf("pki: the server's certificate: %w", err)
			}
			id, err := IdentityOf(cs.PeerCertificates[0])
			if err != nil {
				return err
			}
			return want.check(id)
		},
	}
}

func rawCerts(cs []*x509.Certificate) [][]byte {
	out := make([][]byte, len(cs))
	for i, c := range cs {
		out[i] = c.Raw
	}
	return out
}

// PeerIdentity returns the identity of the verified peer of a server-side
// connection made with ServerConfig.
func PeerIdentity(cs tls.ConnectionState) (Identity, error) { return peerIdentity(cs, Peer{}) }

func peerIdentity(cs tls.ConnectionState, want Peer) (Identity, error) {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return Identity{}, errors.New("pki: the peer presented no verified certificate")
	}
	id, err := IdentityOf(cs.VerifiedChains[0][0])
	if err != nil {
		return Identity{}, err
	}
	return id, want.check(id)
}

// Expiry is when one certificate a Configurator holds ends.
type Expiry struct {
	// What is "cert" (this node's) or "ca".
	What string
	// Subject is the certificate's common name.
	Subject  string
	NotAfter time.Time
}

// ExpiryWarning is how close to its end a certificate is logged at every
// start and reload.
const ExpiryWarning = 30 * 24 * time.Hour

// Expiries lists this node's certificate and every CA certificate, with
// when each ends.
func (c *Configurator) Expiries() []Expiry {
	m := c.cur.Load()
	out := []Expiry{{What: "cert", Subject: m.cert.Leaf.Subject.CommonName, NotAfter: m.cert.Leaf.NotAfter}}
	for _, ca := range m.cas {
		out = append(out, Expiry{What: "ca", Subject: ca.Subject.CommonName, NotAfter: ca.NotAfter})
	}
	return out
}
