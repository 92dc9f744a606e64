package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// These tests pass real sockets to a re-executed test binary as fd 3, the
// way systemd does (and go-systemd's own activation tests do): LISTEN_FDS
// counts them and LISTEN_PID names the child, which `sh -c 'LISTEN_PID=$$
// exec "$@"'` learns before it execs the binary under its own pid.

// activationChildEnv tells a re-executed test binary to act as the child
// of these tests (see TestActivationChild) and how.
const activationChildEnv = "LEASESIDE_TEST_ACTIVATION_CHILD"

// activationTimeout bounds every wait on an event here; generous, since the
// machine is shared and slow at times. Passing tests never reach it.
const activationTimeout = 60 * time.Second

// probeResult is what a "probe" child reports on stdout.
type probeResult struct {
	OK      bool   `json:"ok"`
	Err     string `json:"err,omitempty"`
	Addr    string `json:"addr,omitempty"`
	Network string `json:"network,omitempty"`
	// Env is what LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES hold after
	// the call: they must be gone, so children of the daemon do not
	// take its socket for theirs.
	Env string `json:"env"`
}

// TestActivationChild is not a test of its own: it is the child side of
// the tests below, and returns at once unless they started it.
//
//	probe: call activatedListener and print a probeResult as JSON.
//	cli:   run the leaseside command line given after "--".
func TestActivationChild(t *testing.T) {
	switch os.Getenv(activationChildEnv) {
	case "":
		return
	case "probe":
		ln, ok, err := activatedListener()
		r := probeResult{OK: ok, Env: os.Getenv("LISTEN_PID") + os.Getenv("LISTEN_FDS") + os.Getenv("LISTEN_FDNAMES")}
		if err != nil {
			r.Err = err.Error()
		}
		if ln != nil {
			r.Addr, r.Network = ln.Addr().String(), ln.Addr().Network()
			ln.Close()
		}
		json.NewEncoder(os.Stdout).Encode(r)
		os.Exit(0)
	case "cli":
		os.Exit(Main(flag.Args(), os.Stdout, os.Stderr))
	default:
		fmt.Fprintf(os.Stderr, "unknown %s\n", activationChildEnv)
		os.Exit(2)
	}
}

// activatedChild returns a command that re-executes this test binary as
// a child in mode, with files as fds 3, 4, ... and LISTEN_FDS and
// LISTEN_PID set as systemd sets them. A pid other than 0 is put in
// LISTEN_PID as it is, instead of the child's own.
func activatedChild(t *testing.T, mode string, pid int, files []*os.File, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := append([]string{self, "-test.run=^TestActivationChild$", "--"}, args...)
	var cmd *exec.Cmd
	if pid == 0 {
		cmd = exec.Command("sh", append([]string{"-c", `LISTEN_PID=$$ exec "$@"`, "sh"}, child...)...)
	} else {
		cmd = exec.Command(child[0], child[1:]...)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LISTEN_") && !strings.HasPrefix(kv, activationChildEnv+"=") && !strings.HasPrefix(kv, "GORACE=") {
			env = append(env, kv)
		}
	}
	names := make([]string, len(files))
	for i := range files {
		names[i] = "leaseside.socket"
	}
	env = append(env, activationChildEnv+"="+mode, fmt.Sprintf("LISTEN_FDS=%d", len(files)), "LISTEN_FDNAMES="+strings.Join(names, ":"),
		// A -race binary otherwise lingers 1s at exit.
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	if pid != 0 {
		env = append(env, fmt.Sprintf("LISTEN_PID=%d", pid))
	}
	cmd.Env = env
	cmd.ExtraFiles = files
	return cmd
}

// socketFile returns a dup of ln's socket as a file to pass to a child,
// closing ln itself without unlinking a Unix socket's path: the child is
// to serve it, as a systemd-activated daemon serves systemd's socket.
func socketFile(t *testing.T, ln interface {
	File() (*os.File, error)
	Close() error
}) *os.File {
	t.Helper()
	f, err := ln.File()
	if err != nil {
		t.Fatal(err)
	}
	if ul, ok := ln.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(false)
	}
	ln.Close()
	t.Cleanup(func() { f.Close() })
	return f
}

