package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/leaseside/leaseside/ipc"
)

// docBlock returns the first fenced code block in lang under heading (a
// line of its own, "## Go" say) of the document at path, relative to the
// repository's root (README.md, docs/clients.md).
func docBlock(t *testing.T, path, heading, lang string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("../..", path))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q", path, heading)
	}
	m := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```").FindStringSubmatch(section)
	if m == nil {
		t.Fatalf("%s has no %s block under %q", path, lang, heading)
	}
	return m[1]
}

// exampleOutcomes runs a README example (argv) in every outcome it
// documents, against a real daemon: it gets the lease and works; the
// lease is held elsewhere; the lease is lost while it works (released
// from another connection); and no daemon at all. Each ends with a message
// of the example's own and the exit status it chose, never a crash.
func exampleOutcomes(t *testing.T, dir string, argv ...string) {
	socket := tempSocket(t)
	startDev(t, socket, t.TempDir())
	const lease = "jobs/render-42"
	run := func(name, socket string) *process {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LEASESIDE_SOCKET="+socket)
		return startProcess(t, name, cmd)
	}
	crashed := regexp.MustCompile(`panic:|Traceback|KeyError|nil pointer`)
	check := func(p *process, code int, want string) {
		t.Helper()
		p.waitLine(t, 0, want)
		if got := p.waitExit(t); got != code {
			t.Errorf("%s: exit %d, want %d; output:\n%s", p.name, got, code, p.tail(20))
		}
		if out := p.tail(50); crashed.MatchString(out) {
			t.Errorf("%s crashed:\n%s", p.name, out)
		}
	}

	check(run("got the lease", socket), 0, "frame 2 token")

	cli(t, socket, "acquire", lease, "--detached").must(t, 0)
	check(run("lease held", socket), 1, "jobs/render-42 is held elsewhere")
	cli(t, socket, "release", lease).must(t, 0)

	p := run("lease lost", socket)
	p.waitLine(t, 0, "frame 0 token")
	p.stopped(t, func() { // its work lasts 2 s more: a loaded release may take longer
		cli(t, socket, "release", lease).must(t, 0) // another caller ends it: the owner is told at once
	})
	check(p, 1, "leaseside: lost jobs/render-42 (released_by_admin)")

	check(run("no daemon", filepath.Join(t.TempDir(), "none.sock")), 1, "leaseside:")
}

// docs/clients.md's Go example, built as written, in each outcome.
func TestReadmeGoExample(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(docBlock(t, "docs/clients.md", "## Go", "go")), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "example"), filepath.Join(dir, "main.go"))
	build.Dir = "../.." // the module the example imports
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docs/clients.md's Go example does not build: %v\n%s", err, out)
	}
	exampleOutcomes(t, dir, filepath.Join(dir, "example"))
}

// The Python client installs with pip, as docs/clients.md says, into a fresh
// virtual environment and without a package index (it needs nothing
// beyond the standard library, to build or to run); docs/clients.md's Python
// example then runs with it, from elsewhere, in each outcome.
func TestReadmePythonExample(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is needed (make deps installs it)")
	}
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command("python3", "-m", "venv", venv).CombinedOutput(); err != nil {
		t.Fatalf("python3 -m venv: %v\n%s", err, out)
	}
	pip := exec.Command(filepath.Join(venv, "bin", "pip"), "install", "./clients/python")
	pip.Dir = "../.."
	pip.Env = append(os.Environ(), "PIP_NO_INDEX=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PYTHONDONTWRITEBYTECODE=1")
	if out, err := pip.CombinedOutput(); err != nil {
		t.Fatalf("pip install ./clients/python: %v\n%s", err, out)
	}
	dir := t.TempDir()
	example := filepath.Join(dir, "example.py")
	if err := os.WriteFile(example, []byte(docBlock(t, "docs/clients.md", "## Python", "python")), 0o644); err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(venv, "bin", "python")
	where, err := exec.Command(py, "-c", "import leaseside; print(leaseside.__file__)").Output()
	if err != nil || !strings.HasPrefix(string(where), venv) {
		t.Fatalf("leaseside imported from %q (%v), want the venv's copy", where, err)
	}
	exampleOutcomes(t, dir, py, "-u", example)
}

// The README's systemd gate carries what systemd/README.md says it needs,
// and is the shipped example (systemd/examples/lease-gate.conf).
func TestReadmeSystemdGate(t *testing.T) {
	t.Parallel()
	gate := docBlock(t, "README.md", "## Shell recipes", "ini")
	for _, want := range []string{"TimeoutStartSec=", "SupplementaryGroups=leaseside", "Environment=LEASESIDE_SOCKET=/run/leaseside/leaseside.sock",
		"ExecStartPre=/usr/bin/leaseside acquire", "--detached --wait", "--env-file %t/%N-lease/token.env", "RuntimeDirectory=%N-lease",
		"EnvironmentFile=-%t/%N-lease/token.env", "ExecStopPost=-/usr/bin/leaseside release", "--token ${LEASESIDE_TOKEN}"} {
		if !strings.Contains(gate, want) {
			t.Errorf("the README's gate lacks %q:\n%s", want, gate)
		}
	}
	shipped, err := os.ReadFile("../../systemd/examples/lease-gate.conf")
	if err != nil {
		t.Fatal(err)
	}
	var directives []string
	for _, l := range strings.Split(string(shipped), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			directives = append(directives, l)
		}
	}
	var got []string
	for _, l := range strings.Split(gate, "\n") {
		if l != "" {
			got = append(got, l)
		}
	}
	if strings.Join(got, "\n") != strings.Join(directives, "\n") {
		t.Errorf("the README's gate:\n%s\ndiffers from systemd/examples/lease-gate.conf:\n%s", strings.Join(got, "\n"), strings.Join(directives, "\n"))
	}
}

// quickStartLock serialises the quick start test across test binaries
// (other checkouts on this machine): it uses the system socket path.
const quickStartLock = "/run/lock/leaseside-quickstart-test.lock"

// runQuickStart runs the lines of a README shell block as a person would,
// in dir (where bin/leaseside is), as uid with env: a line ending in "&"
// is started and waited on until it logs that it is ready; every other
// line must succeed. "make build" is done already, and "sudo " is what
// the test's root is. It returns the started processes and each line's
// output.
func runQuickStart(t *testing.T, block, dir string, uid int, env []string) (started []*process, outputs []string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		line, _, _ = strings.Cut(line, " #")
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "sudo "))
		if line == "" || line == "make build" {
			continue
		}
		if uid != 0 && strings.Contains(line, "groupadd") {
			t.Fatalf("%q is for root", line)
		}
		bg := strings.HasSuffix(line, "&")
		script := line
		if bg {
			script = "exec " + strings.TrimSuffix(line, "&") // so that a signal reaches it
		}
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir, cmd.Env = dir, append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "GORACE=atexit_sleep_ms=0"}, env...)
		if uid != 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
		}
		if bg {
			p := startProcess(t, line, cmd)
			p.waitLine(t, 0, "ready")
			started = append(started, p)
			continue
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q as uid %d: %v\n%s", line, uid, err, out)
		}
		outputs = append(outputs, string(out))
	}
	return started, outputs
}

// The README's quick start works as written for root, and for a user in
// no group of ours: root's daemon turns them away with what to do, their
// own daemon serves them, and root's daemon shared with the leaseside
// group tells them to join it. Not parallel: it uses what is the
// machine's own (the system socket, /var/lib/leaseside/dev, the group
// leaseside, nobody's /tmp/leaseside-65534).
func TestReadmeQuickStart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it runs the quick start as root and as another user")
	}
	lock, err := os.OpenFile(quickStartLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if c, err := ipc.Dial(context.Background(), ipc.SystemSocketPath); err == nil {
		c.Close()
		t.Skipf("a leaseside daemon of this machine's own serves %s", ipc.SystemSocketPath)
	}
	if _, err := os.Stat("/var/lib/leaseside/dev"); err == nil {
		t.Skip("/var/lib/leaseside/dev exists: a leaseside dev of this machine's own keeps its data there")
	}
	t.Cleanup(func() {
		os.RemoveAll("/var/lib/leaseside/dev")
		os.Remove("/var/lib/leaseside") // only if it is empty: the test made it
		os.Remove(ipc.SystemSocketPath) // left by a daemon the test had to kill
		os.Remove(filepath.Dir(ipc.SystemSocketPath))
	})
	start := docBlock(t, "README.md", "## Quick start", "sh")
	share := docBlock(t, "docs/local-users.md", "## Sharing root's daemon with a group", "sh")
	if !strings.Contains(share, "--socket-group leaseside") {
		t.Fatalf("docs/local-users.md's block does not share the socket with a group:\n%s", share)
	}

	dir, err := os.MkdirTemp("", "leaseside-quickstart-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	os.Mkdir(filepath.Join(dir, "bin"), 0o755)
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "leaseside"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	const nobody = 65534
	home := filepath.Join(dir, "home")
	os.Mkdir(home, 0o755)
	os.Chown(home, nobody, nobody)
	userEnv := []string{"HOME=" + home, "USER=nobody"} // no XDG_RUNTIME_DIR: the /tmp fallback
	t.Cleanup(func() { os.RemoveAll(filepath.Join(os.TempDir(), "leaseside-65534")) })
	asUser := func(args ...string) result {
		cmd := exec.Command(filepath.Join(dir, "bin", "leaseside"), args...)
		cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, userEnv...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		if err != nil && cmd.ProcessState == nil {
			t.Fatal(err)
		}
		return result{code: cmd.ProcessState.ExitCode(), stdout: o.String(), stderr: e.String()}
	}
	token := regexp.MustCompile(`(?m)^[0-9]+$`)

	// Root.
	devs, outs := runQuickStart(t, start, dir, 0, []string{"HOME=/root"})
	if len(devs) != 1 || len(outs) != 3 || outs[2] != "" || !token.MatchString(outs[0]) || !strings.Contains(outs[1], "LEASE") && !strings.Contains(outs[1], "no leases held") {
		t.Fatalf("root's quick start: %q", outs)
	}

	// A user outside the group, next to root's daemon: turned away, with
	// what to do.
	r := asUser("acquire", "demo", "--ttl", "15s")
	for _, want := range []string{"permission denied", ipc.SystemSocketPath, "serves root only: run your own with 'leaseside dev'"} {
		if r.code != 69 || !strings.Contains(r.stderr, want) {
			t.Fatalf("a user outside the group, next to root's daemon: exit %d, stderr %q; want 69 saying %q", r.code, r.stderr, want)
		}
	}
	// ... who runs their own.
	userDevs, outs := runQuickStart(t, start, dir, nobody, userEnv)
	if len(userDevs) != 1 || len(outs) != 3 || !token.MatchString(outs[0]) {
		t.Fatalf("the user's quick start: %q", outs)
	}
	userDevs[0].term(t)

	// Root's daemon shared with the leaseside group.
	created := exec.Command("getent", "group", "leaseside").Run() != nil
	if created {
		t.Cleanup(func() { exec.Command("groupdel", "leaseside").Run() })
	}
	devs[0].term(t)
	shared, _ := runQuickStart(t, share, dir, 0, []string{"HOME=/root"})
	r = asUser("acquire", "demo", "--ttl", "15s")
	for _, want := range []string{"permission denied: add yourself to group leaseside (sudo usermod -aG leaseside $USER", ipc.SystemSocketPath} {
		if r.code != 69 || !strings.Contains(r.stderr, want) {
			t.Errorf("a user outside the group, next to root's shared daemon: exit %d, stderr %q; want 69 saying %q", r.code, r.stderr, want)
		}
	}
	shared[0].term(t)
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
