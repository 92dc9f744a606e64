package grantor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"syscall"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// Name rules per identity (Consul's ACL key prefixes, etcd's RBAC): which
// lease names each caller identity may take and which it may read. A
// rules file has one rule a line, words separated by blanks, # to the end
// of a line a comment:
//
//	IDENTITY  ACCESS  PREFIX...
//	web-*       acquire  web/ jobs/web-
//	web-*       read     shared/
//	operator/*  acquire  *
//
// IDENTITY is a glob (path.Match: * ? [...]) over the caller as the
// grantors name it: a sidecar by its certificate's name (web-1), any other
// role as ROLE/NAME (operator/alice, grantor/g1; "insecure" without TLS).
// A * does not match a /, so "*" is every sidecar and "*/*" every other
// identity. ACCESS is "acquire" (Acquire, and so elections and
// semaphores, and Proclaim; it includes read) or "read" (Watch and
// CheckToken). Each PREFIX is the start of the names the rule covers
// ("web/" covers "web/a" and "web/b/c"), "*" every name.
//
// A rule "IDENTITY join", with no prefix, lets the leader add a grantor
// whose grantor/ID the glob matches to the raft configuration when gossip
// tells of it (reconcile), and bootstrap-expect count it: with rules in
// force, a grantor certificate that no join rule names does not become a
// member, though its holder has the gossip key (every sidecar started
// with --join has it). Servers already in the configuration stay until
// removed.
//
// A caller may do what any rule that matches it allows; with rules in
// force, what none allows is refused with PERMISSION_DENIED and a
// grantorpb.NameNotAllowed detail (a Watch gets a DENIED event for the
// name instead). Without rules every identity may use every name.
// Release and KeepAlive are not checked: they act only on the caller's
// own sessions and grants, and giving a name up must work whatever the
// rules became since it was taken; rules loaded later do not end grants
// already made.

// NameAccess is what a name rule allows.
type NameAccess uint8

// The accesses, each including those before it.
const (
	// AccessNone is no access; no rule gives it.
	AccessNone NameAccess = iota
	// AccessRead allows Watch and CheckToken.
	AccessRead
	// AccessAcquire allows Acquire and Proclaim, and what AccessRead does.
	AccessAcquire
)

// String spells the access as a rules file does.
func (a NameAccess) String() string {
	switch a {
	case AccessRead:
		return "read"
	case AccessAcquire:
		return "acquire"
	}
	return "none"
}

// NameRules are the name rules in force. A nil *NameRules allows
// everything. Parse a file with LoadNameRules or ParseNameRules.
type NameRules struct {
	source string
	rules  []nameRule
}

// nameRule is one line of a rules file.
type nameRule struct {
	identity string // a glob
	access   NameAccess
	prefixes []string // "" is every name
	join     bool     // a join rule: access AccessNone, no prefixes
}

// ErrBadNameRules is returned by ParseNameRules and LoadNameRules for a
// rules file that cannot be used; the message names the line.
var ErrBadNameRules = errors.New("grantor: bad name rules")

// LoadNameRules reads the rules file at path. A file another user could
// change (not this process's user's or root's, or writable by its group
// or others) is refused: whoever may write it decides who may take every
// name.
func LoadNameRules(path string) (*NameRules, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadNameRules, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadNameRules, err)
	}
	uid := int(fi.Sys().(*syscall.Stat_t).Uid)
	switch {
	case uid != os.Geteuid() && uid != 0:
		return nil, fmt.Errorf("%w: %s belongs to uid %d, neither this process's (%d) nor root's: that user could give any identity any name",
			ErrBadNameRules, path, uid, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return nil, fmt.Errorf("%w: %s is writable by its group or by others (mode %#o), who could give any identity any name: make it 0644 or 0600",
			ErrBadNameRules, path, fi.Mode().Perm())
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadNameRules, err)
	}
	return ParseNameRules(path, b)
}