func TestActivatedListenerNotActivated(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
	}{
		{name: "no LISTEN_FDS", env: map[string]string{}},
		{name: "LISTEN_PID names another process", env: map[string]string{"LISTEN_PID": "1", "LISTEN_FDS": "1"}},
		{name: "LISTEN_PID not a number", env: map[string]string{"LISTEN_PID": "me", "LISTEN_FDS": "1"}},
		{name: "no fds", env: map[string]string{"LISTEN_PID": fmt.Sprint(os.Getpid()), "LISTEN_FDS": "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
				t.Setenv(k, tt.env[k])
				if _, ok := tt.env[k]; !ok {
					os.Unsetenv(k)
				}
			}
			ln, ok, err := activatedListener()
			if ln != nil || ok || err != nil {
				t.Fatalf("activatedListener() = %v, %v, %v; want nil, false, nil", ln, ok, err)
			}
			for _, k := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
				if v, set := os.LookupEnv(k); set {
					t.Errorf("%s=%q left in the environment", k, v)
				}
			}
		})
	}
}

func TestActivatedListener(t *testing.T) {
	dir := t.TempDir()
	var n int
	sockPath := func() string { n++; return filepath.Join(dir, fmt.Sprintf("%d.sock", n)) }
	unixListener := func(t *testing.T, network string) (*os.File, string) {
		path := sockPath()
		ln, err := net.ListenUnix(network, &net.UnixAddr{Name: path, Net: network})
		if err != nil {
			t.Fatal(err)
		}
		return socketFile(t, ln), path
	}
	tests := []struct {
		name string
		// files returns what to pass and the address the child should
		// report, if any.
		files   func(t *testing.T) ([]*os.File, string)
		pid     int // LISTEN_PID as it is; 0 for the child's own pid
		wantOK  bool
		wantErr string
	}{
		{
			name:   "unix stream listener",
			files:  func(t *testing.T) ([]*os.File, string) { f, p := unixListener(t, "unix"); return []*os.File{f}, p },
			wantOK: true,
		},
		{
			name:  "LISTEN_PID names another process",
			files: func(t *testing.T) ([]*os.File, string) { f, _ := unixListener(t, "unix"); return []*os.File{f}, "" },
			pid:   1,
		},
		{
			name: "two sockets",
			files: func(t *testing.T) ([]*os.File, string) {
				f1, _ := unixListener(t, "unix")
				f2, _ := unixListener(t, "unix")
				return []*os.File{f1, f2}, ""
			},
			wantErr: "systemd passed 2 sockets",
		},
		{
			name: "seqpacket listener",
			files: func(t *testing.T) ([]*os.File, string) {
				f, _ := unixListener(t, "unixpacket")
				return []*os.File{f}, ""
			},
			wantErr: "is a unixpacket socket, not a Unix stream socket",
		},
		{
			name: "tcp listener",
			files: func(t *testing.T) ([]*os.File, string) {
				ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
				if err != nil {
					t.Fatal(err)
				}
				return []*os.File{socketFile(t, ln)}, ""
			},
			wantErr: "is a tcp socket, not a Unix stream socket",
		},
		{
			name: "datagram socket",
			files: func(t *testing.T) ([]*os.File, string) {
				path := sockPath()
				c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
				if err != nil {
					t.Fatal(err)
				}
				f, err := c.File()
				if err != nil {
					t.Fatal(err)
				}
				c.Close()
				t.Cleanup(func() { f.Close() })
				return []*os.File{f}, ""
			},
			wantErr: "not a listening socket",
		},
		{
			name: "connected stream socket (Accept=yes)",
			files: func(t *testing.T) ([]*os.File, string) {
				fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
				if err != nil {
					t.Fatal(err)
				}
				a, b := os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
				t.Cleanup(func() { a.Close(); b.Close() })
				return []*os.File{a}, ""
			},
			wantErr: "Accept=yes is not supported",
		},
		{
			name: "regular file",
			files: func(t *testing.T) ([]*os.File, string) {
				f, err := os.Create(filepath.Join(dir, "not-a-socket"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.Close() })
				return []*os.File{f}, ""
			},
			wantErr: "not a socket",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, wantAddr := tt.files(t)
			cmd := activatedChild(t, "probe", tt.pid, files)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, stderr.String())
			}
			var r probeResult
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("child printed %q: %v\n%s", out, err, stderr.String())
			}
			if r.OK != tt.wantOK {
				t.Errorf("ok = %v, want %v (err %q)", r.OK, tt.wantOK, r.Err)
			}
			if tt.wantErr == "" && r.Err != "" {
				t.Errorf("err = %q, want none", r.Err)
			}
			if tt.wantErr != "" && !strings.Contains(r.Err, tt.wantErr) {
				t.Errorf("err = %q, want it to contain %q", r.Err, tt.wantErr)
			}
			if r.Addr != wantAddr {
				t.Errorf("addr = %q, want %q", r.Addr, wantAddr)
			}
			if tt.wantOK && r.Network != "unix" {
				t.Errorf("network = %q, want unix", r.Network)
			}
			if r.Env != "" {
				t.Errorf("LISTEN_* still set in the child after the call: %q", r.Env)
			}
		})
	}
}

