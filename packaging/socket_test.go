package packaging

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The environment of the test binary run as the socket binder (TestMain):
// it chroots to bindRootEnv, binds and listens on the Unix socket
// bindPathEnv there, gives it bindOwnerEnv (uid:gid) and bindModeEnv
// (octal), and sends the listening socket over fd 3 (SCM_RIGHTS). The
// socket then has its path in the box as its address, as one systemd
// made would.
const (
	bindRootEnv  = "LEASESIDE_TEST_BIND_ROOT"
	bindPathEnv  = "LEASESIDE_TEST_BIND_PATH"
	bindOwnerEnv = "LEASESIDE_TEST_BIND_OWNER"
	bindModeEnv  = "LEASESIDE_TEST_BIND_MODE"
)

// socketKeys are the [Socket] settings the mock does what systemd would
// with; any other fails the test.
var socketKeys = []string{"ListenStream", "SocketUser", "SocketGroup", "SocketMode", "DirectoryMode", "Service"}

// bindSocket is the socket binder's work (in a process of its own: it
// chroots).
func bindSocket() error {
	if err := syscall.Chroot(os.Getenv(bindRootEnv)); err != nil {
		return err
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	path := os.Getenv(bindPathEnv)
	var uid, gid int
	if _, err := fmt.Sscanf(os.Getenv(bindOwnerEnv), "%d:%d", &uid, &gid); err != nil {
		return fmt.Errorf("%s: %w", bindOwnerEnv, err)
	}
	mode, err := strconv.ParseUint(os.Getenv(bindModeEnv), 8, 32)
	if err != nil {
		return fmt.Errorf("%s: %w", bindModeEnv, err)
	}
	os.Remove(path) // systemd too replaces a stale socket file
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return err
	}
	l.SetUnlinkOnClose(false)
	if err := os.Chown(path, uid, gid); err != nil {
		return err
	}
	if err := os.Chmod(path, os.FileMode(mode)); err != nil {
		return err
	}
	f, err := l.File()
	if err != nil {
		return err
	}
	c, err := net.FileConn(os.NewFile(3, "the test's end"))
	if err != nil {
		return err
	}
	_, _, err = c.(*net.UnixConn).WriteMsgUnix([]byte{0}, syscall.UnixRights(int(f.Fd())), nil)
	return err
}

// listen makes the listening socket of the installed socket unit name in
// the box as systemd would, and returns it; t's cleanup closes it.
func (b *box) listen(t *testing.T, name string) *os.File {
	t.Helper()
	u := b.readSection(t, name, "[Socket]", socketKeys)
	path := u.get("ListenStream", "")
	if !strings.HasPrefix(path, "/") || len(u.settings["ListenStream"]) != 1 {
		t.Fatalf("%s: ListenStream=%q: the mock takes one socket path", name, u.settings["ListenStream"])
	}
	if user := u.get("SocketUser", "root"); user != "root" {
		t.Fatalf("%s: SocketUser=%s: the mock takes root only", name, user)
	}
	gid := "0"
	if g := u.get("SocketGroup", ""); g != "" {
		gid = b.gid(t, g)
	}
	if dir := filepath.Dir(path); !b.exists(dir) {
		b.run(t, "install", "-d", "-m", u.get("DirectoryMode", "0755"), dir)
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "binder"), os.NewFile(uintptr(fds[1]), "binder")
	defer ours.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// In the box's mount namespace but not yet its root: the test binary
	// is on the host's file system.
	cmd := exec.Command("nsenter", "-t", strconv.Itoa(b.holder.Process.Pid), "--mount", "--", exe)
	cmd.Env = []string{bindRootEnv + "=" + b.root, bindPathEnv + "=" + path, bindOwnerEnv + "=0:" + gid,
		bindModeEnv + "=" + u.get("SocketMode", "0666")}
	cmd.ExtraFiles = []*os.File{theirs}
	out, err := cmd.CombinedOutput()
	theirs.Close()
	if err != nil {
		t.Fatalf("binding %s for %s: %v\n%s", path, name, err, out)
	}
	c, err := net.FileConn(ours)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	oob := make([]byte, syscall.CmsgSpace(4))
	_, oobn, _, _, err := c.(*net.UnixConn).ReadMsgUnix(make([]byte, 1), oob)
	if err != nil {
		t.Fatalf("receiving %s's socket: %v", name, err)
	}
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receiving %s's socket: %v (%d messages)", name, err, len(msgs))
	}
	got, err := syscall.ParseUnixRights(&msgs[0])
	if err != nil || len(got) != 1 {
		t.Fatalf("receiving %s's socket: %v (%d fds)", name, err, len(got))
	}
	f := os.NewFile(uintptr(got[0]), path)
	t.Cleanup(func() { f.Close() })
	return f
}

// checkServes fails t unless process pid holds the socket f (so serves
// the socket systemd passed it, not one of its own).
func checkServes(t *testing.T, pid int, f *os.File) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("socket:[%d]", st.Ino)
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if l, _ := os.Readlink(filepath.Join(dir, e.Name())); l == want {
			return
		}
	}
	t.Fatalf("process %d does not hold the socket unit's socket (%s): it serves one of its own", pid, want)
}
