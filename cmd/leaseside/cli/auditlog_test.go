package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leaseside/leaseside/internal/safefs"
)

// --audit-log is opened without following a symbolic link, at start and
// when SIGHUP opens it again after logrotate: a link put in its place
// (another user's, in a directory they may write) is refused, the file
// it points to keeps its bytes, and on a reopen the grantor keeps
// writing to the file it had (issue 21).
func TestAuditLogIsNotFollowedThroughALink(t *testing.T) {
	const secret = "root's own file\n"
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	if _, err := openLogFile(path); !errors.Is(err, safefs.ErrUnsafe) || !strings.Contains(err.Error(), path+" is a symbolic link") {
		t.Fatalf("openLogFile on a link: %v, want a refusal naming it", err)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	l, err := openLogFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rotated := path + ".1"
	if err := os.Rename(path, rotated); err != nil { // logrotate
		t.Fatal(err)
	}
	if err := os.Symlink(victim, path); err != nil { // and someone's link
		t.Fatal(err)
	}
	if err := l.Reopen(); !errors.Is(err, safefs.ErrUnsafe) {
		t.Fatalf("Reopen onto a link: %v, want a refusal", err)
	}
	if _, err := l.Write([]byte("line\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != secret {
		t.Fatalf("the linked file holds %q", b)
	}
	if b, _ := os.ReadFile(rotated); string(b) != "line\n" {
		t.Fatalf("the file open before holds %q, want the line written after the refused reopen", b)
	}
}
