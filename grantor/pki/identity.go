package pki

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
)

// Role names, as they are spelled in a certificate's URI SAN.
const (
	RoleGrantor  = "grantor"
	RoleSidecar  = "sidecar"
	RoleOperator = "operator"
)

// uriScheme is the scheme of the identity URI SAN.
const uriScheme = "leaseside"

// validName reports whether s may be a NAME: it is a path segment of the
// URI, a file name (ROLE-NAME.pem) and, for a grantor, its raft node ID.
// That is 1 to 128 bytes of [A-Za-z0-9._-], the first [A-Za-z0-9]. It is
// checked by hand: the regular expression of it, compiled at package init,
// was 2% of the CPU of every leaseside client command's start (issue 25
// item 5).
func validName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// ErrNoIdentity is returned for a certificate that carries no valid
// leaseside identity.
var ErrNoIdentity = errors.New("pki: the certificate carries no leaseside identity (URI SAN leaseside://ROLE/NAME)")

// Identity is what a certificate says its holder is.
type Identity struct {
	// Role is RoleGrantor, RoleSidecar or RoleOperator.
	Role string
	// Name names the holder within its role.
	Name string
}

// String returns ROLE/NAME.
func (id Identity) String() string { return id.Role + "/" + id.Name }

// URI returns the identity's URI SAN, leaseside://ROLE/NAME.
func (id Identity) URI() *url.URL {
	return &url.URL{Scheme: uriScheme, Host: id.Role, Path: "/" + id.Name}
}

// Validate reports whether id names a known role and a valid name.
func (id Identity) Validate() error {
	switch id.Role {
	case RoleGrantor, RoleSidecar, RoleOperator:
	default:
		return fmt.Errorf("pki: unknown role %q (want grantor, sidecar or operator)", id.Role)
	}
	if !validName(id.Name) {
		return fmt.Errorf("pki: name %q: it must be 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", id.Name)
	}
	return nil
}

// IdentityOf reads the identity of a certificate: exactly one URI SAN with
// the leaseside scheme, naming a known role and a valid name. It does not
// verify the certificate; a Configurator does that first.
func IdentityOf(cert *x509.Certificate) (Identity, error) {
	var found []Identity
	for _, u := range cert.URIs {
		if u.Scheme != uriScheme {
			continue
		}
		id := Identity{Role: u.Host}
		if len(u.Path) > 1 {
			id.Name = u.Path[1:]
		}
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || id.Validate() != nil {
			return Identity{}, fmt.Errorf("%w: malformed %q", ErrNoIdentity, u.String())
		}
		found = append(found, id)
	}
	switch len(found) {
	case 0:
		return Identity{}, ErrNoIdentity
	case 1:
		return found[0], nil
	}
	return Identity{}, fmt.Errorf("%w: it has %d of them", ErrNoIdentity, len(found))
}
