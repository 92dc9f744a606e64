package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// Issue 9, "a local user cannot stop or starve the daemon". Each test
// abuses a real `leaseside dev` as an unprivileged member of the socket's
// group (uid nobody), and measures, while it does, how long the daemon
// takes to answer another client (root): reported, not bounded, since
// the machine is shared.

const nobody = 65534

// abused is a `leaseside dev` under abuse.
type abused struct {
	*process
	socket string
}

// abuseDev starts `leaseside dev` with the given config JSON (and under
// the wrap command, if any), its socket open to group nobody, and waits
// until it serves.
func abuseDev(t *testing.T, conf string, wrap ...string) *abused {
	t.Helper()
	dir, err := os.MkdirTemp("", "lsab")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(bin), 0o755)
	cf := filepath.Join(dir, "conf.json")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "sock", "s.sock")
	args := append(wrap, bin, "dev", "--socket", socket, "--data-dir", t.TempDir(), "--config", cf, "--socket-group", strconv.Itoa(nobody))
	p := startProcess(t, "leaseside dev", exec.Command(args[0], args[1:]...))
	p.waitLine(t, 0, "leaseside dev ready")
	return &abused{process: p, socket: socket}
}

// asNobody runs a command as uid and gid nobody.
func asNobody(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	return cmd
}

// pyAbuser runs a Python script as nobody with the socket as argv[1] and
// returns its output lines as they come; closing the returned func's
// stdin (calling stop) ends it. Debian's python3 (make deps), which
// nobody may run, not one in root's home.
func pyAbuser(t *testing.T, socket, script string, args ...string) (lines *bufio.Reader, stop func()) {
	t.Helper()
	cmd := asNobody("/usr/bin/python3", append([]string{"-c", script, socket}, args...)...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, done := background(t, cmd)
	var once sync.Once
	return out, func() {
		once.Do(func() {
			in.Close()
			if r := waitResult(t, done); r.code != 0 {
				t.Errorf("the abuser failed: %s", r.stderr)
			}
		})
	}
}

// answerBound is how long root's status may take while the daemon is
// abused: generous, since the machine is shared (an answer normally takes
// about a millisecond; the measured figures are logged), and still far
// below what a stopped or starved daemon would show (no answer at all).
const answerBound = 10 * time.Second

// minAnswers is how many of root's round trips answerTimes measures at
// least, so that each abuse has a figure worth reporting.
const minAnswers = 30

// answerTimes measures root's status round trips on socket, every 20ms,
// on one connection made before the abuse, until stop is called and at
// least minAnswers were measured (stop is called while the abuse goes
// on); it fails the test if one took longer than answerBound, and returns
// the median and the slowest.
func answerTimes(t *testing.T, socket string) (stop func() (median, slowest time.Duration)) {
	t.Helper()
	c := &ipc.Client{Socket: socket}
	// ctx ends the measurements early, when the test ends before stop
	// (before the daemon stops); stopping asks for the last ones.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stopping := make(chan struct{})
	done := make(chan []time.Duration, 1)
	go func() {
		var ds []time.Duration
		defer func() { done <- ds }()
		for ctx.Err() == nil {
			select {
			case <-stopping:
				if len(ds) >= minAnswers {
					return
				}
			default:
			}
			rctx, rcancel := context.WithTimeout(ctx, timeout)
			t0 := time.Now()
			_, err := c.Status(rctx)
			rcancel()
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("root's status while the daemon was abused: %v", err)
				}
				return
			}
			ds = append(ds, time.Since(t0))
			pause := time.NewTimer(20 * time.Millisecond)
			select {
			case <-pause.C:
			case <-ctx.Done():
			}
		}
	}()
	return func() (time.Duration, time.Duration) {
		close(stopping)
		ds := <-done
		c.Close()
		if len(ds) == 0 {
			t.Fatal("root's status was never answered while the daemon was abused")
		}
		slices.Sort(ds)
		median, slowest := ds[len(ds)/2], ds[len(ds)-1]
		t.Logf("root's status while abused: %d answers, median %v, 90th percentile %v, slowest %v", len(ds), median, ds[len(ds)*9/10], slowest)
		if slowest > answerBound {
			t.Errorf("root's status took %v while the daemon was abused, more than %v", slowest, answerBound)
		}
		return median, slowest
	}
}

