package pki

import (
	"errors"
	"net"

	"google.golang.org/grpc/credentials"
)

// AuthInfo is what ServerCredentials hands gRPC for each connection: the
// TLS state and the identity read from the peer's verified certificate,
// once per connection.
type AuthInfo struct {
	credentials.TLSInfo
	Identity Identity
}

// ServerCredentials returns gRPC transport credentials for a grantor's
// server: ServerConfig(ALPNgRPC) accepting any role (which calls a role
// may make is the server's authorisation, per call). The peer's identity
// reaches handlers as an AuthInfo in the peer of the call's context.
func (c *Configurator) ServerCredentials() credentials.TransportCredentials {
	return serverCreds{credentials.NewTLS(c.ServerConfig(ALPNgRPC, Peer{}))}
}

type serverCreds struct {
	credentials.TransportCredentials
}

func (s serverCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := s.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return nil, nil, err
	}
	ti, ok := info.(credentials.TLSInfo)
	if !ok { // grpc's TLS credentials always give TLSInfo
		conn.Close()
		return nil, nil, errUnexpectedAuth
	}
	id, err := PeerIdentity(ti.State)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, AuthInfo{TLSInfo: ti, Identity: id}, nil
}

func (s serverCreds) Clone() credentials.TransportCredentials {
	return serverCreds{s.TransportCredentials.Clone()}
}

var errUnexpectedAuth = errors.New("pki: unexpected gRPC auth info")

// ClientCredentials returns gRPC transport credentials for dialing a
// grantor: ClientConfig(ALPNgRPC) wanting a grantor certificate.
func (c *Configurator) ClientCredentials() credentials.TransportCredentials {
	return c.GrantorCredentials(nil)
}

// GrantorCredentials is ClientCredentials taking only a grantor whose
// certificate's name matches one of names (globs, path.Match; none: any
// name). A sidecar that finds its grantors by gossip, where whoever has
// the key can claim to be one, gives the names of its cluster's grantors:
// a grantor certificate of another name is then no grantor to it.
func (c *Configurator) GrantorCredentials(names []string) credentials.TransportCredentials {
	return credentials.NewTLS(c.ClientConfig(ALPNgRPC, Peer{Roles: []string{RoleGrantor}, Names: names}))
}