// TestSocketActivatedDev starts `leaseside dev` with a socket passed the
// way systemd passes leaseside.socket's, and talks to it over that socket.
func TestSocketActivatedDev(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "activated.sock")
	decoy := filepath.Join(dir, "decoy.sock") // --socket: must not be used
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	// From here on only the child holds the socket: a reply on it comes
	// from the child.
	f := socketFile(t, ln)
	cmd := activatedChild(t, "cli", 0, []*os.File{f}, "dev", "--socket", decoy, "--data-dir", filepath.Join(dir, "data"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	var log bytes.Buffer // written by the reader below until exited is closed
	ready := make(chan string, 1)
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "leaseside dev ready") {
				select {
				case ready <- sc.Text():
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		exited <- cmd.Wait()
	}()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cmd.Process.Kill()
			<-exited
		}
	})
	var line string
	select {
	case line = <-ready:
	case err := <-exited:
		stopped = true
		t.Fatalf("leaseside dev exited before ready: %v\n%s", err, log.String())
	case <-time.After(activationTimeout):
		t.Fatalf("leaseside dev not ready after %v", activationTimeout)
	}
	if !strings.Contains(line, "socket="+path) {
		t.Errorf("ready line does not name the activated socket %s:\n%s", path, line)
	}

	ctx, cancel := context.WithTimeout(context.Background(), activationTimeout)
	defer cancel()
	c := &ipc.Client{Socket: path}
	defer c.Close()
	hello, err := c.Hello(ctx)
	if err != nil {
		t.Fatalf("hello over the activated socket: %v", err)
	}
	if hello.Server == "" || hello.Protocol != ipc.ProtocolVersion {
		t.Errorf("hello = %+v", hello)
	}
	if hello.Session == "" || !strings.Contains(line, "session="+hello.Session) {
		t.Errorf("hello session %q is not the child's (ready line: %s)", hello.Session, line)
	}
	lease, err := c.Acquire(ctx, "jobs/activated", ipc.AcquireOptions{TTL: 15 * time.Second})
	if err != nil {
		t.Fatalf("acquire over the activated socket: %v", err)
	}
	held, err := c.Status(ctx)
	if err != nil {
		t.Fatalf("status over the activated socket: %v", err)
	}
	if len(held) != 1 || held[0].Lease != "jobs/activated" || held[0].Token != lease.Token {
		t.Errorf("status = %+v, want jobs/activated with token %s", held, lease.Token)
	}
	if _, err := os.Lstat(decoy); !os.IsNotExist(err) {
		t.Errorf("the child made its own socket at --socket %s (lstat: %v)", decoy, err)
	}

	c.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("leaseside dev exited with %v after SIGTERM\n%s", err, log.String())
		}
	case <-time.After(activationTimeout):
		t.Fatalf("leaseside dev did not stop on SIGTERM")
	}
	// The socket file is systemd's (here, the test's): stopping the
	// daemon leaves it for the next activation.
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("activated socket gone after the daemon stopped: %v", err)
	}
}
