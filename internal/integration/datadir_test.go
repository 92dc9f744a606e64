package integration

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A second `leaseside dev` on a data dir that a running one holds fails
// at once with exit 1, naming the data dir and the pid that holds it,
// instead of hanging on the raft log's lock. (The timeout only turns a
// hang into a failure.)
func TestSecondDevOnDataDirInUseFails(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	first := startDev(t, tempSocket(t), data)

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "dev", "--socket", tempSocket(t), "--data-dir", data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("second dev on the same data dir: %v, want exit 1\n%s", err, stderr.String())
	}
	msg := stderr.String()
	for _, want := range []string{filepath.Join(data, "grantor"), "in use", "pid " + strconv.Itoa(first.cmd.Process.Pid)} {
		if !strings.Contains(msg, want) {
			t.Fatalf("second dev's error does not say %q:\n%s", want, msg)
		}
	}
	// The first one still serves.
	cli(t, first.socket, "status").must(t, 0)
	first.stop(t)
}

// runFails runs the leaseside binary with args, which must exit 1 with a
// message naming each of want, and returns its stderr.
func runFails(t *testing.T, want []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("leaseside %s: %v, want exit 1\n%s", strings.Join(args, " "), err, stderr.String())
	}
	for _, w := range want {
		if !strings.Contains(stderr.String(), w) {
			t.Fatalf("leaseside %s does not say %q:\n%s", args[0], w, stderr.String())
		}
	}
	return stderr.String()
}

// A grantor whose data dir holds grantor.lock as a symbolic link to a
// file of root's, and `leaseside dev` on a data dir another user owns,
// refuse to start (exit 1), naming the path, and the file the link
// points to keeps its bytes (issue 21: the lock file was truncated and
// written through the link before any check).
func TestDataDirAnotherUserControlsIsRefused(t *testing.T) {
	t.Parallel()
	const secret = "root's own file\n"
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	lock := filepath.Join(data, "grantor.lock")
	if err := os.Symlink(victim, lock); err != nil {
		t.Fatal(err)
	}
	runFails(t, []string{lock + " is a symbolic link", "unsafe data dir"}, "grantor", "--node-id", "g1", "--data-dir", data,
		"--rpc-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0")
	if b, err := os.ReadFile(victim); err != nil || string(b) != secret {
		t.Fatalf("the file the lock file links to holds %q (%v), want %q", b, err, secret)
	}

	other := t.TempDir()
	if err := os.Chown(other, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	runFails(t, []string{other + " belongs to uid 65534", "--data-dir"}, "dev", "--socket", tempSocket(t), "--data-dir", other)
	if _, err := os.Stat(filepath.Join(other, "grantor")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dev made its grantor's dir in the other user's data dir (%v)", err)
	}
}
