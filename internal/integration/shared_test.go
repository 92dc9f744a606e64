package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// heldProc is a process that holds a lease until its stdin closes, and
// printed its token first.
type heldProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	token uint64
	out   *bufio.Reader
	done  chan error
}

// startHolder starts cmd, whose first line of output is its lease's token,
// and returns once it printed it.
func startHolder(t *testing.T, cmd *exec.Cmd) *heldProc {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &heldProc{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), done: make(chan error, 1)}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
	})
	line, err := p.out.ReadString('\n')
	if err != nil {
		t.Fatalf("%v printed no token: %v; stderr: %s", cmd.Args, err, stderr.String())
	}
	if p.token, err = strconv.ParseUint(strings.Fields(line)[0], 10, 64); err != nil {
		t.Fatalf("%v printed %q, not a token", cmd.Args, line)
	}
	go func() { p.done <- cmd.Wait() }()
	return p
}

// end closes the holder's stdin and waits for it to exit 0.
func (p *heldProc) end(t *testing.T) {
	t.Helper()
	p.stdin.Close()
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("%v: %v", p.cmd.Args, err)
		}
	case <-time.After(timeout):
		t.Fatalf("%v did not exit", p.cmd.Args)
	}
}

// Shared (read/write) locks on the real binary with both clients: readers
// from `leaseside run --shared`, `acquire --shared`, the Go client and the
// Python client hold one name together, each with its own token; a writer
// is refused beside them (exit 75) and queues with --wait; while it
// waits, a new reader is refused; when the readers go, the writer runs
// with a token above every reader's. --shared with --limit is a usage
// error.
func TestSharedLockWithTheBinaryAndBothClients(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is needed (make deps installs it)")
	}
	socket := tempSocket(t)
	startDev(t, socket, t.TempDir())
	const name = "rw/db"
	env := append(os.Environ(), "LEASESIDE_SOCKET="+socket, "PYTHONDONTWRITEBYTECODE=1")
	hold := `echo "$LEASESIDE_TOKEN"; exec cat`
	runReader := startHolder(t, exec.Command(bin, "run", name, "--socket", socket, "--shared", "--", "sh", "-c", hold))
	det := strings.TrimSpace(cli(t, socket, "acquire", name, "--shared", "--detached").must(t, 0).stdout)
	detToken, _ := strconv.ParseUint(det, 10, 64)
	py := exec.Command("python3", "-c", `import sys, leaseside
c = leaseside.Client()
l = c.acquire("`+name+`", ttl=10, shared=True)
assert l.shared, l.shared
print(l.token, l.holders, flush=True)
sys.stdin.read()
c.close()`)
	py.Dir, py.Env = filepath.Join("..", "..", "clients", "python"), env
	pyReader := startHolder(t, py)
	goClient := &ipc.Client{Socket: socket}
	t.Cleanup(func() { goClient.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	goReader, err := goClient.Acquire(ctx, name, ipc.AcquireOptions{TTL: 10 * time.Second, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	goToken, _ := goReader.TokenValue()
	if !goReader.Shared || goReader.Holders != 4 {
		t.Fatalf("the Go client's reader, the fourth: %+v", goReader.Grant)
	}
	readers := []uint64{runReader.token, detToken, pyReader.token, goToken}

	st := cli(t, socket, "status").must(t, 0)
	if strings.Count(st.stdout, "shared") != 4 {
		t.Fatalf("status does not show four shared grants:\n%s", st.stdout)
	}
	if r := cli(t, socket, "acquire", name, "--detached").must(t, 75); !strings.Contains(r.stderr, "held shared") {
		t.Fatalf("a writer beside readers: %s", r.stderr)
	}
	if r := cli(t, socket, "acquire", name, "--shared", "--limit", "2").must(t, 2); !strings.Contains(r.stderr, "--shared and --limit 2") {
		t.Fatalf("--shared --limit 2: %s", r.stderr)
	}

	writer := exec.Command(bin, "run", name, "--socket", socket, "--wait", "1m", "--", "sh", "-c", hold)
	wout := make(chan *heldProc, 1)
	go func() { wout <- startHolder(t, writer) }()
	// Once the writer waits (the leader lists it), a new reader is refused.
	for {
		var page struct {
			Leases []ipc.ClusterLease `json:"leases"`
		}
		r := cli(t, socket, "leases", "--json").must(t, 0)
		if err := json.Unmarshal([]byte(r.stdout), &page); err != nil {
			t.Fatalf("leases --json: %v: %s", err, r.stdout)
		}
		if len(page.Leases) == 1 && page.Leases[0].Waiters == 1 {
			if !page.Leases[0].Shared || len(page.Leases[0].Holders) != 4 {
				t.Fatalf("leases: %+v", page.Leases[0])
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the writer never queued: %s", r.stdout)
		}
	}
	if r := cli(t, socket, "acquire", name, "--shared", "--detached").must(t, 75); !strings.Contains(r.stderr, "a writer waits") {
		t.Fatalf("a reader behind a waiting writer: %s", r.stderr)
	}
	select {
	case <-wout:
		t.Fatal("the writer ran beside readers")
	default:
	}
	runReader.end(t)
	pyReader.end(t)
	cli(t, socket, "release", name, "--token", det).must(t, 0)
	if err := goClient.Release(ctx, name); err != nil && !errors.Is(err, ipc.ErrNotHeld) {
		t.Fatal(err)
	}
	var w *heldProc
	select {
	case w = <-wout:
	case <-ctx.Done():
		t.Fatal("the writer did not get the lease once the readers were gone")
	}
	for _, r := range readers {
		if w.token <= r {
			t.Fatalf("writer token %d not above reader token %d", w.token, r)
		}
	}
	w.end(t)
}
