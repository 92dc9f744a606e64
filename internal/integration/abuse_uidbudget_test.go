package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// Review of 2026-12-03 (5012ede, socket_queue_bytes_per_uid), on a real
// `leaseside dev`: nobody leaves its whole per-uid budget of replies
// unread on 8 connections (releases of names it does not hold, answered
// by the handlers' goroutines, so that the replies queue in the daemon
// once the kernel's buffers are full, and none of its connections is read
// from any more), while root holds a lease of a 3 s term bound to its
// connection. Root's lease is renewed throughout (no lost event, its
// deadline moves on), root's status is answered, and nobody is logged as
// held back: one user's unread replies stall only that user.
func TestAbuseUIDBudgetStallsOnlyThatUser(t *testing.T) {
	t.Parallel()
	dev := abuseDev(t, `{"socket_queue_bytes": 65536, "socket_queue_bytes_per_uid": 262144, "socket_stall_timeout": "60s"}`)
	c := &ipc.Client{Socket: dev.socket}
	defer c.Close()
	events := make(chan *ipc.Event, 256)
	c.Notify(events)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	l, err := c.Acquire(ctx, "root/short", ipc.AcquireOptions{TTL: 9 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	first := l.Deadline()
	measure := answerTimes(t, dev.socket)
	out, stop := pyAbuser(t, dev.socket, `
import socket, sys, threading
out = threading.Lock()
def flood(i):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(sys.argv[1])
    c.settimeout(3)
    n = 0
    try:
        while True:
            c.sendall(b'{"id":%d,"op":"release","lease":"nobody/none-%d"}\n' % (n, n))
            n += 1
    except socket.timeout:
        with out:
            print("blocked", i, n, flush=True)
    sys.stdin.read()
ts = [threading.Thread(target=flood, args=(i,)) for i in range(8)]
for t in ts: t.start()
for t in ts: t.join()
`)
	defer stop()
	for range 8 {
		if line := readLineT(t, out); !strings.HasPrefix(line, "blocked") {
			t.Fatalf("abuser: %q", line)
		}
	}
	dev.waitLine(t, 0, "not reading the requests of a uid", "uid=65534")
	// More than a term of root's lease (about four renewals) while
	// nobody's budget is spent.
	wait := time.NewTimer(12 * time.Second)
	defer wait.Stop()
	for done := false; !done; {
		select {
		case ev := <-events:
			if ev.Event == ipc.EventLost || ev.Event == ipc.EventShortened {
				t.Fatalf("root's lease while nobody left its budget unread: %+v", ev)
			}
		case <-wait.C:
			done = true
		}
	}
	if g, err := c.Check(ctx, "root/short", l.Token); err != nil || l.Deadline() <= first {
		t.Fatalf("root's lease after a term of the flood: %v %v (deadline %v, first %v)", g, err, l.Deadline(), first)
	}
	median, slowest := measure()
	t.Logf("root's status while nobody's connections were held back: median %v, slowest %v", median, slowest)
	for line := range strings.SplitSeq(dev.tail(100000), "\n") {
		if strings.Contains(line, "not reading the requests of a uid") && strings.Contains(line, "uid=0 ") {
			t.Fatalf("root was held back for nobody's unread replies: %s", line)
		}
	}
}