// Connections: nobody opens twice its limit; the connections over it
// get one resource_exhausted line each and are closed, the others are
// served, and root is answered throughout.
func TestAbuseConnectionsPerUID(t *testing.T) {
	t.Parallel()
	dev := abuseDev(t, `{"max_connections_per_uid": 20}`)
	measure := answerTimes(t, dev.socket)
	out, stop := pyAbuser(t, dev.socket, `
import json, socket, sys
conns = []
for i in range(40):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(sys.argv[1])
    conns.append(c)
served = refused = 0
for c in conns:
    try:
        c.sendall(b'{"id":1,"op":"hello"}\n')
    except OSError:
        pass  # a refused connection may be closed already: its line is there
    try:
        line = c.makefile().readline()
    except OSError:
        line = ""
    m = json.loads(line) if line else {}
    if m.get("ok"):
        served += 1
    elif m.get("error", {}).get("code") == "resource_exhausted":
        refused += 1
print(served, refused, flush=True)
sys.stdin.read()
`)
	defer stop()
	var served, refused int
	if _, err := fmt.Sscan(readLineT(t, out), &served, &refused); err != nil {
		t.Fatal(err)
	}
	median, slowest := measure()
	t.Logf("nobody: %d connections served, %d refused; root's status meanwhile: median %v, slowest %v", served, refused, median, slowest)
	if served != 20 || refused != 20 {
		t.Fatalf("served %d, refused %d; want 20 and 20", served, refused)
	}
	dev.waitLine(t, 0, "refusing connections of a uid over its limit", "uid=65534")
}

// Memory: connections that send status and never read are held back
// (the daemon stops reading them once a little is queued, so their
// writes block), the daemon's memory stays bounded, and after the stall
// timeout they are closed with a logged reason; root is answered
// throughout.
func TestAbuseNonReadingClients(t *testing.T) {
	t.Parallel()
	dev := abuseDev(t, `{"socket_queue_bytes": 65536, "socket_stall_timeout": "5s"}`)
	rss0 := rss(t, dev.pid())
	measure := answerTimes(t, dev.socket)
	out, stop := pyAbuser(t, dev.socket, `
import socket, sys, threading
out = threading.Lock()
def say(*words):
    with out:  # one line at a time: the threads' prints could interleave
        print(*words, flush=True)
def flood(i):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(sys.argv[1])
    c.settimeout(2)
    n = 0
    try:
        while True:
            c.sendall(b'{"id":1,"op":"clock"}\n')
            n += 1
    except socket.timeout:
        say("blocked", i, n)
    c.settimeout(60)
    try:
        while True:
            c.sendall(b'{"id":1,"op":"clock"}\n')
    except OSError as e:
        say("closed", i, e.errno)
ts = [threading.Thread(target=flood, args=(i,)) for i in range(4)]
for t in ts: t.start()
for t in ts: t.join()
sys.stdin.read()
`)
	defer stop()
	blocked, closed := 0, 0
	var peak int64
	for blocked+closed < 8 {
		line := readLineT(t, out)
		switch {
		case strings.HasPrefix(line, "blocked"):
			blocked++
			if blocked == 4 {
				peak = rss(t, dev.pid())
			}
		case strings.HasPrefix(line, "closed"):
			closed++
		default:
			t.Fatalf("abuser: %q", line)
		}
		t.Logf("abuser: %s", line)
	}
	median, slowest := measure()
	t.Logf("4 non-reading connections held back; daemon RSS %d MiB before, %d MiB with all four held back; root's status meanwhile: median %v, slowest %v",
		rss0>>20, peak>>20, median, slowest)
	if peak-rss0 > 64<<20 {
		t.Fatalf("the daemon grew %d MiB for 4 connections that do not read", (peak-rss0)>>20)
	}
	dev.waitLine(t, 0, "closing a connection whose client has read nothing", "uid=65534")
}

