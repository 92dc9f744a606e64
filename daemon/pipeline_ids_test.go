package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// Review of 2026-12-03 (42f5178, ef1f4eb: the reader decodes the quick
// ops into its connection's own Request, reused for the next line): many
// connections pipeline every kind of request at once, quick and not,
// well-formed and not, and read as they go; every reply carries the id
// of the request it answers, once, with that op's answer (run it with
// -race: a handler that kept the reused request would race with the
// reader's next decode).
func TestPipelinedRepliesKeepTheirIDs(t *testing.T) {
	r := newRig(t)
	g, err := r.c.Acquire(ctxT(t), "pipe/held", ipc.AcquireOptions{TTL: 30 * time.Second, Owner: ipc.OwnerDetached})
	if err != nil {
		t.Fatal(err)
	}
	sock := r.c.Socket
	lines := []struct {
		line string
		want func(m map[string]json.RawMessage) bool
	}{
		{`{"id":%d,"op":"hello"}`, func(m map[string]json.RawMessage) bool { return m["server"] != nil }},
		{`{"id":%d,"op":"status"}`, func(m map[string]json.RawMessage) bool { return m["leases"] != nil && m["clock"] != nil }},
		{`{"id":%d,"op":"clock"}`, func(m map[string]json.RawMessage) bool { return m["clock"] != nil && m["leases"] == nil }},
		{`{"id":%d,"op":"check","lease":"pipe/held","token":"` + g.Token + `"}`, func(m map[string]json.RawMessage) bool {
			return string(m["lease"]) == `"pipe/held"` && m["valid_ms"] != nil
		}},
		{`{"id":%d,"op":"check","lease":"pipe/none-%[1]d"}`, func(m map[string]json.RawMessage) bool { return m["error"] != nil }},
		{`{"id":%d,"op":"watch","lease":"pipe/w%[1]d"}`, func(m map[string]json.RawMessage) bool { return string(m["ok"]) == "true" && m["error"] == nil }},
		{`{"id":%d,"op":"release","lease":"pipe/none-%[1]d"}`, func(m map[string]json.RawMessage) bool { return m["error"] != nil }},
		{`{"id":%d,"op":"status","bogus":1}`, func(m map[string]json.RawMessage) bool { return m["error"] != nil }},
		{`{"id":%d,"op":"hel\u006co"}`, func(m map[string]json.RawMessage) bool { return m["server"] != nil }},
	}
	const conns, perConn = 6, 600
	var wg sync.WaitGroup
	for ci := range conns {
		wg.Go(func() {
			nc, err := net.Dial("unix", sock)
			if err != nil {
				t.Error(err)
				return
			}
			defer nc.Close()
			kinds := map[uint64]int{}
			var mu sync.Mutex
			go func() {
				w := bufio.NewWriter(nc)
				for i := range perConn {
					id := uint64(ci*perConn + i + 1)
					k := (i * 7) % len(lines)
					mu.Lock()
					kinds[id] = k
					mu.Unlock()
					fmt.Fprintf(w, lines[k].line+"\n", id)
				}
				w.Flush()
			}()
			sc := bufio.NewScanner(nc)
			sc.Buffer(nil, 1<<20)
			seen := map[uint64]bool{}
			for len(seen) < perConn && sc.Scan() {
				var m map[string]json.RawMessage
				if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
					t.Errorf("reply %q: %v", sc.Text(), err)
					return
				}
				if m["event"] != nil {
					continue
				}
				var id uint64
				if err := json.Unmarshal(m["id"], &id); err != nil {
					t.Errorf("reply without an id: %s", sc.Text())
					return
				}
				mu.Lock()
				k, ok := kinds[id]
				mu.Unlock()
				if !ok || seen[id] {
					t.Errorf("connection %d: reply with id %d, which it did not send or was answered already: %s", ci, id, sc.Text())
					return
				}
				seen[id] = true
				if !lines[k].want(m) {
					t.Errorf("connection %d: the reply to %s is not its op's: %s", ci, fmt.Sprintf(lines[k].line, id), sc.Text())
					return
				}
			}
			if len(seen) < perConn {
				t.Errorf("connection %d: %d replies of %d (%v)", ci, len(seen), perConn, sc.Err())
			}
		})
	}
	wg.Wait()
}
