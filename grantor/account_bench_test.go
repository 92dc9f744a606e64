package grantor

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// What one unit of each FSM-held limit costs in the heap at the largest
// names (lease and owner 256 bytes, session 64), for docs/limits.md:
// go test -run '^$' -bench BenchmarkAccountCost ./grantor/
func BenchmarkAccountCost(b *testing.B) {
	name := func(prefix string, i int) string {
		s := fmt.Sprintf("%s%d-", prefix, i)
		return s + strings.Repeat("n", maxLeaseName-len(s))
	}
	owner := strings.Repeat("o", maxOwner)
	session := func(i int) string { return fmt.Sprintf("%064d", i) }
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const n = 8192
	for _, tc := range []struct {
		name string
		fill func(f *testFSM)
	}{
		{"outcome", func(f *testFSM) { // releases of unheld names, 1,024 per session
			for i := range n {
				f.apply(cmdRelease3, releaseCmd{ID: requestID{Session: session(i / 1024), Seq: uint64(i%1024 + 1)}, Lease: name("r", i), Owner: owner, Token: 1, Identity: "evil"})
			}
		}},
		{"lease", func(f *testFSM) { // one grant each, 64 per session
			for i := range n {
				f.apply(cmdAcquire6, acquireCmd{ID: requestID{Session: session(i / 64), Seq: uint64(i%64 + 1)}, Lease: name("l", i), Owner: owner, TTL: time.Minute, Identity: "evil"})
			}
		}},
		{"session", func(f *testFSM) { // a grant and its release each: one session, two outcomes
			for i := range n {
				f.apply(cmdAcquire6, acquireCmd{ID: requestID{Session: session(i), Seq: 1}, Lease: name("s", i), Owner: owner, TTL: time.Minute, Identity: "evil"})
				f.apply(cmdRelease3, releaseCmd{ID: requestID{Session: session(i), Seq: 2}, Lease: name("s", i), Owner: owner, Token: uint64(i + 1), Identity: "evil"})
			}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				f := newTestFSM()
				before := heap()
				tc.fill(f)
				after := heap()
				b.ReportMetric(float64(after-before)/n, "B/"+tc.name)
				runtime.KeepAlive(f)
			}
		})
	}
}

// The leader's part: a watched name with its queued snapshot, and a
// waiter (without its call).
func BenchmarkAccountCostWatchName(b *testing.B) {
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const n = 4096
	names := make([]string, n)
	for i := range names {
		s := fmt.Sprintf("w%d-", i)
		names[i] = s + strings.Repeat("n", maxLeaseName-len(s))
	}
	for range b.N {
		f := newFSM()
		hub := newWatchHub(f, newAccounts(AccountLimits{}, f, nil))
		w, err := hub.open(Identity{Role: RoleSidecar, Name: "x"})
		if err != nil {
			b.Fatal(err)
		}
		before := heap()
		for i := 0; i < n; i += 1024 {
			if err := w.add(append([]string(nil), names[i:i+1024]...)); err != nil {
				b.Fatal(err)
			}
		}
		after := heap()
		b.ReportMetric(float64(after-before)/n, "B/name")
		b.ReportMetric(float64(w.bytes)/n, "queued-B/name")
		w.close()
	}
}

// The leader's check of an acquire against its identity's account, with
// that identity holding 10,000 sessions (the hosts bench's one
// certificate for 10,000 simulated hosts, docs/scale.md): with limits it
// walks the identity's sessions to count their outcomes; without (the
// bench's account) it counts nothing.
// go test -run '^$' -bench BenchmarkCheckRequestManySessions ./grantor/
func BenchmarkCheckRequestManySessions(b *testing.B) {
	const sessions = 10000
	f := newTestFSM()
	for i := range sessions {
		f.apply(cmdAcquire6, acquireCmd{ID: requestID{Session: fmt.Sprintf("s%d", i), Seq: 1}, Lease: fmt.Sprintf("l%d", i),
			Owner: "o", TTL: time.Minute, Identity: "hosts"})
	}
	id := Identity{Role: RoleSidecar, Name: "hosts"}
	for _, tc := range []struct {
		name   string
		limits Limits
	}{
		{"limited", Limits{Sessions: 2 * sessions, Outcomes: 4 * sessions, Leases: 2 * sessions}},
		{"unlimited", Limits{}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			a := newAccounts(AccountLimits{Identities: map[string]Limits{id.String(): tc.limits}}, f.fsm, nil)
			for i := range b.N {
				if err := a.checkRequest(id, requestID{Session: "new", Seq: uint64(i + 1)}, 0, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
