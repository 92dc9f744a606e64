package grantor

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

// A second node on a data dir in use fails at once, naming the dir and
// the pid that holds it; once the first is stopped the dir can be used.
func TestNewRefusesDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	first := start(t, fastConfig(t, dir), true)

	cfg := fastConfig(t, dir)
	n, err := New(cfg)
	if err == nil {
		n.Shutdown()
		t.Fatal("a second node started on a data dir in use")
	}
	var inUse *DataDirInUseError
	if !errors.As(err, &inUse) || !errors.Is(err, ErrDataDirInUse) {
		t.Fatalf("second New: %v, want a DataDirInUseError", err)
	}
	if inUse.Dir != dir || inUse.PID != os.Getpid() {
		t.Fatalf("error names dir %q pid %d, want %q pid %d", inUse.Dir, inUse.PID, dir, os.Getpid())
	}
	if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("message %q does not name the dir and the pid", msg)
	}

	first.stop()
	again := start(t, fastConfig(t, dir), true)
	again.stop()
}
