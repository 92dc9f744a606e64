package gossip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"

	"github.com/hashicorp/memberlist"
)

// Roles a member can gossip. A role this build does not know is listed by
// Members but never taken for a grantor.
const (
	// RoleGrantor is a grantor node: a raft voter or non-voter that serves
	// the gRPC contract.
	RoleGrantor = "grantor"
	// RoleSidecar is a leaseside daemon on a host; it joins gossip only to
	// find the grantors.
	RoleSidecar = "sidecar"
)

// metaVersion1 is the first encoding of Meta. Versions are append-only:
// never reuse or renumber one (see the package doc).
const metaVersion1 byte = 1

// Flag bits of byte 1 of the encoding. ONLY APPEND TO THIS LIST.
const (
	flagVoter   byte = 1 << 0
	flagLeaving byte = 1 << 1
)

// Meta is what a member gossips about itself. It travels in memberlist's
// node metadata and must encode to at most memberlist.MetaMaxSize bytes.
type Meta struct {
	// Role is RoleGrantor or RoleSidecar.
	Role string
	// NodeID is a grantor's raft server ID; required for grantors.
	NodeID string
	// RPCAddr is a grantor's gRPC address (host:port); required for
	// grantors.
	RPCAddr string
	// RaftAddr is a grantor's raft transport address (host:port); required
	// for grantors.
	RaftAddr string
	// Voter tells whether a grantor is (or is to be) a raft voter. Only
	// voters count for WaitVoters.
	Voter bool
	// LeaderID is the raft server ID of the leader this grantor knows of;
	// its own NodeID when it leads, "" when it knows none. Grantors only.
	LeaderID string
	// Version is the member's leaseside version, for humans.
	Version string
	// Instance tells this run of the member from the runs before and
	// after it under the same name: Start draws it at random and SetMeta
	// keeps it (what a caller puts here is replaced). 0 from a build that
	// does not gossip it.
	Instance uint64
}

// Validate reports whether m is a well-formed Meta for its role and fits
// memberlist's metadata limit.
func (m Meta) Validate() error {
	switch m.Role {
	case RoleGrantor:
		if m.NodeID == "" {
			return errors.New("gossip: a grantor's meta needs its raft NodeID")
		}
		for _, a := range []struct{ name, addr string }{{"RPCAddr", m.RPCAddr}, {"RaftAddr", m.RaftAddr}} {
			if a.addr == "" {
				return fmt.Errorf("gossip: a grantor's meta needs its %s", a.name)
			}
			if _, _, err := net.SplitHostPort(a.addr); err != nil {
				return fmt.Errorf("gossip: meta %s %q: %w", a.name, a.addr, err)
			}
		}
	case RoleSidecar:
		if m.Voter || m.LeaderID != "" {
			return errors.New("gossip: Voter and LeaderID are for grantors; a sidecar's meta must leave them unset")
		}
	default:
		return fmt.Errorf("gossip: meta role %q: want %q or %q", m.Role, RoleGrantor, RoleSidecar)
	}
	widest := m
	widest.Instance = math.MaxUint64 // Start draws it; measure the longest
	if n := len(encodeMeta(widest, true)); n > memberlist.MetaMaxSize {
		return fmt.Errorf("gossip: meta encodes to %d bytes, more than memberlist's limit of %d: %w",
			n, memberlist.MetaMaxSize, ErrMetaTooLarge)
	}
	return nil
}

// encodeMeta encodes m in the current version, with the leaving flag.
func encodeMeta(m Meta, leaving bool) []byte {
	var flags byte
	if m.Voter {
		flags |= flagVoter
	}
	if leaving {
		flags |= flagLeaving
	}
	b := []byte{metaVersion1, flags}
	for _, s := range []string{m.Role, m.NodeID, m.RPCAddr, m.RaftAddr, m.LeaderID, m.Version} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return binary.AppendUvarint(b, m.Instance)
}

// decodeMeta decodes node metadata. It returns an error wrapping
// ErrMetaVersion for an encoding version it does not know, and one wrapping
// ErrMetaMalformed for bytes it cannot parse.
func decodeMeta(b []byte) (m Meta, leaving bool, err error) {
	if len(b) == 0 {
		return Meta{}, false, fmt.Errorf("gossip: empty metadata (not a leaseside member?): %w", ErrMetaMalformed)
	}
	if b[0] != metaVersion1 {
		return Meta{}, false, fmt.Errorf("gossip: metadata encoding version %d, this build reads %d: %w", b[0], metaVersion1, ErrMetaVersion)
	}
	if len(b) < 2 {
		return Meta{}, false, fmt.Errorf("gossip: metadata has no flags byte: %w", ErrMetaMalformed)
	}
	flags := b[1]
	rest := b[2:]
	fields := []*string{&m.Role, &m.NodeID, &m.RPCAddr, &m.RaftAddr, &m.LeaderID, &m.Version}
	for i, f := range fields {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return Meta{}, false, fmt.Errorf("gossip: metadata field %d truncated: %w", i, ErrMetaMalformed)
		}
		*f = string(rest[k : k+int(n)])
		rest = rest[k+int(n):]
	}
	// Instance, absent from a build that does not gossip it.
	if len(rest) > 0 {
		n, k := binary.Uvarint(rest)
		if k <= 0 {
			return Meta{}, false, fmt.Errorf("gossip: metadata instance truncated: %w", ErrMetaMalformed)
		}
		m.Instance = n
	}
	// Bytes left over are fields of a later build: ignored (append-only).
	m.Voter = flags&flagVoter != 0
	return m, flags&flagLeaving != 0, nil
}
