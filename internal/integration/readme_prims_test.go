package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// docs/coordination.md's examples of elections, semaphores and jeopardy, in Python
// and Go, run as written against real daemons in every outcome they
// handle: each ends with a message of its own and the exit status it
// chose, never a crash.

// readmeExample writes docs/coordination.md's example in lang ("python" or "go")
// under heading to a directory of its own and returns the command line
// that runs it (a Go example is built first).
func readmeExample(t *testing.T, heading, lang string) []string {
	t.Helper()
	dir := t.TempDir()
	src := docBlock(t, "docs/coordination.md", heading, lang)
	if lang == "python" {
		path := filepath.Join(dir, "example.py")
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return []string{"python3", "-u", path}
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "example")
	build := exec.Command("go", "build", "-o", exe, filepath.Join(dir, "main.go"))
	build.Dir = "../.." // the module the example imports
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docs/coordination.md's Go example under %q does not build: %v\n%s", heading, err, out)
	}
	return []string{exe}
}

// examples are docs/coordination.md's examples under heading, one per language.
func examples(t *testing.T, heading string) map[string][]string {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is needed (make deps installs it)")
	}
	return map[string][]string{"python": readmeExample(t, heading, "python"), "go": readmeExample(t, heading, "go")}
}

// startExample starts argv against socket, with the Python client on
// the path.
func startExample(t *testing.T, name, socket string, argv []string) *process {
	t.Helper()
	python, err := filepath.Abs("../../clients/python")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "LEASESIDE_SOCKET="+socket, "PYTHONPATH="+python, "PYTHONDONTWRITEBYTECODE=1")
	return startProcess(t, name, cmd)
}

var crashRE = regexp.MustCompile(`panic:|Traceback|KeyError|nil pointer`)

// checkExample waits for p to say want and to exit with code, and that it
// did not crash.
func checkExample(t *testing.T, p *process, code int, want string) {
	t.Helper()
	p.waitLine(t, 0, want)
	if got := p.waitExit(t); got != code {
		t.Errorf("%s: exit %d, want %d; output:\n%s", p.name, got, code, p.tail(20))
	}
	if out := p.tail(50); crashRE.MatchString(out) {
		t.Errorf("%s crashed:\n%s", p.name, out)
	}
}

// "Elect a leader": it leads and resigns; another candidate leads all
// through its wait (it names that leader's value); it is deposed while
// leading; no daemon.
func TestReadmeElectExamples(t *testing.T) {
	t.Parallel()
	for lang, argv := range examples(t, "## Elect a leader") {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			socket := tempSocket(t)
			startDev(t, socket, t.TempDir())
			const name = "svc/api"

			checkExample(t, startExample(t, "leads", socket, argv), 0, "leading svc/api, step 2 token")
			cli(t, socket, "leader", name).must(t, 3) // it resigned

			other := startProcess(t, "another candidate", exec.Command(bin, "elect", name, "--value", "10.9.9.9:1", "--socket", socket,
				"--", "sh", "-c", "echo other leads >&2; exec sleep 1000"))
			other.waitLine(t, 0, "other leads")
			checkExample(t, startExample(t, "led by another", socket, argv), 1, "leaseside: svc/api is led by 10.9.9.9:1")
			other.cmd.Process.Signal(syscall.SIGTERM) // elect passes it on, and resigns
			other.waitExit(t)

			p := startExample(t, "deposed", socket, argv)
			p.waitLine(t, 0, "leading svc/api, step 0 token")
			p.stopped(t, func() { // it leads 2 s more: a loaded release may take longer
				cli(t, socket, "release", name).must(t, 0) // another caller ends it: the leader is told at once
			})
			checkExample(t, p, 1, "leaseside: lost svc/api (released_by_admin): stepping down")

			checkExample(t, startExample(t, "no daemon", filepath.Join(t.TempDir(), "none.sock"), argv), 1, "leaseside:")
		})
	}
}

