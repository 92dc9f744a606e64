package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// File names in a certificate directory.
const (
	// CAFile is the CA's certificate (or a bundle of CA certificates,
	// while a CA is being replaced): public, given to every node.
	CAFile = "ca.pem"
	// CAKeyFile is the CA's private key: it stays where certificates are
	// made, never on a node.
	CAKeyFile = "ca-key.pem"
)

// Validity defaults, as Consul's `tls ca create` and `tls cert create`.
const (
	DefaultCAValidity   = 5 * 365 * 24 * time.Hour
	DefaultCertValidity = 365 * 24 * time.Hour
	// backdate makes a new certificate valid a little before it was
	// made, for hosts whose clocks lag the one that made it.
	backdate = time.Hour
)

// CertFile and KeyFile return the names CreateCert gives the certificate
// and key of id: ROLE-NAME.pem and ROLE-NAME-key.pem.
func CertFile(id Identity) string { return id.Role + "-" + id.Name + ".pem" }

// KeyFile returns the name of id's key file; see CertFile.
func KeyFile(id Identity) string { return id.Role + "-" + id.Name + "-key.pem" }

// ErrExists is returned when a file CreateCA or CreateCert would write is
// already there and overwriting was not asked for.
var ErrExists = errors.New("pki: file exists")

// CreateCA makes a new cluster CA in dir (created 0700 if missing):
// dir/ca.pem and dir/ca-key.pem (0600). It refuses to overwrite either.
func CreateCA(dir string, validity time.Duration) error {
	if validity <= 0 {
		validity = DefaultCAValidity
	}
	certPath, keyPath := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	for _, p := range []string{certPath, keyPath} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%w: %s (a cluster has one CA: keep it, or make a new one in another directory)", ErrExists, p)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := newSerial()
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "leaseside CA " + serial.Text(16)[:8], Organization: []string{"leaseside"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("pki: making the CA certificate: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := writeKey(keyPath, key, false); err != nil {
		return err
	}
	return writeFile(certPath, pemBlock("CERTIFICATE", der), 0o644, false)
}

// CertRequest describes a certificate for CreateCert.
type CertRequest struct {
	// Identity is the role and name the certificate carries.
	Identity Identity
	// IPs and DNSNames are added as SANs for other tools; leaseside
	// itself identifies peers by Identity alone.
	IPs      []net.IP
	DNSNames []string
	// Validity is how long the certificate is valid; 0 means
	// DefaultCertValidity. It may not outlast the CA.
	Validity time.Duration
	// Overwrite replaces an existing certificate and key of the same
	// identity (a renewal); the files are replaced atomically, so a node
	// that reloads meanwhile reads the old pair or the new one.
	Overwrite bool
}

// CreateCert makes a key and a certificate for req.Identity, signed by
// the CA in dir, and writes them to dir/ROLE-NAME.pem and
// dir/ROLE-NAME-key.pem (0600). It returns their paths.
func CreateCert(dir string, req CertRequest) (certPath, keyPath string, err error) {
	if err := req.Identity.Validate(); err != nil {
		return "", "", err
	}
	if req.Validity <= 0 {
		req.Validity = DefaultCertValidity
	}
	caCert, caKey, err := loadCA(dir)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	notAfter := now.Add(req.Validity)
	if notAfter.After(caCert.NotAfter) {
		return "", "", fmt.Errorf("pki: the certificate would outlast the CA, which expires %s: ask for fewer days (or make a new CA)",
			caCert.NotAfter.UTC().Format(time.DateOnly))
	}
	certPath = filepath.Join(dir, CertFile(req.Identity))
	keyPath = filepath.Join(dir, KeyFile(req.Identity))
	if !req.Overwrite {
		for _, p := range []string{certPath, keyPath} {
			if _, err := os.Lstat(p); err == nil {
				return "", "", fmt.Errorf("%w: %s (renewing? ask to overwrite)", ErrExists, p)
			}
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := newSerial()
	if err != nil {
		return "", "", err
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if req.Identity.Role == RoleGrantor {
		// Grantors also serve: gRPC and raft.
		usage = append(usage, x509.ExtKeyUsageServerAuth)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:   req.Identity.Name + "." + req.Identity.Role + ".leaseside",
			Organization: []string{"leaseside"},
		},
		NotBefore:   now.Add(-backdate),
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: usage,
		URIs:        []*url.URL{req.Identity.URI()},
		IPAddresses: req.IPs,
		DNSNames:    req.DNSNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", "", fmt.Errorf("pki: signing the certificate: %w", err)
	}
	if err := writeKey(keyPath, key, req.Overwrite); err != nil {
		return "", "", err
	}
	if err := writeFile(certPath, pemBlock("CERTIFICATE", der), 0o644, req.Overwrite); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

// loadCA reads the CA certificate (the first in ca.pem) and its key.
func loadCA(dir string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, nil, fmt.Errorf("pki: reading the CA (make one with `leaseside tls ca create`): %w", err)
	}
	certs, err := parseCerts(certPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: %s: %w", filepath.Join(dir, CAFile), err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("pki: reading the CA key: %w", err)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: %s: %w", filepath.Join(dir, CAKeyFile), err)
	}
	ca := certs[0]
	if !ca.IsCA {
		return nil, nil, fmt.Errorf("pki: the first certificate of %s is not a CA", filepath.Join(dir, CAFile))
	}
	if !publicKeysEqual(ca.PublicKey, key.Public()) {
		return nil, nil, fmt.Errorf("pki: %s does not belong to the first certificate of %s", CAKeyFile, CAFile)
	}
	return ca, key, nil
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func writeKey(path string, key *ecdsa.PrivateKey, overwrite bool) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writeFile(path, pemBlock("PRIVATE KEY", der), 0o600, overwrite)
}

// writeFile writes data to path with mode, through a temporary file in
// the same directory renamed into place: a reader sees the old file or
// the new one, whole. Without overwrite it fails if path exists.
func writeFile(path string, data []byte, mode os.FileMode, overwrite bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename, there is nothing there
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if overwrite {
		return os.Rename(tmp.Name(), path)
	}
	// Link fails if path exists: no check-then-write race.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%w: %s", ErrExists, path)
		}
		return err
	}
	return nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ea, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ea.Equal(b)
}

// parseCerts reads every CERTIFICATE block of a PEM file; anything else
// in it, or none, is an error.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := bytes.TrimSpace(data); len(rest) > 0; rest = bytes.TrimSpace(rest) {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, errors.New("not PEM (or trailing bytes after the last block)")
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("a %q block where certificates were expected", b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no certificate in it")
	}
	return out, nil
}

// parseKey reads one private key block (PKCS#8 or SEC 1 EC).
func parseKey(data []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, errors.New("not PEM")
	}
	var k any
	var err error
	switch b.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(b.Bytes)
	default:
		return nil, fmt.Errorf("a %q block where a private key was expected", b.Type)
	}
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported key type %T", k)
	}
	return s, nil
}
