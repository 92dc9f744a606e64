package ipc

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// victim is the uid of the user whose per-user socket is at stake: not
// the test's (root), not nobody's.
const victim = 4242

// clientDirs returns a per-user socket path for the victim in a fresh
// directory (the victim's, 0700) and a system daemon's listener, which
// systemSocket points at for the test; warnings go to the returned
// builder.
func clientDirs(t *testing.T) (user string, system *net.UnixListener, warned *strings.Builder) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give directories and a server to other users")
	}
	base := t.TempDir()
	os.Chmod(base, 0o755)
	dir := filepath.Join(base, "leaseside-4242")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, victim, victim); err != nil {
		t.Fatal(err)
	}
	sysPath := filepath.Join(base, "system.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sysPath, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	oldSys, oldOut := systemSocket, warnOut
	warned = &strings.Builder{}
	systemSocket, warnOut = sysPath, warned
	t.Cleanup(func() { systemSocket, warnOut = oldSys, oldOut })
	return filepath.Join(dir, "leaseside.sock"), ln, warned
}

// serveAs listens on path as a process of uid (python3, a real other
// process: SO_PEERCRED names whoever called listen). The socket is bound
// here, as root, so that its directory need not be writable by uid.
func serveAs(t *testing.T, path string, uid int) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "server")
	defer f.Close()
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", "-c", "import socket,sys\ns=socket.socket(fileno=3)\ns.listen(8)\nprint('ready',flush=True)\nsys.stdin.read()")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	cmd.ExtraFiles = []*os.File{f}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the server as uid %d did not start: %q %v", uid, line, err)
	}
}

// acceptedOn waits for a connection to arrive at ln.
func acceptedOn(t *testing.T, ln *net.UnixListener) {
	t.Helper()
	ln.SetDeadline(time.Now().Add(10 * time.Second))
	c, err := ln.Accept()
	if err != nil {
		t.Fatalf("nothing reached the system daemon's socket: %v", err)
	}
	c.Close()
}

// A per-user socket in a directory another user could have put it in
// (review R8-6: a squatted /tmp/leaseside-UID) is not used: the client
// picks the system daemon's socket and says why.
func TestClientRefusesUntrustedUserDir(t *testing.T) {
	for _, tt := range []struct {
		name string
		prep func(dir string) error
		want string
	}{
		{"another user's", func(dir string) error { return os.Chown(dir, nobody, nobody) }, "belongs to uid 65534"},
		{"writable by others", func(dir string) error { return os.Chmod(dir, 0o777) }, "writable by its group or others"},
		{"writable by its group", func(dir string) error { return os.Chmod(dir, 0o770) }, "writable by its group or others"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			user, _, _ := clientDirs(t)
			serveAs(t, user, nobody)
			if err := tt.prep(filepath.Dir(user)); err != nil {
				t.Fatal(err)
			}
			path, why, distrust := pickSocket(victim, user)
			if path != systemSocket || !strings.Contains(distrust, tt.want) || !strings.Contains(why, tt.want) {
				t.Fatalf("pickSocket: %s (%s; distrust %q); want the system socket, saying %q", path, why, distrust, tt.want)
			}
		})
	}
}

// A per-user socket in the caller's own directory is used when the daemon
// on it runs as the caller or root; one that runs as another uid is
// refused after connecting (SO_PEERCRED), with a warning, and the client
// dials the system daemon instead.
func TestClientChecksUserSocketServer(t *testing.T) {
	t.Run("another uid's server", func(t *testing.T) {
		user, sys, warned := clientDirs(t)
		serveAs(t, user, nobody)
		if path, _, distrust := pickSocket(victim, user); path != user || distrust != "" {
			t.Fatalf("pickSocket: %s (distrust %q); want the victim's own directory trusted", path, distrust)
		}
		c, err := dialUser(context.Background(), user, victim)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if got := c.RemoteAddr().String(); got != systemSocket {
			t.Fatalf("dialed %s; want the system socket %s", got, systemSocket)
		}
		acceptedOn(t, sys)
		if !strings.Contains(warned.String(), "runs as uid 65534") {
			t.Fatalf("warning %q; want it to name the server's uid", warned.String())
		}
	})
	for _, uid := range []int{victim, 0} {
		t.Run("server of uid "+map[int]string{victim: "victim", 0: "root"}[uid], func(t *testing.T) {
			user, _, warned := clientDirs(t)
			serveAs(t, user, uid)
			c, err := dialUser(context.Background(), user, victim)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got := c.RemoteAddr().String(); got != user || warned.Len() != 0 {
				t.Fatalf("dialed %s (warned %q); want the per-user socket %s, no warning", got, warned.String(), user)
			}
		})
	}
}

// A Client reports the socket it is connected to, for its children: the
// one given, here.
func TestClientSocketPath(t *testing.T) {
	_, sys, _ := clientDirs(t)
	c := &Client{Socket: systemSocket}
	defer c.Close()
	if _, err := c.connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	acceptedOn(t, sys)
	if got := c.SocketPath(); got != systemSocket {
		t.Fatalf("SocketPath %q, want %q", got, systemSocket)
	}
}