// rss is a process's resident set in bytes.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// File descriptors: the daemon raises its soft RLIMIT_NOFILE to the hard
// one; under a low hard limit, connections past it make accept fail
// (EMFILE); the daemon backs off and goes on, is still answering a client
// connected before, and accepts again once fds free. (It used to exit:
// "accept4: too many open files".)
func TestAbuseFileDescriptors(t *testing.T) {
	t.Parallel()
	dev := abuseDev(t, `{"max_connections_per_uid": 100000}`, "prlimit", "--nofile=64:256", "--")
	if lim := nofile(t, dev.pid()); !strings.HasPrefix(lim, "256 256") {
		t.Fatalf("the daemon's open files limit is %q, want 256 (soft raised to hard)", lim)
	}
	measure := answerTimes(t, dev.socket)
	out, stop := pyAbuser(t, dev.socket, `
import socket, sys
conns = []
for i in range(400):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(5)
    try:
        c.connect(sys.argv[1])
    except OSError:
        break
    conns.append(c)
print(len(conns), flush=True)
sys.stdin.read()
`)
	n := atoi(t, readLineT(t, out))
	dev.waitLine(t, 0, "accept failed; retrying", "too many open files")
	median, slowest := measure()
	t.Logf("nobody opened %d connections against a limit of 256 fds; root's status meanwhile: median %v, slowest %v", n, median, slowest)
	stop()
	c := &ipc.Client{Socket: dev.socket}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := c.Hello(ctx); err != nil {
		t.Fatalf("a new client once the fds freed: %v", err)
	}
	if dev.done() {
		t.Fatal("the daemon is gone")
	}
}

// nofile reads a process's soft and hard open files limits.
func nofile(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/limits")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Max open files") {
			return strings.Join(strings.Fields(strings.TrimPrefix(l, "Max open files")), " ")
		}
	}
	return ""
}

// Leases: nobody at its lease limit is refused the next one
// (resource_exhausted, nothing changes); status, check and watch show
// nobody only its own leases and those the ACL names it for, and root all.
func TestAbuseLeasesAndVisibility(t *testing.T) {
	t.Parallel()
	dev := abuseDev(t, `{"max_leases_per_uid": 3, "acl": [{"uids": [65534], "prefixes": ["jobs/", "shared/"]}]}`)
	watch := nobodyWatch(t, dev.socket)
	cli(t, dev.socket, "acquire", "root/private", "--detached").must(t, 0)
	cli(t, dev.socket, "acquire", "shared/x", "--detached").must(t, 0)
	for i := range 3 {
		nobodyCLI(t, dev.socket, "acquire", fmt.Sprintf("jobs/n%d", i), "--detached").must(t, 0)
	}
	if r := nobodyCLI(t, dev.socket, "acquire", "jobs/n3", "--detached"); r.code == 0 || !strings.Contains(r.stderr, "max_leases_per_uid") {
		t.Fatalf("nobody's 4th lease: exit %d, %s; want refused for its limit", r.code, r.stderr)
	}
	if got, want := names(t, nobodyCLI(t, dev.socket, "status", "--json").must(t, 0)), []string{"jobs/n0", "jobs/n1", "jobs/n2", "shared/x"}; !slices.Equal(got, want) {
		t.Fatalf("nobody's status shows %v, want its own and the ACL's %v", got, want)
	}
	if got := names(t, cli(t, dev.socket, "status", "--json").must(t, 0)); len(got) != 5 {
		t.Fatalf("root's status shows %v, want all 5", got)
	}
	// check follows the same rule: root/private, a name the ACL does not
	// give nobody, is refused without a token; shared/x, which it names
	// nobody for, is shown.
	if r := nobodyCLI(t, dev.socket, "check", "root/private"); r.code == 0 || strings.Contains(r.stdout, "token") {
		t.Fatalf("nobody's check root/private: exit %d, %q %q; want refused, no token", r.code, r.stdout, r.stderr)
	}
	nobodyCLI(t, dev.socket, "check", "shared/x").must(t, 0)
	// nobody's watch saw its own and shared/x, never root/private: root
	// releases root/private, then shared/x; the second event proves the
	// first had its turn.
	cli(t, dev.socket, "release", "root/private").must(t, 0)
	cli(t, dev.socket, "release", "shared/x").must(t, 0)
	for {
		line := readLineT(t, watch)
		if strings.Contains(line, "root/private") {
			t.Fatalf("nobody's watch saw root's lease: %s", line)
		}
		if strings.Contains(line, "shared/x") && strings.Contains(line, "released") {
			break
		}
	}
}

