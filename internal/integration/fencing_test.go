package integration

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/leaseside/leaseside/internal/stores"
)

// pausedWorkerHeading is the section of docs/fencing.md whose shell block
// is the paused-worker scenario.
const pausedWorkerHeading = "## A paused worker, refused"

// readmeWrite is the write in that block; each adapter's case puts its
// own write in its place.
const readmeWrite = "leaseside write jobs/report report.txt"

// The paused-worker scenario (issue 23 item 5), the block of
// docs/fencing.md run as written for each store (a file, an HTTP service
// behind the proxy, PostgreSQL and Redis through fence/examples' scripts) against a real dev whose daemon gives up on an owner stopped
// for 1 s: worker A takes the lease and is stopped (SIGSTOP, run and its
// command) past its term; B acquires and writes; A resumes and writes
// with its old token. Through each fence A's write is refused and B's
// data stays; with a plain write A's write lands over B's.
func TestPausedWorkerWriteIsFenced(t *testing.T) {
	t.Parallel()
	block := docBlock(t, "docs/fencing.md", pausedWorkerHeading, "sh")
	if !strings.Contains(block, readmeWrite) {
		t.Fatalf("the block of docs/fencing.md has no %q to swap", readmeWrite)
	}
	conf := filepath.Join(t.TempDir(), "conf.json")
	if err := os.WriteFile(conf, []byte(`{"owner_stopped_limit":"1s"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	socket := tempSocket(t)
	startDev(t, socket, t.TempDir(), "--config", conf)
	backend := newStoreBackend(t)
	proxyURL := startFenceProxy(t, backend.srv.URL, filepath.Join(t.TempDir(), "proxy.fence"))
	pg, redisSock := startFencedStores(t)
	examples, err := filepath.Abs("../../fence/examples")
	if err != nil {
		t.Fatal(err)
	}

	readFile := func(dir, _ string) string {
		b, _ := os.ReadFile(filepath.Join(dir, "report.txt"))
		return string(b)
	}
	adapters := []struct {
		name  string
		write string // in place of readmeWrite; @LEASE@ is the case's lease
		env   []string
		read  func(dir, lease string) string
		exit  string // A's write's exit status
		says  string // and what it says
		holds string // what the store holds at the end
	}{
		{name: "file", write: "leaseside write @LEASE@ report.txt", read: readFile, exit: "4", says: "is stale, token", holds: "B\n"},
		{name: "proxy", write: `curl -fsS -o /dev/null -X PUT -H "Leaseside-Lease: $LEASESIDE_LEASE" -H "Leaseside-Token: $LEASESIDE_TOKEN" --data-binary @- ` + proxyURL + "/@LEASE@",
			read: func(_, lease string) string { return backend.get("/" + lease) }, exit: "22", says: "returned error: 409", holds: "B\n"},
		{name: "postgres", write: examples + `/report_postgres.sh "$(cat)"`, env: []string{"DATABASE_URL=" + pg},
			read: func(string, string) string { return cmdOutput(t, "psql", pg, "-XtAc", "SELECT body FROM report") }, exit: "3", says: "stale token", holds: "B\n"},
		{name: "redis", write: examples + `/report_redis.sh "$(cat)"`, env: []string{"REDIS_SOCKET=" + redisSock},
			read: func(string, string) string { return cmdOutput(t, "redis-cli", "-s", redisSock, "GET", "report:daily") }, exit: "1", says: "stale token", holds: "B\n"},
		{name: "plain write", write: "cat > report.txt", read: readFile, exit: "0", holds: "A\n"},
	}
	for _, a := range adapters {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			lease := "jobs/report-" + strings.ReplaceAll(a.name, " ", "-")
			script := strings.ReplaceAll(block, readmeWrite, a.write)
			script = strings.ReplaceAll(strings.ReplaceAll(script, "jobs/report", lease), "@LEASE@", lease)
			dir := t.TempDir()
			out := runScript(t, dir, socket, script, a.env...)
			m := regexp.MustCompile(`(?m)^A: exit (\d+)$`).FindStringSubmatch(out)
			if m == nil || m[1] != a.exit || !strings.Contains(out, a.says) {
				t.Fatalf("A's resumed write: %q, want exit %s saying %q; output:\n%s", m, a.exit, a.says, out)
			}
			if got := a.read(dir, lease); got != a.holds {
				t.Fatalf("the store holds %q after A's resumed write, want %q; output:\n%s", got, a.holds, out)
			}
			t.Logf("%s: A's write exit %s, the store holds %q", a.name, m[1], a.holds)
		})
	}
}

// runScript runs script with sh in dir, the built leaseside first on
// PATH and the daemon at socket, and returns its output. Whatever it
// leaves running (its process group; run kills its command with it) is
// killed at the end.
func runScript(t *testing.T, dir, socket, script string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "LEASESIDE_SOCKET="+socket), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the script did not end within %v; output:\n%s", 2*timeout, out.String())
	}
	return out.String()
}

// storeBackend is an HTTP store behind the fence proxy: PUT keeps the
// body at the path.
type storeBackend struct {
	mu   sync.Mutex
	data map[string]string
	puts int
	srv  *httptest.Server
}

func newStoreBackend(t *testing.T) *storeBackend {
	b := &storeBackend{data: map[string]string{}}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		defer b.mu.Unlock()
		if r.Method == http.MethodPut {
			b.data[r.URL.Path] = string(body)
			b.puts++
		}
		io.WriteString(w, b.data[r.URL.Path])
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *storeBackend) get(path string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.data[path]
}

func (b *storeBackend) putCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.puts
}

// startFenceProxy starts `leaseside fence-proxy` in front of backend and
// returns its URL.
func startFenceProxy(t *testing.T, backend, state string) string {
	t.Helper()
	p := startProcess(t, "fence-proxy", exec.Command(bin, "fence-proxy", "--listen", "127.0.0.1:0", "--backend", backend, "--state", state))
	_, line := p.waitLine(t, 0, "leaseside fence-proxy ready")
	m := regexp.MustCompile(`listen=(\S+)`).FindStringSubmatch(line.v)
	if m == nil {
		t.Fatalf("no listen address in %q", line.v)
	}
	return "http://" + m[1]
}

// The Python and Go programs of docs/fencing.md, as written, against the
// real binary and a real fence-proxy: under a token they write the file
// and the object; under an older one the file is refused; under an older
// one in a fresh directory the file passes and the proxy refuses. Each
// refusal ends the program with its message and exit 1, and the store
// keeps what the newer token wrote.
func TestFencingExamples(t *testing.T) {
	t.Parallel()
	backend := newStoreBackend(t)
	proxyURL := startFenceProxy(t, backend.srv.URL, filepath.Join(t.TempDir(), "proxy.fence"))
	const docAddr = "http://127.0.0.1:8081"
	build := t.TempDir()
	py := filepath.Join(build, "example.py")
	pySrc := docBlock(t, "docs/fencing.md", "## From Python and Go", "python")
	goSrc := docBlock(t, "docs/fencing.md", "## From Python and Go", "go")
	for _, src := range []string{pySrc, goSrc} {
		if !strings.Contains(src, docAddr) {
			t.Fatalf("an example does not write to %s:\n%s", docAddr, src)
		}
	}
	if err := os.WriteFile(py, []byte(strings.ReplaceAll(pySrc, docAddr, proxyURL)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(build, "main.go"), []byte(strings.ReplaceAll(goSrc, docAddr, proxyURL)), 0o644); err != nil {
		t.Fatal(err)
	}
	goBin := filepath.Join(build, "example")
	gobuild := exec.Command("go", "build", "-o", goBin, filepath.Join(build, "main.go"))
	gobuild.Dir = "../.." // the module the example imports
	if out, err := gobuild.CombinedOutput(); err != nil {
		t.Fatalf("the Go example of docs/fencing.md does not build: %v\n%s", err, out)
	}
	for _, ex := range []struct {
		name string
		argv []string
	}{
		{name: "python", argv: []string{"python3", py}},
		{name: "go", argv: []string{goBin}},
	} {
		t.Run(ex.name, func(t *testing.T) {
			lease := "jobs/doc-" + ex.name
			run := func(dir, token string) (string, int) {
				t.Helper()
				cmd := exec.Command(ex.argv[0], ex.argv[1:]...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "LEASESIDE_LEASE="+lease, "LEASESIDE_TOKEN="+token)
				out, err := cmd.CombinedOutput()
				if _, ok := err.(*exec.ExitError); err != nil && !ok {
					t.Fatal(err)
				}
				return string(out), cmd.ProcessState.ExitCode()
			}
			const report = "rows: 42\n"
			first, fresh := t.TempDir(), t.TempDir()
			puts := backend.putCount()
			if out, code := run(first, "5"); code != 0 || !strings.Contains(out, "written under token 5") || backend.putCount() != puts+1 {
				t.Fatalf("under token 5: exit %d, %d puts: %s", code, backend.putCount()-puts, out)
			}
			if b, _ := os.ReadFile(filepath.Join(first, "report.txt")); string(b) != report {
				t.Fatalf("report.txt holds %q", b)
			}
			if out, code := run(first, "3"); code != 1 || !strings.Contains(out, "report.txt:") || !strings.Contains(out, "lost the lease") {
				t.Fatalf("token 3 after 5, the file: exit %d: %s", code, out)
			}
			if out, code := run(fresh, "4"); code != 1 || !strings.Contains(out, "store:") || !strings.Contains(out, "4") || !strings.Contains(out, "5") {
				t.Fatalf("token 4 after 5, the proxy: exit %d: %s", code, out)
			}
			if backend.putCount() != puts+1 {
				t.Fatalf("the backend took %d puts, want only token 5's", backend.putCount()-puts)
			}
		})
	}
}

// startFencedStores starts a PostgreSQL and a Redis server for the test,
// installs their fences with the real binary (leaseside fence postgres
// install, leaseside fence redis install) and creates the table the
// example script writes. It returns the database's URL and Redis's socket.
func startFencedStores(t *testing.T) (string, string) {
	t.Helper()
	pg, _ := stores.StartPostgres(t)
	redisURL, _ := stores.StartRedis(t)
	for _, args := range [][]string{{"fence", "postgres", "install", pg}, {"fence", "redis", "install", redisURL}} {
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("leaseside %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	cmdOutput(t, "psql", pg, "-XqAc", "CREATE TABLE report (name text PRIMARY KEY, body text NOT NULL)")
	return pg, strings.TrimPrefix(redisURL, "unix://")
}

// cmdOutput runs a command to its end and returns its stdout.
func cmdOutput(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return string(out)
}
