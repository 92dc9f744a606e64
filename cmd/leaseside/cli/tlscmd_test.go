package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCertCreateUnknownGroupWritesNothing: `tls cert create --group G` on a
// host without group G is a usage error naming the group, and leaves no
// certificate behind, so the same command works once the group is fixed
// (no --force needed).
func TestCertCreateUnknownGroupWritesNothing(t *testing.T) {
	dir := t.TempDir()
	if _, stderr, code := runMain("tls", "ca", "create", "--dir", dir); code != 0 {
		t.Fatalf("tls ca create: exit %d: %s", code, stderr)
	}
	_, stderr, code := runMain("tls", "cert", "create", "--dir", dir, "--grantor", "g1", "--group", "no-such-group-leaseside")
	if code != 2 || !strings.Contains(stderr, "--group no-such-group-leaseside: no such group on this host") {
		t.Fatalf("unknown group: exit %d, stderr %q; want exit 2 naming the group", code, stderr)
	}
	for _, f := range []string{"grantor-g1.pem", "grantor-g1-key.pem"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("%s after a refused --group: stat err %v, want it absent", f, err)
		}
	}
	if _, stderr, code := runMain("tls", "cert", "create", "--dir", dir, "--grantor", "g1"); code != 0 {
		t.Fatalf("the same certificate without --group: exit %d: %s", code, stderr)
	}
}