// ParseNameRules parses a rules file's contents; source names it in
// errors. A file with no rule refuses every name to everyone.
func ParseNameRules(source string, b []byte) (*NameRules, error) {
	r := &NameRules{source: source}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		words := strings.Fields(text)
		if len(words) == 0 {
			continue
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: %s:%d: %s", ErrBadNameRules, source, line, fmt.Sprintf(format, args...))
		}
		if len(words) == 2 && words[1] == "join" {
			if _, err := path.Match(words[0], ""); err != nil {
				return nil, bad("identity %q is not a valid glob: %v", words[0], err)
			}
			r.rules = append(r.rules, nameRule{identity: words[0], join: true})
			continue
		}
		if len(words) < 3 {
			return nil, bad("want IDENTITY ACCESS PREFIX... or IDENTITY join, got %d words", len(words))
		}
		rule := nameRule{identity: words[0]}
		if _, err := path.Match(rule.identity, ""); err != nil {
			return nil, bad("identity %q is not a valid glob: %v", rule.identity, err)
		}
		switch words[1] {
		case "acquire":
			rule.access = AccessAcquire
		case "read":
			rule.access = AccessRead
		case "join":
			return nil, bad("a join rule takes no prefix: IDENTITY join")
		default:
			return nil, bad("access %q: want acquire, read or join", words[1])
		}
		for _, p := range words[2:] {
			if p == "*" {
				rule.prefixes = append(rule.prefixes, "")
				continue
			}
			if err := validNamePrefix(p); err != nil {
				return nil, bad("prefix %q: %v", p, err)
			}
			rule.prefixes = append(rule.prefixes, p)
		}
		r.rules = append(r.rules, rule)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadNameRules, source, err)
	}
	return r, nil
}

// validNamePrefix checks a rule's prefix: the start of a lease name, so
// only bytes a lease name may have, and no longer than one.
func validNamePrefix(p string) error {
	if len(p) > maxLeaseName {
		return fmt.Errorf("%d bytes, longer than a lease name may be (%d)", len(p), maxLeaseName)
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/') {
			return fmt.Errorf("byte %q at %d: a lease name has only A-Z a-z 0-9 . _ - / (* alone is every name)", c, i)
		}
	}
	return nil
}

// Len is how many rules there are.
func (r *NameRules) Len() int { return len(r.rules) }

// Source names where the rules came from.
func (r *NameRules) Source() string { return r.source }

// allows reports whether identity (as Identity.owner spells it) may have
// access to lease.
func (r *NameRules) allows(identity, lease string, access NameAccess) bool {
	if r == nil {
		return true
	}
	for _, rule := range r.rules {
		if rule.access < access {
			continue
		}
		if ok, _ := path.Match(rule.identity, identity); !ok {
			continue
		}
		for _, p := range rule.prefixes {
			if strings.HasPrefix(lease, p) {
				return true
			}
		}
	}
	return false
}

// admitsGrantor reports whether a join rule lets grantor id become a
// server of the raft configuration (nil rules: every grantor
// certificate may).
func (r *NameRules) admitsGrantor(id string) bool {
	if r == nil {
		return true
	}
	for _, rule := range r.rules {
		if ok, _ := path.Match(rule.identity, Identity{Role: RoleGrantor, Name: id}.owner()); ok && rule.join {
			return true
		}
	}
	return false
}

// joinRules counts the join rules.
func (r *NameRules) joinRules() int {
	n := 0
	for _, rule := range r.rules {
		if rule.join {
			n++
		}
	}
	return n
}

// SetNameRules puts r in force for every call from now on (nil: every
// identity may use every name) and logs what is in force. Calls already
// past their check, and grants already made, are not affected.
func (n *Node) SetNameRules(r *NameRules) {
	n.nameRules.Store(r)
	if r == nil {
		n.log.Info("name rules: none given (--name-rules): every identity may acquire, watch and check every name, and every grantor certificate may join the raft configuration through gossip")
		return
	}
	n.log.Info("name rules in force: identities may use only the names their rules give them, and only grantors a join rule names join the raft configuration",
		"file", r.Source(), "rules", r.Len(), "join_rules", r.joinRules())
}

