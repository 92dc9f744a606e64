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

// The audit log's directory is checked as a data dir is: a directory
// another user controls could be swapped, at logrotate's reopen, for a
// link to a directory where root has a file of the log's name, which the
// grantor would then append to (O_NOFOLLOW guards only the last name).
// Here the log is in logs/, a link in shared/, which uid 65534 owns: at
// start the grantor refuses it, and an open log whose directory becomes
// that is not reopened there (the victim keeps its bytes).
func TestAuditLogDirNobodyElseControls(t *testing.T) {
	const secret = "root's own audit.log\n"
	base := t.TempDir()
	victimDir := filepath.Join(base, "victim")
	if err := os.Mkdir(victimDir, 0o700); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(victimDir, "audit.log")
	if err := os.WriteFile(victim, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(base, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(base, "mine")
	if err := os.Mkdir(mine, 0o700); err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(shared, "logs")
	if err := os.Symlink(mine, logs); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(logs, "audit.log")
	l, err := openLogFile(path) // shared is this user's still
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Chown(shared, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := openLogFile(path); !errors.Is(err, safefs.ErrUnsafe) || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Fatalf("openLogFile in a directory uid 65534 controls: %v, want a refusal naming it", err)
	}
	// What uid 65534 can do in its directory: rotate the log away and
	// point logs at the victim's directory.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(logs); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victimDir, logs); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); !errors.Is(err, safefs.ErrUnsafe) {
		t.Fatalf("Reopen through uid 65534's directory: %v, want a refusal", err)
	}
	if _, err := l.Write([]byte("line\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != secret {
		t.Fatalf("the victim holds %q", b)
	}
}
