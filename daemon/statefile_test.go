package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// stateDirRig is a Daemon made by New with a state directory, never run:
// tests step its leases and call writeState by hand.
type stateDirRig struct {
	d     *Daemon
	clock *clockwatch.Fake
	dir   string
	sess  []*gsession
	n     int
}

func newStateDirRig(t testing.TB) *stateDirRig {
	t.Helper()
	clock := clockwatch.NewFake(clockwatch.System.Now())
	cfg := DefaultConfig()
	cfg.Grantors = []string{"127.0.0.1:1"} // never contacted
	cfg.Clock = clock
	cfg.StateDir = filepath.Join(t.TempDir(), "state")
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.stop()
		if d.ps.logf != nil {
			d.ps.logf.Close()
		}
		d.unlockState()
	})
	return &stateDirRig{d: d, clock: clock, dir: cfg.StateDir,
		sess: []*gsession{d.g.sessionFor(9 * time.Second), d.g.sessionFor(15 * time.Second)}}
}

// grant enters a held lease of session s, granted now; short: for a
// quarter of the term (the grantor applied a shorter one).
func (r *stateDirRig) grant(s *gsession, noRenew, short bool) *lease {
	r.n++
	now := r.clock.Now()
	l := &lease{name: fmt.Sprintf("jobs/%07d", r.n), token: uint64(r.n), ttl: s.ttl, sess: s, owner: ownerDetached,
		ownerID: fmt.Sprintf("detached:%d", r.n), uid: 1000, noRenew: noRenew, t0: now, deadline: now.Add(s.ttl * 9 / 10), stopWatch: func() {}}
	if short {
		l.deadline = now.Add(s.ttl / 4)
	}
	r.d.mu.Lock()
	r.d.stepLocked(l, evGranted, "", now)
	r.d.mu.Unlock()
	return l
}

// renew renews session s as a keepalive sent now would (applySessionLocked).
func (r *stateDirRig) renew(s *gsession) {
	now := r.clock.Now()
	r.d.mu.Lock()
	for _, l := range r.d.leases {
		if l.sess == s && l.follower() {
			l.t0, l.deadline = now, now.Add(s.ttl*9/10)
			l.renewals++
			r.d.stepLocked(l, evRenewed, "", now)
		}
	}
	r.d.mu.Unlock()
	r.d.persistLater()
}

