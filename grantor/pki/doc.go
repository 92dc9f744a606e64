// Package pki is the cluster's public key infrastructure: one certificate
// authority per cluster, certificates that name a role and a name, and the
// TLS configurations every leaseside link uses (docs/design.md section 6).
//
// # Identities
//
// A certificate's identity is one URI SAN, leaseside://ROLE/NAME, where
// ROLE is grantor, sidecar or operator and NAME is the grantor's raft node
// ID, the sidecar's host name or the operator's name. The common name and
// the IP and DNS SANs are not identities: they are there for other tools
// (openssl, curl). Keys are ECDSA P-256; certificates are made with the
// standard library's crypto/x509 (CreateCA, CreateCert).
//
// # TLS
//
// A Configurator holds the CA pool, this process's certificate and key,
// read from three PEM files, and builds every TLS configuration from them:
// TLS 1.3 only, the peer's certificate always required and verified
// against the CA, and the peer's role (and, for raft, its name) checked
// in the handshake. Reload re-reads the files (SIGHUP); connections made
// afterwards use the new ones, connections already up keep theirs. No
// listener or dialer of leaseside builds a tls.Config of its own.
//
// The server's host name is not verified: what a peer may do follows from
// the role and name its certificate carries, and from nothing else, as
// Consul's verify_server_hostname checks a role name rather than a host.
package pki
