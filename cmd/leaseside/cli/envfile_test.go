package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leaseside/leaseside/ipc"
)

// The file `acquire --env-file` writes reads back, through sh's ".", as
// the values it was given (quoted where they need it), with mode 0600.
func TestEnvFileReadsBackInSh(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "leader-billing.env")
	socket := filepath.Join(dir, `odd "dir" $HOME`, "s.sock")
	g := &ipc.Grant{Token: "42", DeadlineBoottimeNs: 123456789}
	if err := writeEnvFile(path, grantEnv("leader/billing", g, socket)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != envFileMode {
		t.Errorf("mode %v, want %v", fi.Mode(), os.FileMode(envFileMode))
	}
	out, err := exec.Command("sh", "-c", `. "$1" && printf '%s|%s|%s|%s' "$LEASESIDE_LEASE" "$LEASESIDE_TOKEN" "$LEASESIDE_DEADLINE_BOOTTIME_NS" "$LEASESIDE_SOCKET"`, "sh", path).CombinedOutput()
	if err != nil {
		t.Fatalf("sh: %v: %s", err, out)
	}
	if want := "leader/billing|42|123456789|" + socket; string(out) != want {
		t.Errorf("read back %q, want %q", out, want)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the directory holds %d entries, want the env file alone (no temporary file left)", len(ents))
	}
}

// A symlink at the path is replaced, never written through; a symlinked
// directory is refused; a value with a newline is refused.
func TestEnvFileFollowsNoSymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "lease.env")
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	vars := [][2]string{{EnvToken, "7"}}
	if err := writeEnvFile(path, vars); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep\n" {
		t.Errorf("the symlink's target was written: %q", b)
	}
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("path is not a regular file now: %v %v", fi, err)
	}

	linked := filepath.Join(dir, "linked")
	if err := os.Symlink(t.TempDir(), linked); err != nil {
		t.Fatal(err)
	}
	err := writeEnvFile(filepath.Join(linked, "lease.env"), vars)
	if err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("a symlinked directory: %v, want a refusal naming the symlink", err)
	}
	err = writeEnvFile(filepath.Join(dir, "nl.env"), [][2]string{{EnvSocket, "a\nb"}})
	if err == nil || !strings.Contains(err.Error(), "newline") {
		t.Errorf("a value with a newline: %v, want a refusal", err)
	}
}