// write is one pass of persistLoop.
func (r *stateDirRig) write(t testing.TB) {
	t.Helper()
	if err := r.d.writeState(bootClock{ID: "boot"}); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestRenewalRoundCopiesNoLease: a write after a renewal round of 10,000
// leases (only deadlines changed) appends nothing to the lease log and
// allocates a bounded number of objects, whatever the number of leases.
// Before the change every round copied and wrote the whole table:
// 12,504 allocations and 2.46 MB a round at 10,000 leases, 8.6 ms
// (BenchmarkRenewalRoundWrite's forerunner on format 1); after, 39
// allocations, 7 KB, 0.1 ms.
func TestRenewalRoundCopiesNoLease(t *testing.T) {
	r := newStateDirRig(t)
	for i := range 10000 {
		r.grant(r.sess[i%2], false, false)
	}
	r.write(t)
	logPath := filepath.Join(r.dir, leaseLogName)
	size := fileSize(t, logPath)
	if size < 10000*100 {
		t.Fatalf("the lease log of 10,000 leases has %d bytes", size)
	}
	allocs := testing.AllocsPerRun(5, func() {
		r.clock.Advance(3 * time.Second)
		r.renew(r.sess[0])
		r.renew(r.sess[1])
		r.write(t)
	})
	if got := fileSize(t, logPath); got != size {
		t.Fatalf("renewal rounds wrote %d bytes to the lease log", got-size)
	}
	// The renewals themselves allocate nothing per lease here; the write
	// a few dozen objects (the sessions file).
	if allocs > 200 {
		t.Fatalf("a renewal round and its write allocated %.0f objects at 10,000 leases", allocs)
	}
	st, torn, err := loadState(r.dir)
	if err != nil || torn != 0 || len(st.Leases) != 10000 {
		t.Fatalf("read back: %v, %d torn, %d leases", err, torn, len(st.Leases))
	}
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	for _, s := range st.Leases {
		if l := r.d.leases[s.Name]; l == nil || s.DeadlineNs != l.deadline.Nanoseconds() {
			t.Fatalf("%s restored with deadline %d, want its renewed %v", s.Name, s.DeadlineNs, l)
		}
	}
}

// BenchmarkRenewalRoundWrite is the state write after a renewal round of
// 10,000 leases.
func BenchmarkRenewalRoundWrite(b *testing.B) {
	r := newStateDirRig(b)
	for range 10000 {
		r.grant(r.sess[0], false, false)
	}
	r.write(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r.clock.Advance(time.Second)
		r.renew(r.sess[0])
		r.write(b)
	}
}

// TestStateDeadlineNeverLater walks random histories of grants, renewal
// rounds, shortened deadlines, owners stopped, renewals on request, ends,
// whole writes and writes cut between the log and the sessions file (a
// crash), and reads the state back at every step as a new process would:
// no restored lease has a deadline later than the daemon's own for it
// (DESIGN.md section 2), and no lease is restored that ended before the
// last log write. After a whole write every valid lease is restored.
func TestStateDeadlineNeverLater(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 7))
			r := newStateDirRig(t)
			d := r.d
			ended := map[string]bool{} // table key and token: ended since the last log write
			pick := func() *lease {
				for _, l := range d.leases {
					if rnd.IntN(4) == 0 {
						return l
					}
				}
				return nil
			}
			for step := range 300 {
				now := r.clock.Now()
				whole := false
				switch op := rnd.IntN(10); op {
				case 0, 1: // a third with a shorter term than asked, the grantor's
					r.grant(r.sess[rnd.IntN(2)], rnd.IntN(5) == 0, rnd.IntN(3) == 0)
				case 2:
					r.renew(r.sess[rnd.IntN(2)])
				case 3: // a drift found late: shortened, and written (as before)
					d.mu.Lock()
					if l := pick(); l != nil && l.deadline.Sub(now) > time.Second {
						l.deadline = l.deadline.Add(-time.Second)
						d.stepLocked(l, evShortened, ipc.ReasonDrift, now)
					}
					d.mu.Unlock()
					r.write(t)
					whole = true
				case 4:
					d.mu.Lock()
					if l := pick(); l != nil && l.state == stateHeld {
						d.stepLocked(l, evOwnerStopped, ipc.ReasonOwnerStopped, now)
					}
					d.mu.Unlock()
				case 5: // a renewal on request of one that is not renewed by itself
					d.mu.Lock()
					if l := pick(); l != nil && !l.follower() {
						l.t0, l.deadline = now, now.Add(l.ttl*9/10)
						d.stepLocked(l, evRenewed, "", now)
						d.logPutLocked(l)
					}
					d.mu.Unlock()
				case 6:
					d.mu.Lock()
					if l := pick(); l != nil {
						ended[fmt.Sprint(l.tableKey(), l.token)] = true
						d.stepLocked(l, evGiveBack, "test", now)
					}
					d.mu.Unlock()
				case 7:
					r.clock.Advance(time.Duration(rnd.IntN(2000)) * time.Millisecond)
				case 8:
					r.write(t)
					whole = true
				case 9: // a crash after the log, before the sessions file
					d.mu.Lock()
					recs, fresh, _, _ := d.takeLocked()
					d.mu.Unlock()
					if err := d.writeLog(recs, fresh); err != nil {
						t.Fatal(err)
					}
				}
				if whole || rnd.IntN(10) == 0 {
					clear(ended) // the last log write holds every end
					if !whole {
						r.write(t)
						whole = true
					}
				}
				st, _, err := loadState(r.dir)
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if st == nil {
					continue
				}
				d.mu.Lock()
				valid := 0
				for _, l := range d.leases {
					if l.state.valid() {
						valid++
					}
				}
				for _, s := range st.Leases {
					l := d.leases[s.tableKey()]
					if l == nil || l.token != s.Token || !l.state.valid() {
						if !ended[fmt.Sprint(s.tableKey(), s.Token)] {
							t.Fatalf("step %d: %s (token %d) restored, though it ended before the last log write", step, s.Name, s.Token)
						}
						continue
					}
					if s.DeadlineNs > l.deadline.Nanoseconds() {
						t.Fatalf("step %d: %s restored with deadline %d, later than the daemon's %d (by %v)", step, s.Name,
							s.DeadlineNs, l.deadline.Nanoseconds(), time.Duration(s.DeadlineNs-l.deadline.Nanoseconds()))
					}
				}
				if whole && len(st.Leases) != valid {
					t.Fatalf("step %d: after a whole write %d leases restored, %d valid", step, len(st.Leases), valid)
				}
				d.mu.Unlock()
			}
		})
	}
}

