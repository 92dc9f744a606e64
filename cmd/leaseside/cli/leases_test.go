package cli

import (
	"strings"
	"testing"
)

// revoke's command-line mistakes are usage errors (exit 2) that say what
// is missing, before any grantor is asked.
func TestRevokeUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"revoke", "jobs/a"}, "revoke needs --grantors and an operator's certificate"},
		{[]string{"revoke", "jobs/a", "--grantors", "127.0.0.1:1", "--token", "0"}, "--token 0: tokens start at 1"},
		{[]string{"revoke", "--grantors", "127.0.0.1:1"}, "NAME"},
		{[]string{"revoke", "jobs//a", "--grantors", "127.0.0.1:1"}, "empty segment"},
		{[]string{"leases", "extra"}, "leases"},
	} {
		_, stderr, code := runMain(tt.args...)
		if code != ExitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d saying %q", tt.args, code, stderr, ExitUsage, tt.want)
		}
	}
}
