package packaging

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// boxPath is the PATH of commands run in a box: Debian's, with
// /usr/local/sbin first (where the mock systemctl is).
const boxPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// box is a throwaway copy of this whole machine to install packages in:
// an overlay of / (writes go to a temporary upper directory) in a private
// mount and network namespace, with fresh tmpfs on /run and /tmp, a new
// /proc (the pid namespace is the host's, so pids are the same inside and
// out), the host's /dev and its own loopback interface. One process holds
// the namespaces (unshare ... exec cat, ended by closing its stdin);
// commands run in the box through nsenter and chroot. dpkg -i in it
// changes nothing outside, and its mounts end with its last process.
type box struct {
	root   string // the overlay's mount point, seen only in the namespace
	holder *exec.Cmd
}

// needTools skips t when a tool is missing, or fails it under CI=true.
func needTools(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			skipOrFail(t, "%s not installed (make deps installs it)", n)
		}
	}
}

// skipOrFail skips t, or fails it under CI=true, where nothing may be
// skipped for a missing tool.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// newBox makes a box that t's cleanup takes down again.
func newBox(t *testing.T) *box {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "needs root: mount namespaces, overlayfs and dpkg -i in a copy of the machine")
	}
	needTools(t, "unshare", "nsenter", "chroot", "mount", "ip", "dpkg", "dpkg-deb")
	dir := t.TempDir()
	upper, work, root := filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "root")
	for _, d := range []string{upper, work, root} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const script = `set -e
mount -t overlay overlay -o "lowerdir=/,upperdir=$2,workdir=$3" "$1"
mount -t proc proc "$1/proc"
mount --rbind /dev "$1/dev"
mount -t tmpfs -o mode=0755 tmpfs "$1/run"
mount -t tmpfs -o mode=1777 tmpfs "$1/tmp"
ip link set lo up
echo ready
exec cat >/dev/null`
	cmd := exec.Command("unshare", "--mount", "--net", "--propagation", "private", "--", "sh", "-c", script, "sh", root, upper, work)
	cmd.SysProcAttr = boxProcAttr()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(timeout):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		stdin.Close()
		cmd.Wait()
		skipOrFail(t, "cannot make an overlay copy of the machine in a mount namespace: %q\n%s", line, stderr.String())
	}
	return &box{root: root, holder: cmd}
}

// command is a command run in the box: chroot with chrootOpts (such as
// --userspec) and args, in its own process group, with env (PATH and
// LANG when nil).
func (b *box) command(env, chrootOpts []string, args ...string) *exec.Cmd {
	a := []string{"-t", strconv.Itoa(b.holder.Process.Pid), "--mount", "--net", "--", "chroot"}
	a = append(append(append(a, chrootOpts...), b.root), args...)
	cmd := exec.Command("nsenter", a...)
	if env == nil {
		env = []string{"PATH=" + boxPath, "LANG=C.UTF-8"}
	}
	cmd.Env = env
	cmd.SysProcAttr = boxProcAttr()
	return cmd
}

// boxProcAttr puts a box's process in a process group of its own, and
// kills it if the test dies without its cleanups (a -timeout panic, a
// kill): the box's namespaces end with their last process.
// (A setuid, as chroot --userspec does, clears the death signal: those
// processes are only ended by the cleanups.)
func boxProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// try runs args in the box as root with stdin (nil: none) and returns
// its stdout, stderr and exit status (-1 if it did not exit).
func (b *box) try(stdin io.Reader, args ...string) (string, string, int) {
	cmd := b.command(nil, nil, args...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), stderr.String(), 0
	case errors.As(err, &ee) && ee.Exited():
		return stdout.String(), stderr.String(), ee.ExitCode()
	}
	return stdout.String(), stderr.String() + err.Error(), -1
}

// run runs args in the box as root and returns its stdout; anything but
// exit 0 fails t.
func (b *box) run(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := b.try(nil, args...)
	if code != 0 {
		t.Fatalf("in the box: %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// write makes the file path in the box with data and mode (as root).
func (b *box) write(t *testing.T, path string, data io.Reader, mode os.FileMode) {
	t.Helper()
	_, errOut, code := b.try(data, "sh", "-c", `umask 077 && mkdir -p "$(dirname "$1")" && cat > "$1" && chmod "$2" "$1"`, "sh", path, strconv.FormatUint(uint64(mode), 8))
	if code != 0 {
		t.Fatalf("writing %s in the box: exit %d: %s", path, code, errOut)
	}
}

// exists says whether path exists in the box (a dangling symlink too).
func (b *box) exists(path string) bool {
	_, _, code := b.try(nil, "sh", "-c", `[ -e "$1" ] || [ -L "$1" ]`, "sh", path)
	return code == 0
}

// proc is a process running in the box, its stdout and stderr collected.
type proc struct {
	name   string
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    strings.Builder
	line   chan struct{} // a token on every new line of output
	exited chan struct{} // closed once the process has exited
	err    error         // cmd.Wait's, once exited is closed
}

// start starts a process in the box; t's cleanup kills its process group.
func (b *box) start(t *testing.T, name string, env, chrootOpts []string, args ...string) *proc {
	t.Helper()
	return startCommand(t, name, b.command(env, chrootOpts, args...))
}

// startCommand starts cmd (a box's command) as start does.
func startCommand(t *testing.T, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{name: name, cmd: cmd, line: make(chan struct{}, 1), exited: make(chan struct{})}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		r.Close()
		w.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	w.Close()
	go func() {
		defer r.Close()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.line <- struct{}{}:
			default:
			}
		}
	}()
	// Reaped at once, whoever else holds the pipe: a mock systemctl
	// waits for the pid to go.
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

// pid is the process's pid, the same in the box and out.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// output is what the process wrote so far.
func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// running says whether the process has not exited.
func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill kills the process group and waits for the process to exit.
func (p *proc) kill() {
	syscall.Kill(-p.pid(), syscall.SIGKILL)
	<-p.exited
}

// waitFor waits until the output holds s; the process exiting or d
// passing first fails t.
func (p *proc) waitFor(t *testing.T, s string, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		if strings.Contains(p.output(), s) {
			return
		}
		select {
		case <-p.line:
		case <-p.exited:
			if strings.Contains(p.output(), s) {
				return
			}
			t.Fatalf("%s exited (%v) before writing %q\n%s", p.name, p.err, s, p.output())
		case <-deadline:
			t.Fatalf("%s did not write %q within %v\n%s", p.name, s, d, p.output())
		}
	}
}

// waitExit waits for the process to exit within d and fails t if it does
// not.
func (p *proc) waitExit(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(d):
		t.Fatalf("%s still running after %v\n%s", p.name, d, p.output())
	}
}