// check shows a user only the leases status shows them (review R8-11):
// with no ACL every user may use every name but sees only its own
// leases, so nobody's check of root's lease says not held (exit 3, no
// token), while root's check of it, and nobody's of its own, say held.
func TestAbuseCheckVisibility(t *testing.T) {
	t.Parallel()
	dev := abuseDev(t, `{}`)
	cli(t, dev.socket, "acquire", "jobs/root", "--detached").must(t, 0)
	nobodyCLI(t, dev.socket, "acquire", "jobs/mine", "--detached").must(t, 0)
	if r := nobodyCLI(t, dev.socket, "check", "jobs/root"); r.code != 3 || strings.Contains(r.stdout+r.stderr, "token") {
		t.Fatalf("nobody's check jobs/root: exit %d, %q %q; want 3 (not held) and no token", r.code, r.stdout, r.stderr)
	}
	if r := nobodyCLI(t, dev.socket, "check", "jobs/root", "--json"); r.code != 3 {
		t.Fatalf("nobody's check jobs/root --json: exit %d, %q %q; want 3", r.code, r.stdout, r.stderr)
	}
	if out := cli(t, dev.socket, "check", "jobs/root").must(t, 0).stdout; !strings.Contains(out, "token") {
		t.Fatalf("root's check jobs/root: %q; want its token", out)
	}
	if out := nobodyCLI(t, dev.socket, "check", "jobs/mine").must(t, 0).stdout; !strings.Contains(out, "token") {
		t.Fatalf("nobody's check of its own lease: %q; want its token", out)
	}
}

// The socket directory: one another user could replace the socket in
// (a squatted /tmp/leaseside-UID: another user's directory, one writable
// by others, another user's link to a directory of ours) makes the daemon
// refuse to start, exit 1, naming it; with --socket-group, a directory
// shared with other files keeps its group.
func TestAbuseSquattedSocketDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ours := filepath.Join(dir, "ours")
	if err := os.Mkdir(ours, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, sq := range []struct {
		name string
		make func(path string) error
	}{
		{"another user's directory", func(p string) error {
			return errors.Join(os.Mkdir(p, 0o777), os.Chmod(p, 0o777), os.Chown(p, nobody, nobody))
		}},
		{"a directory writable by others", func(p string) error { return errors.Join(os.Mkdir(p, 0o777), os.Chmod(p, 0o777)) }},
		{"another user's link to a directory of ours", func(p string) error { return errors.Join(os.Symlink(ours, p), os.Lchown(p, nobody, nobody)) }},
	} {
		squat := filepath.Join(dir, "leaseside-"+strconv.Itoa(len(sq.name)))
		if err := sq.make(squat); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "dev", "--socket", filepath.Join(squat, "s.sock"), "--data-dir", t.TempDir())
		var e strings.Builder
		cmd.Stderr = &e
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(e.String(), squat) {
			t.Fatalf("dev on %s: %v; want exit 1 naming %s:\n%s", sq.name, err, squat, e.String())
		}
		for _, l := range strings.Split(e.String(), "\n") {
			if strings.Contains(l, squat) {
				t.Logf("dev on %s: exit 1, %s", sq.name, l)
			}
		}
	}

	existing := t.TempDir()
	os.WriteFile(filepath.Join(existing, "other"), nil, 0o600)
	fi, _ := os.Stat(existing)
	gid := fi.Sys().(*syscall.Stat_t).Gid
	startDev(t, filepath.Join(existing, "s.sock"), t.TempDir(), "--socket-group", strconv.Itoa(nobody))
	if fi, _ := os.Stat(existing); fi.Sys().(*syscall.Stat_t).Gid != gid {
		t.Fatalf("--socket-group changed the group of a directory the daemon did not create")
	}
}
