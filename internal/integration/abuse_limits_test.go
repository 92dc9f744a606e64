package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// More of issue 9's local abuse, on a real `leaseside dev` (abuseDev):
// the per-uid limits on requests in flight and on leases, and what status
// and watch show a user when there is no ACL.

// Requests in flight: nobody keeps its limit of acquires waiting for a
// lease root holds; more, on that connection or another, are refused at
// once with resource_exhausted while a quick op (hello) is still served,
// root is answered throughout and still acquires, and once root releases
// the lease and nobody's acquires are answered, nobody may send more.
func TestAbuseRequestsInFlight(t *testing.T) {
	t.Parallel()
	const limit, sent = 8, 20
	dev := abuseDev(t, fmt.Sprintf(`{"max_requests_per_uid": %d}`, limit))
	cli(t, dev.socket, "acquire", "jobs/held", "--detached").must(t, 0)
	measure := answerTimes(t, dev.socket)
	out, stop := pyAbuser(t, dev.socket, `
import json, socket, sys
limit, sent = int(sys.argv[2]), int(sys.argv[3])
def conn():
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(sys.argv[1])
    c.settimeout(900)
    return c, c.makefile("rb")
def send(c, **req):
    c.sendall(json.dumps(req).encode() + b"\n")
def code(m):
    return "ok" if m.get("ok") else m.get("error", {}).get("code")
c, r = conn()
for i in range(sent):
    send(c, id=i + 1, op="acquire", lease="jobs/held", ttl_ms=10000, wait_ms=600000)
refused = 0
while refused < sent - limit:
    m = json.loads(r.readline())
    if code(m) != "resource_exhausted":
        print("unexpected", m, flush=True)
        sys.exit(1)
    refused += 1
c2, r2 = conn()
send(c2, id=1, op="acquire", lease="jobs/other", ttl_ms=10000)
send(c2, id=2, op="hello")
print("refused", refused, code(json.loads(r2.readline())), code(json.loads(r2.readline())), flush=True)
codes = [code(json.loads(r.readline())) for _ in range(limit)]
send(c, id=100, op="acquire", lease="jobs/after", ttl_ms=10000)
print("answered", codes.count("ok"), code(json.loads(r.readline())), flush=True)
sys.stdin.read()
`, fmt.Sprint(limit), fmt.Sprint(sent))
	defer stop()
	if got, want := readLineT(t, out), fmt.Sprintf("refused %d resource_exhausted ok", sent-limit); got != want {
		t.Fatalf("abuser: %q, want %q: the requests over the limit refused at once, on every connection, a hello served", got, want)
	}
	// Nothing else changed: root acquires, and the held lease is root's,
	// with nobody's acquires still waiting for it.
	cli(t, dev.socket, "acquire", "jobs/root", "--detached").must(t, 0)
	if got := names(t, cli(t, dev.socket, "status", "--json").must(t, 0)); !slices.Equal(got, []string{"jobs/held", "jobs/root"}) {
		t.Fatalf("root's status with nobody at its limit: %v, want jobs/held and jobs/root", got)
	}
	median, slowest := measure()
	t.Logf("nobody: %d acquires in flight (its limit), %d refused; root's status meanwhile: median %v, slowest %v", limit, sent-limit, median, slowest)
	cli(t, dev.socket, "release", "jobs/held").must(t, 0)
	if got, want := readLineT(t, out), fmt.Sprintf("answered %d ok", limit); got != want {
		t.Fatalf("abuser: %q, want %q: its waiting acquires granted in turn, then a new request served", got, want)
	}
	dev.waitLine(t, 0, "refusing requests of a uid over its limit", "uid=65534")
}