// nameScopes lists, for each RPC of the Grantor service, the access the
// name rules must give the caller to the name the request names
// (AccessNone: not checked). Unary calls are checked by the interceptor
// (unaryAuth), before the handler; Watch checks every name added to the
// stream. A method missing here is refused to every caller, and
// TestEveryRPCHasANameScope fails until it is added.
var nameScopes = map[string]NameAccess{
	grantorpb.Grantor_Acquire_FullMethodName:       AccessAcquire,
	grantorpb.Grantor_AcquireShared_FullMethodName: AccessAcquire,
	grantorpb.Grantor_Proclaim_FullMethodName:      AccessAcquire,
	grantorpb.Grantor_CheckToken_FullMethodName:    AccessRead,
	grantorpb.Grantor_Watch_FullMethodName:         AccessRead, // each name added (service_prims.go)
	grantorpb.Grantor_Release_FullMethodName:       AccessNone, // the caller's own grants only
	grantorpb.Grantor_KeepAlive_FullMethodName:     AccessNone, // the caller's own sessions only
	grantorpb.Grantor_Members_FullMethodName:       AccessNone,
	grantorpb.Grantor_RemoveServer_FullMethodName:  AccessNone,
	grantorpb.Grantor_Leave_FullMethodName:         AccessNone,
	grantorpb.Grantor_RegisterNode_FullMethodName:  AccessNone,
	grantorpb.Grantor_Leases_FullMethodName:        AccessNone, // each name listed is checked for read (leases.go)
	grantorpb.Grantor_Revoke_FullMethodName:        AccessAcquire,
}

// leaseRequest is a request that names one lease.
type leaseRequest interface{ GetLease() string }

// checkNames refuses a unary call whose request names a lease the
// caller's rules do not give it the method's access to.
func (n *Node) checkNames(ctx context.Context, method string, req any) error {
	access, known := nameScopes[method]
	if !known {
		return status.Errorf(codes.PermissionDenied, "grantor: %s has no name scope", method)
	}
	if access == AccessNone {
		return nil
	}
	r, ok := req.(leaseRequest)
	if !ok {
		return status.Errorf(codes.PermissionDenied, "grantor: %s names no lease to check the name rules with", method)
	}
	return n.allowName(IdentityFrom(ctx), r.GetLease(), access)
}

// allowName refuses id access to lease unless the rules in force give
// it: PERMISSION_DENIED with a NameNotAllowed detail.
func (n *Node) allowName(id Identity, lease string, access NameAccess) error {
	r := n.nameRules.Load()
	who := id.owner()
	if r.allows(who, lease, access) {
		return nil
	}
	n.metrics.refusedCall(id.Role)
	n.metrics.nameRefused[access].Add(1)
	msg := fmt.Sprintf("grantor: the grantors' name rules do not let %s %s %q", who, access, lease)
	st, err := status.New(codes.PermissionDenied, msg).WithDetails(&grantorpb.NameNotAllowed{Lease: lease, Identity: who, Access: access.String()})
	if err != nil {
		return status.Error(codes.PermissionDenied, msg)
	}
	return st.Err()
}

// joinAllowed reports whether the join rules let grantor id, which
// gossip tells of at raftAddr, become a server of the raft configuration
// (reconcile) or of the one bootstrap-expect makes; a refusal is logged
// at most once per claim every claimWarnEvery (warnClaim) and audited
// summed up (audit.refusedClaim), as a probe's is.
func (n *Node) joinAllowed(id, raftAddr string) bool {
	if n.nameRules.Load().admitsGrantor(id) {
		return true
	}
	n.warnClaim(id, raftAddr, "no join rule of the name rules names it", "rule_wanted", "grantor/"+id+" join")
	n.audit.refusedClaim(raftAddr, fmt.Sprintf("gossip member claims grantor %q: no join rule names it", id))
	return false
}