// "Run N at once": it gets a slot; both slots are taken; another limit
// is in force; its slot is lost while it works; no daemon.
func TestReadmeSemaphoreExamples(t *testing.T) {
	t.Parallel()
	for lang, argv := range examples(t, "## Run N at once") {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			socket := tempSocket(t)
			startDev(t, socket, t.TempDir())
			const name = "pool/encoders"

			checkExample(t, startExample(t, "got a slot", socket, argv), 0, "batch 2 token")

			var tokens []string
			for range 2 {
				tokens = append(tokens, strings.TrimSpace(cli(t, socket, "acquire", name, "--limit", "2", "--detached").must(t, 0).stdout))
			}
			checkExample(t, startExample(t, "full", socket, argv), 1, "leaseside: pool/encoders is full")
			for _, tok := range tokens {
				cli(t, socket, "release", name, "--token", tok).must(t, 0)
			}

			tok := strings.TrimSpace(cli(t, socket, "acquire", name, "--limit", "3", "--detached").must(t, 0).stdout)
			checkExample(t, startExample(t, "another limit", socket, argv), 1, "limit 3")
			cli(t, socket, "release", name, "--token", tok).must(t, 0)

			p := startExample(t, "slot lost", socket, argv)
			p.waitLine(t, 0, "batch 0 token")
			p.stopped(t, func() { cli(t, socket, "release", name).must(t, 0) }) // it works 2 s more
			checkExample(t, p, 1, "leaseside: lost pool/encoders (released_by_admin): stopping")

			checkExample(t, startExample(t, "no daemon", filepath.Join(t.TempDir(), "none.sock"), argv), 1, "leaseside:")
		})
	}
}

// "React before the lease is lost": it works through (renewals succeed);
// the grantor is stopped (SIGSTOP) while it works, so it is told of
// jeopardy, pauses, and stops when the lease is lost; the lease is held
// elsewhere; no daemon.
func TestReadmeJeopardyExamples(t *testing.T) {
	t.Parallel()
	for lang, argv := range examples(t, "## React before the lease is lost") {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			c := newLoopbackCluster(t, 1)
			c.startAll()
			g := c.nodes[0].proc
			t.Cleanup(func() { g.cmd.Process.Signal(syscall.SIGCONT) })
			s := startSidecar(t, "sidecar", nil, "--grantors", c.rpcAddrs())
			const name = "jobs/render-42"

			checkExample(t, startExample(t, "renewed", s.socket, argv), 0, "frame 7 token")

			p := startExample(t, "grantor stopped", s.socket, argv)
			p.waitLine(t, 0, "frame 0 token")
			if err := g.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			i, _ := p.waitLine(t, 0, "jeopardy: pausing")
			checkExample(t, p, 1, "leaseside: lost "+name)
			for _, l := range p.out.all()[i:] {
				if strings.HasPrefix(l.v, "frame ") {
					t.Errorf("a frame after jeopardy:\n%s", p.tail(20))
				}
			}
			g.cmd.Process.Signal(syscall.SIGCONT)

			// The grantor keeps the lost grant until its own expiry.
			cli(t, s.socket, "acquire", name, "--detached", "--wait", "1m").must(t, 0)
			checkExample(t, startExample(t, "held", s.socket, argv), 1, "leaseside:")
			cli(t, s.socket, "release", name).must(t, 0)

			checkExample(t, startExample(t, "no daemon", filepath.Join(t.TempDir(), "none.sock"), argv), 1, "leaseside:")
		})
	}
}

// "Watch holders, check a token": the lease is free at once; it is held,
// then released (the standby sees the release and that its token is no
// longer live); it stays held; no daemon.
func TestReadmeHolderWatchExamples(t *testing.T) {
	t.Parallel()
	for lang, argv := range examples(t, "## Watch holders, check a token") {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			socket := tempSocket(t)
			startDev(t, socket, t.TempDir())
			const name = "jobs/render-42"

			checkExample(t, startExample(t, "free", socket, argv), 0, name+" is free")

			tok := strings.TrimSpace(cli(t, socket, "acquire", name, "--detached").must(t, 0).stdout)
			p := startExample(t, "freed", socket, argv)
			p.waitLine(t, 0, "held by token "+tok)
			cli(t, socket, "release", name).must(t, 0)
			p.waitLine(t, 0, "token "+tok+" released no longer live")
			checkExample(t, p, 0, name+" is free")

			tok = strings.TrimSpace(cli(t, socket, "acquire", name, "--detached").must(t, 0).stdout)
			checkExample(t, startExample(t, "stays held", socket, argv), 1, "leaseside: "+name+" still held after 10s")
			cli(t, socket, "release", name, "--token", tok).must(t, 0)

			checkExample(t, startExample(t, "no daemon", filepath.Join(t.TempDir(), "none.sock"), argv), 1, "leaseside:")
		})
	}
}