// Leases: nobody floods the daemon with acquires of distinct names on one
// connection; it gets its limit of leases, the rest resource_exhausted,
// root is answered throughout and still acquires, and nobody's status
// shows its leases.
func TestAbuseLeasesPerUID(t *testing.T) {
	t.Parallel()
	const limit, sent = 50, 300
	dev := abuseDev(t, fmt.Sprintf(`{"max_leases_per_uid": %d}`, limit))
	measure := answerTimes(t, dev.socket)
	out, stop := pyAbuser(t, dev.socket, `
import json, socket, sys
sent = int(sys.argv[2])
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect(sys.argv[1])
c.settimeout(90)
r = c.makefile("rb")
for i in range(sent):
    c.sendall(json.dumps({"id": i + 1, "op": "acquire", "lease": "flood/%d" % i, "ttl_ms": 30000}).encode() + b"\n")
codes = {}
for _ in range(sent):
    m = json.loads(r.readline())
    k = "ok" if m.get("ok") else m.get("error", {}).get("code")
    codes[k] = codes.get(k, 0) + 1
print(" ".join("%s=%d" % kv for kv in sorted(codes.items())), flush=True)
sys.stdin.read()
`, fmt.Sprint(sent))
	defer stop()
	if got, want := readLineT(t, out), fmt.Sprintf("ok=%d resource_exhausted=%d", limit, sent-limit); got != want {
		t.Fatalf("nobody's %d acquires: %s, want %s", sent, got, want)
	}
	cli(t, dev.socket, "acquire", "jobs/root", "--detached").must(t, 0)
	median, slowest := measure()
	t.Logf("nobody: %d acquires, %d granted (its limit), %d refused; root's status meanwhile: median %v, slowest %v", sent, limit, sent-limit, median, slowest)
	if got := names(t, nobodyCLI(t, dev.socket, "status", "--json").must(t, 0)); len(got) != limit || slices.Contains(got, "jobs/root") {
		t.Fatalf("nobody's status shows %d leases (%v), want its %d", len(got), got, limit)
	}
	if got := names(t, cli(t, dev.socket, "status", "--json").must(t, 0)); len(got) != limit+1 {
		t.Fatalf("root's status shows %d leases, want %d", len(got), limit+1)
	}
}

// With no ACL every socket user may use every name, and still status and
// watch show a user only the leases it acquired; root sees all.
func TestAbuseVisibilityWithoutACL(t *testing.T) {
	t.Parallel()
	dev := abuseDev(t, `{}`)
	watch := nobodyWatch(t, dev.socket)
	measure := answerTimes(t, dev.socket)
	cli(t, dev.socket, "acquire", "root/private", "--detached").must(t, 0)
	nobodyCLI(t, dev.socket, "acquire", "jobs/mine", "--detached").must(t, 0)
	if got := names(t, nobodyCLI(t, dev.socket, "status", "--json").must(t, 0)); !slices.Equal(got, []string{"jobs/mine"}) {
		t.Fatalf("nobody's status shows %v, want only its own jobs/mine", got)
	}
	if got := names(t, cli(t, dev.socket, "status", "--json").must(t, 0)); !slices.Equal(got, []string{"jobs/mine", "root/private"}) {
		t.Fatalf("root's status shows %v, want both", got)
	}
	// root's release comes first, so nobody's watch, which shows its
	// own release after it, had its chance to show root's.
	cli(t, dev.socket, "release", "root/private").must(t, 0)
	nobodyCLI(t, dev.socket, "release", "jobs/mine").must(t, 0)
	seen := 0
	for {
		line := readLineT(t, watch)
		if strings.Contains(line, "root/private") {
			t.Fatalf("nobody's watch saw root's lease: %s", line)
		}
		if strings.Contains(line, "jobs/mine") {
			seen++
		}
		if strings.Contains(line, "jobs/mine") && strings.Contains(line, "released") {
			break
		}
	}
	median, slowest := measure()
	t.Logf("nobody's watch saw %d events of its own lease and none of root's; root's status meanwhile: median %v, slowest %v", seen, median, slowest)
}

// nobodyWatch subscribes to every event on socket as nobody, and returns
// the event lines once the daemon has answered the watch request (so
// nothing after the call is missed).
func nobodyWatch(t *testing.T, socket string) *bufio.Reader {
	t.Helper()
	out, stop := pyAbuser(t, socket, `
import json, socket, sys, threading
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect(sys.argv[1])
c.sendall(b'{"id":1,"op":"watch"}\n')
r = c.makefile("rb")
while True:
    m = json.loads(r.readline())
    if m.get("id") == 1:
        print("watching", m.get("ok"), flush=True)
        break
def pump():
    for line in r:
        sys.stdout.write(line.decode())
        sys.stdout.flush()
threading.Thread(target=pump, daemon=True).start()
sys.stdin.read()
`)
	t.Cleanup(stop)
	if got := readLineT(t, out); got != "watching True" {
		t.Fatalf("nobody's watch: %q", got)
	}
	return out
}

