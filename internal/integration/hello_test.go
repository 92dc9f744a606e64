package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// helloEnv, set to a socket path, makes this test binary a client that
// prints the daemon's hello reply and exits (TestMain).
const helloEnv = "LEASESIDE_IT_HELLO_SOCKET"

// helloChild sends hello on socket and prints the reply line: the raw
// protocol, as any local program speaks it.
func helloChild(socket string) int {
	c, err := net.Dial("unix", socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	if _, err := io.WriteString(c, `{"id":1,"op":"hello"}`+"\n"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Print(line)
	return 0
}

// hello runs helloChild as uid (a copy of this binary that uid may run)
// and returns the reply's fields.
func hello(t *testing.T, self, socket string, uid int) map[string]any {
	t.Helper()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), helloEnv+"="+socket)
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hello as uid %d: %v", uid, err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("hello reply %q: %v", out, err)
	}
	return m
}

// A local caller other than root (or the daemon's own uid) is told no
// grantor session id in hello: whoever knew it could act under the
// sidecar's session wherever the owning identity is not checked. Root
// still sees it.
func TestHelloHidesTheSessionFromOtherUsers(t *testing.T) {
	t.Parallel()
	const nobody = 65534
	dir, err := os.MkdirTemp("", "lshello")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	self := filepath.Join(dir, "client")
	if err := os.WriteFile(self, b, 0o755); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "s.sock")
	startDev(t, socket, t.TempDir(), "--socket-group", strconv.Itoa(nobody))

	root := hello(t, self, socket, 0)
	if s, _ := root["session"].(string); s == "" {
		t.Fatalf("root's hello has no session: %v", root)
	}
	other := hello(t, self, socket, nobody)
	if other["server"] != "leaseside" || other["ok"] != true {
		t.Fatalf("uid %d's hello: %v", nobody, other)
	}
	if s, ok := other["session"]; ok {
		t.Fatalf("uid %d's hello names the session %v", nobody, s)
	}
}
