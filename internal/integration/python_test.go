package integration

import (
	"context"
	"os"
	"os/exec"
	"testing"
)

// The Python client's own tests, run against a real `leaseside dev`, and
// leaseside_fence's unit tests.
func TestPythonClient(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is needed (make deps installs it)")
	}
	socket := tempSocket(t)
	startDev(t, socket, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "python3", "-m", "unittest", "-v", "test_leaseside", "test_leaseside_fence")
	cmd.Dir = "../../clients/python"
	cmd.Env = append(os.Environ(), "LEASESIDE_SOCKET="+socket, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("python3 -m unittest:\n%s", out)
	if err != nil {
		t.Fatalf("Python client tests failed: %v", err)
	}
}
