package integration

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

// A host whose CLOCK_BOOTTIME is behind CLOCK_MONOTONIC (a badly set time
// namespace) would hand out wrong deadlines: `leaseside dev` refuses to
// start there, at once, and says why.
func TestDevRefusesBoottimeBehindMonotonic(t *testing.T) {
	t.Parallel()
	if out, err := exec.Command("unshare", "--time", "--fork", "true").CombinedOutput(); err != nil {
		t.Skipf("unshare --time unavailable: %v: %s", err, out)
	}
	// Put MONOTONIC an hour ahead of BOOTTIME inside the namespace; add
	// what the host has slept so far, which BOOTTIME already leads by.
	slept := clockwatch.System.Now().Sub(clockwatch.System.Monotonic())
	ahead := strconv.FormatInt(int64((time.Hour+slept).Seconds())+1, 10)

	socket, data := tempSocket(t), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--time", "--fork", "--monotonic", ahead,
		bin, "dev", "--socket", socket, "--data-dir", data)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("leaseside dev still running after %v in a namespace with BOOTTIME behind MONOTONIC\nstderr: %s", timeout, stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("leaseside dev with BOOTTIME behind MONOTONIC: %v, want a non-zero exit\nstderr: %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "CLOCK_BOOTTIME") {
		t.Errorf("stderr does not name CLOCK_BOOTTIME: %q", stderr.String())
	}
	if strings.Contains(stderr.String(), "leaseside dev ready") {
		t.Errorf("leaseside dev said it was ready before refusing: %q", stderr.String())
	}
	if _, err := os.Stat(socket); err == nil {
		t.Errorf("leaseside dev created its socket %s before refusing", socket)
	}
	t.Logf("refused in %v, exit %d: %s", time.Since(start).Round(time.Millisecond), ee.ExitCode(), strings.TrimSpace(stderr.String()))
}
