package integration

import (
	"bytes"
	"context"
	"errors"
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
