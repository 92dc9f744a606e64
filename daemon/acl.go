package daemon

import (
	"fmt"
	"strings"

	"github.com/leaseside/leaseside/ipc"
)

// ACL decides which callers may use which lease names. An empty ACL allows
// every caller that can open the socket (whose mode and group are the
// first line of defence). Root may use every name.
type ACL []ACLRule

// ACLRule lets the listed users and groups use names under Prefixes.
type ACLRule struct {
	// UIDs and GIDs the rule applies to; a caller matches by its uid, its
	// primary gid or any supplementary group.
	UIDs []int `json:"uids,omitempty"`
	GIDs []int `json:"gids,omitempty"`
	// Prefixes of lease names the rule allows; "" allows every name.
	Prefixes []string `json:"prefixes"`
}

// allow returns a permission_denied error unless cred may use name.
func (a ACL) allow(cred ipc.Cred, name string) *ipc.Error {
	if len(a) == 0 || cred.UID == 0 {
		return nil
	}
	groups := append([]int{cred.GID}, cred.Groups...)
	for _, r := range a {
		if !r.matchesName(name) {
			continue
		}
		for _, u := range r.UIDs {
			if u == cred.UID {
				return nil
			}
		}
		for _, g := range r.GIDs {
			for _, have := range groups {
				if g == have {
					return nil
				}
			}
		}
	}
	return ipc.Errorf(ipc.CodePermissionDenied, "uid %d may not use lease %q", cred.UID, name)
}

// grants reports whether a rule of a non-empty ACL names cred for name
// (root aside: an empty ACL grants nobody anything in particular).
func (a ACL) grants(cred ipc.Cred, name string) bool {
	return len(a) > 0 && a.allow(cred, name) == nil
}

func (r ACLRule) matchesName(name string) bool {
	for _, p := range r.Prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Validate reports an ACL rule that can never match.
func (a ACL) Validate() error {
	for i, r := range a {
		if len(r.UIDs) == 0 && len(r.GIDs) == 0 {
			return fmt.Errorf("daemon: acl rule %d names no uid or gid", i)
		}
		if len(r.Prefixes) == 0 {
			return fmt.Errorf("daemon: acl rule %d names no prefix (use \"\" for all names)", i)
		}
	}
	return nil
}