// nobodyCLI runs the leaseside CLI as nobody against socket.
func nobodyCLI(t *testing.T, socket string, args ...string) result {
	t.Helper()
	cmd := asNobody(bin, append([]string{args[0], "--socket", socket}, args[1:]...)...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if _, ok := err.(interface{ ExitCode() int }); err != nil && !ok {
		t.Fatal(err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: o.String(), stderr: e.String()}
}

// names lists, sorted, the leases of `status --json` output.
func names(t *testing.T, r result) []string {
	t.Helper()
	var s struct {
		Leases []ipc.Grant `json:"leases"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("status: %v: %s", err, r.stdout)
	}
	var ns []string
	for _, g := range s.Leases {
		ns = append(ns, g.Lease)
	}
	slices.Sort(ns)
	return ns
}

// Watchers that do not read: nobody opens watch connections it never
// reads and churns its own leases (acquire, release) so that every
// watcher is sent released events, which it may not miss. Each watcher
// is disconnected once it has twice its budget unread, with the reason
// logged (the stall timeout is 10 minutes here: it plays no part), and
// root is answered throughout. (It used to queue them for each watcher
// until the stall timeout. ipc's TestNonReadingWatcherIsCutOff bounds
// the bytes queued; the daemon's resident set is logged here, not
// bounded: dev's in-memory raft log grows with the churn itself.)
func TestAbuseNonReadingWatchers(t *testing.T) {
	t.Parallel()
	const watchers = 20
	dev := abuseDev(t, `{"socket_queue_bytes": 65536, "socket_stall_timeout": "10m"}`)
	rss0 := rss(t, dev.pid())
	peak := peakRSS(t, dev.pid())
	measure := answerTimes(t, dev.socket)
	out, stop := pyAbuser(t, dev.socket, `
import json, select, socket, sys, threading
path, watchers = sys.argv[1], int(sys.argv[2])
ws = []
for i in range(watchers):
    w = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    w.connect(path)
    w.sendall(b'{"id":1,"op":"watch"}\n')
    ws.append(w)
p = select.poll()
for w in ws:
    p.register(w, select.POLLRDHUP)
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect(path)
r = c.makefile("rb")
closed, pairs = set(), 0
while len(closed) < watchers and pairs < 20000:
    for op in ("acquire", "release"):  # in turn: requests on one connection run at once
        reqs = [{"id": 2 * (pairs + k) + 1, "op": op, "lease": "churn/%d" % k} for k in range(50)]
        if op == "acquire":
            for q in reqs: q["ttl_ms"] = 5000
        c.sendall(b"".join(json.dumps(q).encode() + b"\n" for q in reqs))
        for _ in reqs:
            m = json.loads(r.readline())
            while "id" not in m:  # an event of the churning connection's own leases
                m = json.loads(r.readline())
            if not m.get("ok"):
                print("failed", m, flush=True)
                sys.exit(1)
    pairs += 50
    for fd, ev in p.poll(0):
        closed.add(fd)
print("closed", len(closed), "pairs", pairs, flush=True)
sys.stdin.read()
`, fmt.Sprint(watchers))
	defer stop()
	line := readLineT(t, out)
	var closed, pairs int
	if _, err := fmt.Sscanf(line, "closed %d pairs %d", &closed, &pairs); err != nil || closed != watchers {
		t.Fatalf("abuser: %q; want all %d watchers disconnected", line, watchers)
	}
	median, slowest := measure()
	top := peak()
	t.Logf("%d non-reading watchers cut off after %d acquire-release pairs; daemon RSS %d MiB before, at most %d MiB meanwhile; root's status meanwhile: median %v, slowest %v",
		watchers, pairs, rss0>>20, top>>20, median, slowest)
	logged := 0
	for _, l := range dev.out.all() {
		if containsAll("closing a connection that left more events unread", "uid=65534")(l.v) {
			logged++
		}
	}
	if logged != watchers {
		t.Fatalf("%d disconnects logged with their reason, want %d", logged, watchers)
	}
}

// peakRSS samples a process's resident set every 50ms from now on, and
// returns a func giving the highest seen.
func peakRSS(t *testing.T, pid int) func() int64 {
	t.Helper()
	var mu sync.Mutex
	var top int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
			if err != nil {
				return
			}
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
					kb, _ := strconv.ParseInt(f[1], 10, 64)
					mu.Lock()
					top = max(top, kb<<10)
					mu.Unlock()
				}
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return func() int64 {
		mu.Lock()
		defer mu.Unlock()
		return top
	}
}