// TestLeaseLogCutShortOrBroken: a last log line cut short (a write the
// daemon did not finish, so told to nobody) is ignored and the rest
// restored; a line that cannot be read before the end refuses the whole
// state, as does a format this daemon does not know, and a daemon
// started on it holds nothing and removes it.
func TestLeaseLogCutShortOrBroken(t *testing.T) {
	r := newStateDirRig(t)
	for range 3 {
		r.grant(r.sess[0], false, false)
	}
	r.write(t)
	logPath := filepath.Join(r.dir, leaseLogName)
	whole, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cut := append(append([]byte{}, whole...), `{"seq":99,"put":{"name":"jobs/cut","tok`...)
	if err := os.WriteFile(logPath, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	st, torn, err := loadState(r.dir)
	if err != nil || torn != 1 || len(st.Leases) != 3 {
		t.Fatalf("a last line cut short: %v, %d torn, %d leases (want nil, 1, 3)", err, torn, len(st.Leases))
	}

	lines := strings.SplitAfter(string(whole), "\n")
	broken := lines[0] + lines[1] + "{\"seq\":2,\"put\n" + strings.Join(lines[2:], "")
	if err := os.WriteFile(logPath, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadState(r.dir); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("a broken line before the end: %v, want an error naming line 3", err)
	}

	sessPath := filepath.Join(r.dir, sessionsFileName)
	b, err := os.ReadFile(sessPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sessPath, []byte(strings.Replace(string(b), `"version":2`, `"version":3`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadState(r.dir); err == nil || !strings.Contains(err.Error(), "format version 3") {
		t.Fatalf("sessions file of version 3: %v, want format version 3 refused", err)
	}

	cfg := r.d.cfg
	r.d.unlockState() // the first process ended
	d2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d2.stop(); d2.unlockState() })
	if len(d2.leases) != 0 {
		t.Fatalf("a daemon on a refused state holds %d leases", len(d2.leases))
	}
	if _, err := os.Stat(sessPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused state was kept: %v", err)
	}
}

// A daemon of this version started on format 1's file (an upgrade)
// resumes its leases with their deadlines, writes format 2 and removes the
// old file. Fails if format 1 is not read: the lease is not held.
func TestRestartFromFormat1(t *testing.T) {
	r := newRestartRig(t)
	_, stop1 := r.start(t)
	c := &ipc.Client{Socket: r.sock}
	ctx := ctxT(t)
	l, err := c.Acquire(ctx, "det", ipc.AcquireOptions{TTL: 9 * time.Second, Owner: ipc.OwnerDetached})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	stop1()
	r.writeV1(t, r.state(t))
	_, stop2 := r.start(t)
	c2 := &ipc.Client{Socket: r.sock}
	t.Cleanup(func() { c2.Close() })
	g, err := c2.Check(ctx, "det", l.Token)
	if err != nil || g.DeadlineBoottimeNs != l.DeadlineBoottimeNs {
		t.Fatalf("after the upgrade: %+v, %v; want the lease with deadline %d", g, err, l.DeadlineBoottimeNs)
	}
	stop2()
	if _, err := os.Stat(filepath.Join(r.cfg.StateDir, stateFileNameV1)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("format 1's file is still there: %v", err)
	}
	if st := r.state(t); st.Version != stateVersion || len(st.Leases) != 1 {
		t.Fatalf("state after the upgrade: version %d, %d leases", st.Version, len(st.Leases))
	}
}

// TestStateLeaseFactsChecked: a log line whose lease the table cannot
// hold (an unknown owner binding, a limit over ipc.MaxLimit, a uid beyond
// 32 bits) refuses the state, rather than being cut to fit.
func TestStateLeaseFactsChecked(t *testing.T) {
	for _, tc := range []struct{ name, put, want string }{
		{"owner", `"owner":"nobody","uid":1`, `owner "nobody"`},
		{"limit", `"owner":"detached","uid":1,"limit":257`, "limit 257"},
		{"uid", `"owner":"detached","uid":4294967296`, "uid 4294967296"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newStateDirRig(t)
			r.grant(r.sess[0], false, false)
			r.write(t)
			f, err := os.OpenFile(filepath.Join(r.dir, leaseLogName), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			line := `{"seq":99,"put":{"name":"x","token":1,"ttl_ns":9000000000,"session_id":"s","owner_id":"o",` + tc.put +
				`,"t0_boottime_ns":1,"deadline_boottime_ns":2}}` + "\n"
			if _, err := f.WriteString(line); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if _, _, err := loadState(r.dir); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("loadState: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// Review rev1 finding 3: a follower lease whose deadline a drift found
// late shortened, and then a crash after the next log append but before
// its sessions file: the lease's last line was covered by the sessions
// file before the shortening, so it took that file's deadline for its
// session, later than the shortened one the daemon (and the lease's owner,
// told at once) believed. Fails without a put of the shortened follower's
// deadline: restored 1s later than the daemon's.
func TestShortenedFollowerThenCutWrite(t *testing.T) {
	r := newStateDirRig(t)
	d := r.d
	l := r.grant(r.sess[0], false, false)
	r.write(t)
	now := r.clock.Now()
	d.mu.Lock()
	l.deadline = l.deadline.Add(-time.Second)
	d.stepLocked(l, evShortened, ipc.ReasonDrift, now)
	recs, fresh, _, _ := d.takeLocked() // a crash after the log, before the sessions file
	d.mu.Unlock()
	if err := d.writeLog(recs, fresh); err != nil {
		t.Fatal(err)
	}
	st, _, err := loadState(r.dir)
	if err != nil || st == nil || len(st.Leases) != 1 {
		t.Fatalf("state: %v (%v)", st, err)
	}
	if got := st.Leases[0].DeadlineNs; got > l.deadline.Nanoseconds() {
		t.Fatalf("restored deadline %v later than the shortened one the daemon believed", time.Duration(got-l.deadline.Nanoseconds()))
	}
}

// Review rev1 finding 4: format 1's file beside this format's files, and
// newer (this version, then an older one that wrote format 1, then this
// one again: a rollback undone): the newer state is restored, not this
// version's stale files, and format 1's file goes at the first write, so
// that a later rollback does not restore it stale in its turn. A format 1
// file of another boot is not compared (its instants mean nothing now).
// Fails without it: the stale lease is restored and the newer one not.
func TestFormat1NewerThanTheLog(t *testing.T) {
	for _, tc := range []struct {
		name      string
		otherBoot bool
		want      string // the lease restored: "new" (format 1's) or "old"
	}{
		{name: "same boot", want: "new"},
		{name: "another boot", otherBoot: true, want: "old"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRestartRig(t)
			_, stop1 := r.start(t)
			c := &ipc.Client{Socket: r.sock}
			if _, err := c.Acquire(ctxT(t), "old", ipc.AcquireOptions{TTL: 9 * time.Second, Owner: ipc.OwnerDetached}); err != nil {
				t.Fatal(err)
			}
			c.Close()
			stop1()
			r.clock.Advance(time.Second)
			v1 := *r.state(t) // what the older daemon wrote after it, beside the files it does not know
			v1.Version, v1.WrittenNs = stateVersionV1, r.clock.Now().Nanoseconds()
			if tc.otherBoot {
				v1.BootID = "another-boot"
			}
			v1.Leases = []leaseSnapshot{v1.Leases[0]}
			v1.Leases[0].Name, v1.Leases[0].Token, v1.Leases[0].OwnerID = "new", 1000, "detached:1000"
			for i := range v1.Sessions {
				v1.Sessions[i].T0Ns, v1.Sessions[i].DeadlineNs = 0, 0
			}
			b, err := json.Marshal(&v1)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(r.cfg.StateDir, stateFileNameV1), b, 0o600); err != nil {
				t.Fatal(err)
			}
			r.clock.Advance(time.Second)
			_, stop2 := r.start(t)
			c2 := &ipc.Client{Socket: r.sock}
			t.Cleanup(func() { c2.Close() })
			tokens := map[string]string{"new": "1000", "old": "1"}
			for name, token := range tokens {
				_, err := c2.Check(ctxT(t), name, token)
				if held := err == nil; held != (name == tc.want) {
					t.Fatalf("%s after the restart: held %v (%v), want the %s state's lease only", name, held, err, tc.want)
				}
			}
			stop2()
			if _, err := os.Stat(filepath.Join(r.cfg.StateDir, stateFileNameV1)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("format 1's file is still there: %v", err)
			}
		})
	}
}
