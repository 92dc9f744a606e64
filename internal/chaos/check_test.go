package chaos

import (
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/internal/chaos/workload"
	"github.com/leaseside/leaseside/ipc"
)

// Tests of the checkers on histories written by hand: each checker
// finds what it must and passes what it must pass. Instants are seconds.

const (
	s    = int64(time.Second)
	msec = int64(time.Millisecond)
)

// hist builds a History.
type hist struct{ h History }

func newHist() *hist { return &hist{h: History{Start: 0, End: 100 * s}} }

func (b *hist) rec(r workload.Record) *hist {
	if r.Client == "" {
		r.Client, _, _ = strings.Cut(r.Op, ".")
	}
	b.h.Records = append(b.h.Records, r)
	return b
}

// hold records a whole hold by op: acquire called at call, granted token
// at start with deadline dl, a valid check at start, released at end.
func (b *hist) hold(op, name string, token uint64, call, start, dl, end int64) *hist {
	b.rec(workload.Record{Kind: workload.KindAcquire, Op: op, Name: name, At: call})
	b.rec(workload.Record{Kind: workload.KindAcquired, Op: op, Name: name, Token: token, Deadline: dl, At: start})
	b.rec(workload.Record{Kind: workload.KindCheck, Op: op, Name: name, Token: token, Deadline: dl, At: start, End: start})
	b.rec(workload.Record{Kind: workload.KindRelease, Op: op, Name: name, Token: token, At: end})
	return b.rec(workload.Record{Kind: workload.KindReleased, Op: op, Name: name, Token: token, At: end})
}

func checkers(vs []Violation) []string {
	var cs []string
	for _, v := range vs {
		cs = append(cs, v.Checker)
	}
	return cs
}

func TestGrantIntervals(t *testing.T) {
	b := newHist().
		hold("a.1.1", "x", 1, 0, 1*s, 4*s, 3*s).
		// b holds token 2 from 5s; a renewed event moves its deadline from
		// 7s to 9s before 7s; one that tells a deadline already passed
		// moves nothing.
		rec(workload.Record{Kind: workload.KindAcquire, Op: "b.1.1", Name: "x", At: 4 * s}).
		rec(workload.Record{Kind: workload.KindAcquired, Op: "b.1.1", Name: "x", Token: 2, Deadline: 7 * s, At: 5 * s})
	b.h.Events = []SidecarEvent{
		{Event: ipc.Event{Event: ipc.EventRenewed, Lease: "x", Token: "2", DeadlineBoottimeNs: 9 * s}, At: 6 * s},
		{Event: ipc.Event{Event: ipc.EventRenewed, Lease: "x", Token: "2", DeadlineBoottimeNs: 9500 * msec}, At: 10 * s},
	}
	// c is killed at 12.5s, after its last check at 12s; its deadline was
	// 15s.
	b.rec(workload.Record{Kind: workload.KindAcquire, Op: "c.1.1", Name: "x", At: 10 * s}).
		rec(workload.Record{Kind: workload.KindAcquired, Op: "c.1.1", Name: "x", Token: 3, Deadline: 15 * s, At: 11 * s}).
		rec(workload.Record{Kind: workload.KindCheck, Op: "c.1.1", Name: "x", Token: 3, Deadline: 15 * s, At: 12 * s, End: 12 * s})
	b.h.Exits = []ClientExit{{Client: "c", Incarnation: 1, Killed: true, At: 13 * s}}
	b.h.Faults = []Fault{{Kind: KillClient, Target: "c", Start: 12500 * msec, End: 12500 * msec}}
	// d's grant is lost at 22s.
	b.rec(workload.Record{Kind: workload.KindAcquire, Op: "d.1.1", Name: "x", At: 16 * s}).
		rec(workload.Record{Kind: workload.KindAcquired, Op: "d.1.1", Name: "x", Token: 4, Deadline: 25 * s, At: 17 * s})
	b.h.Events = append(b.h.Events, SidecarEvent{Event: ipc.Event{Event: ipc.EventLost, Lease: "x", Token: "4", Reason: "renew_failed"}, At: 22 * s})

	gs := grants(&b.h)
	want := []struct {
		token      uint64
		start, end int64
		why        string
	}{
		{1, 1 * s, 3 * s, "rel"},
		{2, 5 * s, 9 * s, "deadline"},
		{3, 11 * s, 12500 * msec, "killed"},
		{4, 17 * s, 22 * s, "lost: renew_failed"},
	}
	if len(gs) != len(want) {
		t.Fatalf("%d grants, want %d", len(gs), len(want))
	}
	for i, w := range want {
		g := gs[i]
		if g.Token != w.token || g.Start != w.start || g.End != w.end || g.EndWhy != w.why {
			t.Errorf("grant %d: token %d [%v, %v) %q; want token %d [%v, %v) %q", i, g.Token,
				time.Duration(g.Start), time.Duration(g.End), g.EndWhy, w.token, time.Duration(w.start), time.Duration(w.end), w.why)
		}
	}
	if vs := checkIntervals(gs); len(vs) != 0 {
		t.Errorf("intervals that do not overlap: %v", vs)
	}
}

func TestCheckIntervalsOverlap(t *testing.T) {
	h := newHist().
		hold("a.1.1", "x", 1, 0, 1*s, 10*s, 6*s).
		hold("b.1.1", "x", 2, 2*s, 5*s, 15*s, 8*s).
		hold("c.1.1", "x", 3, 7*s, 8*s, 15*s, 9*s) // starts exactly when b ends: fine
	vs := checkIntervals(grants(&h.h))
	if len(vs) != 1 || vs[0].A.Token != 1 || vs[0].B.Token != 2 || vs[0].At != 5*s {
		t.Fatalf("violations %+v; want one, tokens 1 and 2 at 5s", vs)
	}
	if d := vs[0].Describe(0); !strings.Contains(d, "token 1") || !strings.Contains(d, "token 2") || !strings.Contains(d, "[+1.000s, +6.000s)") {
		t.Errorf("description lacks both intervals and tokens:\n%s", d)
	}
}

// Two holders told one token (chaos finding F7: a late reply answered
// with another owner's grant) overlap as much as two tokens do; the
// register accepts both, so only the intervals can tell.
func TestCheckIntervalsOneTokenTwoHolders(t *testing.T) {
	h := newHist().
		hold("a.1.1", "x", 5, 0, 1*s, 10*s, 6*s).
		hold("b.1.1", "x", 5, 0, 2*s, 10*s, 8*s)
	vs := checkIntervals(grants(&h.h))
	if len(vs) != 1 || vs[0].A.Holder == vs[0].B.Holder || vs[0].At != 2*s {
		t.Fatalf("violations %+v; want one, two holders of token 5 at 2s", vs)
	}
}

func TestCheckRegister(t *testing.T) {
	b := newHist().hold("a.1.1", "x", 1, 0, 1*s, 10*s, 5*s)
	// a's belief ends at its failed check at 4s (it releases at 5s):
	// every write it makes after is a violation, pre or post a check.
	b.rec(workload.Record{Kind: workload.KindCheck, Op: "a.1.1", Name: "x", Token: 1, Code: ipc.CodeLost, At: 4 * s, End: 4 * s})
	w := func(kind string, at int64, seq uint64, ok bool) RegisterWrite {
		return RegisterWrite{Write: workload.Write{Name: "x", Holder: "a.1.1", Token: 1, Deadline: 10 * s, Kind: kind}, Seq: seq, At: at, Accepted: ok}
	}
	b.h.Writes = []RegisterWrite{
		w("pre", 2*s, 1, true),   // within the interval (its next check failed)
		w("post", 3*s, 2, true),  // within the interval
		w("pre", 5*s, 3, true),   // after the end it recorded: a violation
		w("post", 6*s, 4, true),  // the same
		w("post", 7*s, 0, false), // refused as late
	}
	vs := checkRegister(&b.h, grants(&b.h))
	if len(vs) != 2 || vs[0].At != 5*s || vs[1].At != 6*s || vs[0].Checker != CheckRegister {
		t.Fatalf("violations %+v; want two, the writes at 5s and 6s", vs)
	}

	// The fence: a lower token accepted after a higher one (a, paused
	// before its release, writes with its deadline still ahead).
	b = newHist().hold("a.1.1", "x", 1, 0, 1*s, 10*s, 8*s).hold("b.1.1", "x", 2, 5*s, 6*s, 10*s, 8*s)
	b.h.Writes = []RegisterWrite{
		{Write: workload.Write{Name: "x", Holder: "b.1.1", Token: 2, Deadline: 10 * s, Kind: "post"}, Seq: 1, At: 7 * s, Accepted: true},
		{Write: workload.Write{Name: "x", Holder: "a.1.1", Token: 1, Deadline: 10 * s, Kind: "pre"}, Seq: 2, At: 7 * s, Accepted: true},
	}
	if vs := checkRegister(&b.h, grants(&b.h)); len(vs) != 1 || !strings.Contains(vs[0].Message, "accepted after") {
		t.Fatalf("violations %+v; want fence.CheckHistory's", vs)
	}
}

func TestCheckTokens(t *testing.T) {
	ok := newHist().hold("a.1.1", "x", 1, 0, 1*s, 10*s, 3*s).hold("b.1.1", "x", 2, 2*s, 4*s, 10*s, 6*s)
	if vs := checkTokens(grants(&ok.h), []Probe{{Name: "x", Call: 7 * s, Return: 8 * s, Token: 3}}); len(vs) != 0 {
		t.Errorf("increasing tokens: %v", vs)
	}
	twice := newHist().hold("a.1.1", "x", 1, 0, 1*s, 10*s, 3*s).hold("b.1.1", "x", 1, 4*s, 5*s, 10*s, 6*s)
	if vs := checkTokens(grants(&twice.h), nil); !slices.ContainsFunc(vs, func(v Violation) bool { return strings.Contains(v.Message, "granted to") }) {
		t.Errorf("token 1 granted twice: %v", vs)
	}
	backwards := newHist().hold("a.1.1", "x", 5, 0, 1*s, 10*s, 3*s).hold("b.1.1", "x", 4, 4*s, 5*s, 10*s, 6*s)
	if vs := checkTokens(grants(&backwards.h), nil); len(vs) != 1 || vs[0].B.Token != 4 {
		t.Errorf("token 4 after token 5: %v", vs)
	}
	probe := newHist().hold("a.1.1", "x", 5, 0, 1*s, 10*s, 3*s)
	if vs := checkTokens(grants(&probe.h), []Probe{{Name: "x", Call: 7 * s, Return: 8 * s, Token: 5}}); len(vs) == 0 {
		t.Errorf("the final probe got token 5 again, unseen")
	}
}

func TestCheckLinear(t *testing.T) {
	dir := t.TempDir()
	held := func(b *hist, op string, holder uint64, call, ret int64) *hist {
		b.rec(workload.Record{Kind: workload.KindAcquire, Op: op, Name: "x", At: call})
		return b.rec(workload.Record{Kind: workload.KindAcquireFailed, Op: op, Name: "x", Code: ipc.CodeLeaseHeld, Holder: holder, At: ret})
	}
	tests := []struct {
		name string
		h    *hist
		bad  bool
	}{
		{name: "grants and a refusal naming the holder",
			h: held(newHist().hold("a.1.1", "x", 1, 0, 1*s, 10*s, 5*s), "b.1.1", 1, 2*s, 3*s)},
		{name: "a refusal naming a released token",
			h: held(newHist().hold("a.1.1", "x", 1, 0, 1*s, 10*s, 2*s), "b.1.1", 1, 3*s, 4*s), bad: true},
		{name: "a refusal naming a superseded token",
			h: held(newHist().hold("a.1.1", "x", 1, 0, 1*s, 10*s, 2*s).hold("c.1.1", "x", 2, 3*s, 4*s, 10*s, 8*s), "b.1.1", 1, 5*s, 6*s), bad: true},
		{name: "a refusal naming the token of an acquire that timed out",
			h: held(newHist().
				rec(workload.Record{Kind: workload.KindAcquire, Op: "a.1.1", Name: "x", At: 0}).
				rec(workload.Record{Kind: workload.KindAcquireFailed, Op: "a.1.1", Name: "x", Code: workload.CodeTimeout, At: 2 * s}),
				"b.1.1", 7, 5*s, 6*s)},
		{name: "a refusal naming an unread token when no acquire was in flight",
			h: held(newHist().hold("a.1.1", "x", 1, 0, 1*s, 10*s, 2*s), "b.1.1", 7, 5*s, 6*s), bad: true},
		{name: "a refusal naming an unread token long after the acquire of unknown outcome gave up",
			h: held(newHist().
				rec(workload.Record{Kind: workload.KindAcquire, Op: "a.1.1", Name: "x", At: 0}).
				rec(workload.Record{Kind: workload.KindAcquireFailed, Op: "a.1.1", Name: "x", Code: workload.CodeTimeout, At: 2 * s}).
				hold("c.1.1", "x", 3, 40*s, 41*s, 50*s, 42*s),
				"b.1.1", 7, 45*s, 46*s), bad: true},
		{name: "two unread tokens and one acquire of unknown outcome",
			h: held(held(newHist().
				rec(workload.Record{Kind: workload.KindAcquire, Op: "a.1.1", Name: "x", At: 0}).
				rec(workload.Record{Kind: workload.KindAcquireFailed, Op: "a.1.1", Name: "x", Code: workload.CodeTimeout, At: 2 * s}),
				"b.1.1", 7, 3*s, 4*s), "b.1.2", 8, 5*s, 6*s), bad: true},
		{name: "a release acknowledged after a newer grant",
			h: newHist().
				rec(workload.Record{Kind: workload.KindAcquire, Op: "a.1.1", Name: "x", At: 0}).
				rec(workload.Record{Kind: workload.KindAcquired, Op: "a.1.1", Name: "x", Token: 1, Deadline: 10 * s, At: 1 * s}).
				hold("b.1.1", "x", 2, 2*s, 3*s, 10*s, 9*s).
				rec(workload.Record{Kind: workload.KindRelease, Op: "a.1.1", Name: "x", Token: 1, At: 4 * s}).
				rec(workload.Record{Kind: workload.KindReleased, Op: "a.1.1", Name: "x", Token: 1, At: 5 * s}), bad: true},
		{name: "the same owner gets its grant again",
			h: newHist().hold("a.1.1", "x", 1, 0, 1*s, 10*s, 5*s).
				rec(workload.Record{Kind: workload.KindAcquire, Op: "a.1.2", Name: "x", At: 2 * s}).
				rec(workload.Record{Kind: workload.KindAcquired, Op: "a.1.2", Name: "x", Token: 1, Deadline: 10 * s, At: 3 * s})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs, unknown := checkLinear(&tt.h.h, dir, 10*time.Second)
			if len(unknown) > 0 {
				t.Fatalf("undecided: %v", unknown)
			}
			if (len(vs) > 0) != tt.bad {
				t.Fatalf("violations %v, want some: %v", vs, tt.bad)
			}
			if tt.bad && !strings.Contains(vs[0].Message, "no order explains") && !strings.Contains(vs[0].Message, "refused as held by token") {
				t.Errorf("the message does not name the operation: %s", vs[0].Message)
			}
		})
	}
}

func TestCheckProbes(t *testing.T) {
	h := &History{Probes: []Probe{
		{Name: "a", Call: 0, Return: 1 * s, Token: 3},
		{Name: "b", Call: 0, Return: 9 * s, Token: 3},
		{Name: "c", Call: 0, Return: 2 * s, Err: "lease_held: ..."},
	}}
	vs := checkProbes(h, []string{"a", "b", "c", "d"}, 5*time.Second)
	var names []string
	for _, v := range vs {
		names = append(names, v.Name)
	}
	if !slices.Equal(names, []string{"b", "c", "d"}) {
		t.Fatalf("liveness violations for %v, want b (slow), c (refused), d (no probe)", names)
	}
}

// A schedule is a function of its seed; a long one has every kind of
// fault, the leader's most; a list of kinds keeps to them.
func TestPlan(t *testing.T) {
	a, b := plan(7, 30*time.Minute, 3*time.Second, nil), plan(7, 30*time.Minute, 3*time.Second, nil)
	if !slices.Equal(a.Cluster, b.Cluster) || !slices.Equal(a.Clients, b.Clients) {
		t.Fatal("two schedules of one seed differ")
	}
	if c := plan(8, 30*time.Minute, 3*time.Second, nil); slices.Equal(a.Cluster, c.Cluster) {
		t.Fatal("two seeds, one schedule")
	}
	count := map[Kind]int{}
	for _, st := range append(a.Cluster, a.Clients...) {
		count[st.Kind]++
		if st.At < 0 || st.At+st.For > 30*time.Minute {
			t.Errorf("step %+v outside the run", st)
		}
	}
	for _, k := range AllKinds() {
		if count[k] == 0 {
			t.Errorf("no %s in 30 minutes", k)
		}
	}
	if count[KillGrantor]+count[StopGrantor] <= count[KillSidecar]+count[StopSidecar] {
		t.Errorf("grantors hit %d times, sidecars %d", count[KillGrantor]+count[StopGrantor], count[KillSidecar]+count[StopSidecar])
	}
	only := plan(7, 5*time.Minute, 3*time.Second, []Kind{Split, StopGrantor})
	for _, st := range only.Cluster {
		if st.Kind != Split && st.Kind != StopGrantor {
			t.Errorf("a %s in a schedule of splits and stops", st.Kind)
		}
	}
}

func TestTimelinePicture(t *testing.T) {
	b := newHist().
		hold("a.1.1", "x", 1, 0, 1*s, 10*s, 6*s).
		hold("b.1.1", "x", 2, 2*s, 5*s, 15*s, 8*s)
	b.h.Faults = []Fault{{Kind: LeaderAlone, Target: "g1", Start: 3 * s, End: 7 * s}, {Kind: KillClient, Target: "a", Start: 4 * s, End: 4 * s}}
	gs := grants(&b.h)
	path := filepath.Join(t.TempDir(), "t.png")
	cfg := DefaultConfig()
	cfg.Names = 1
	b.h.Records = append(b.h.Records, workload.Record{}) // a record of no kind is ignored
	if err := drawTimeline(path, cfg, &b.h, gs, checkIntervals(gs)); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dx() < 1000 {
		t.Errorf("picture %v wide", img.Bounds())
	}
}

// Histories of runs that found product bugs, cut to the part that shows
// the bug: the checkers keep finding them.
func TestRegressionHistories(t *testing.T) {
	cases := []struct {
		file    string // in testdata/regressions
		checker string
	}{
		// F4: a granted acquire whose reply was lost, answered
		// lease_held on retry (seed 12).
		{"f4-seed12-lost-grant-answered-held.json", CheckLinear},
		// Issue 22: a session's record closed while its sidecar
		// still retried a request whose reply it lost; the retry,
		// judged afresh, was granted again (seed 506290559812, r7:
		// s1c1.1.6 granted 20 and 27) or refused as held by the
		// next holder (r6: s2c1.1.2 granted 12, answered held by 21).
		{"i22-seed506290559812-one-id-two-grants.json", CheckLinear},
		{"i22-seed506290559812-one-id-granted-then-held.json", CheckLinear},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			var h History
			if err := readJSON(filepath.Join("testdata", "regressions", c.file), &h); err != nil {
				t.Fatal(err)
			}
			gs := grants(&h)
			vs := append(checkIntervals(gs), checkRegister(&h, gs)...)
			vs = append(vs, checkTokens(gs, nil)...)
			lin, unknown := checkLinear(&h, t.TempDir(), time.Minute)
			if len(unknown) > 0 {
				t.Fatalf("undecided: %v", unknown)
			}
			vs = append(vs, lin...)
			if !slices.Contains(checkers(vs), c.checker) {
				t.Fatalf("%s not found by %s; violations: %v", c.file, c.checker, vs)
			}
		})
	}
}

// A client that found its lease gone (stopped past its deadline, say)
// and acquires the name again may get back the grant its daemon kept:
// a second spell of belief in the same token, not a write after the end.
func TestGrantSpells(t *testing.T) {
	b := newHist().
		rec(workload.Record{Kind: workload.KindAcquire, Op: "a.1.1", Name: "x", Owner: "pid", At: 0}).
		rec(workload.Record{Kind: workload.KindAcquired, Op: "a.1.1", Name: "x", Token: 7, Deadline: 2 * s, At: 1 * s}).
		rec(workload.Record{Kind: workload.KindGone, Op: "a.1.1", Name: "x", Token: 7, Code: workload.CodeDeadline, At: 10 * s}).
		rec(workload.Record{Kind: workload.KindAcquire, Op: "a.1.2", Name: "x", Owner: "pid", At: 11 * s}).
		rec(workload.Record{Kind: workload.KindAcquired, Op: "a.1.2", Name: "x", Token: 7, Deadline: 13 * s, At: 11 * s}).
		rec(workload.Record{Kind: workload.KindCheck, Op: "a.1.2", Name: "x", Token: 7, Deadline: 13 * s, At: 12 * s, End: 12 * s})
	b.h.Events = []SidecarEvent{{Event: ipc.Event{Event: ipc.EventRenewed, Lease: "x", Token: "7", DeadlineBoottimeNs: 14 * s}, At: 12 * s}}
	b.h.Writes = []RegisterWrite{{Write: workload.Write{Name: "x", Holder: "a.1.2", Token: 7, Deadline: 13 * s, Kind: "post"}, Seq: 1, At: 12 * s, Accepted: true}}
	gs := grants(&b.h)
	if len(gs) != 2 || gs[0].End != 2*s || gs[1].Start != 11*s || gs[1].End != 14*s {
		t.Fatalf("spells %v; want [1s, 2s) and [11s, 14s)", gs)
	}
	vs := append(checkRegister(&b.h, gs), checkTokens(gs, nil)...)
	if vs = append(vs, checkIntervals(gs)...); len(vs) != 0 {
		t.Fatalf("violations %v", vs)
	}
}

// A client stopped while its grant's reply waits in its socket reads the
// grant after the deadline the reply told; the sidecar renewed the lease
// meanwhile, in time, and its renewed events keep the grant valid: a
// belief from the read to the renewed deadline, not a write after the
// end. Without the renewal, the same writes are after the end.
func TestGrantReadLate(t *testing.T) {
	for _, renewed := range []bool{true, false} {
		b := newHist().
			rec(workload.Record{Kind: workload.KindAcquire, Op: "a.1.1", Name: "x", At: 1 * s}).
			rec(workload.Record{Kind: workload.KindAcquired, Op: "a.1.1", Name: "x", Token: 3, Deadline: 4 * s, At: 5 * s})
		if renewed {
			b.h.Events = []SidecarEvent{{Event: ipc.Event{Event: ipc.EventRenewed, Lease: "x", Token: "3", DeadlineBoottimeNs: 9 * s}, At: 3 * s}}
		}
		// The client's own deadline: 9 s when the renewal reached it, 4 s
		// (past: a register that accepts it is wrong) when not.
		dl := int64(4 * s)
		if renewed {
			dl = 9 * s
		}
		b.h.Writes = []RegisterWrite{{Write: workload.Write{Name: "x", Holder: "a.1.1", Token: 3, Deadline: dl, Kind: "post"}, Seq: 1, At: 6 * s, Accepted: true}}
		gs := grants(&b.h)
		if len(gs) != 1 {
			t.Fatalf("renewed %v: grants %v; want one", renewed, gs)
		}
		vs := checkRegister(&b.h, gs)
		switch {
		case renewed && (gs[0].Start != 5*s || gs[0].End != 9*s || len(vs) != 0):
			t.Errorf("renewed while unread: [%v, %v), violations %v; want [5s, 9s) and none", time.Duration(gs[0].Start), time.Duration(gs[0].End), vs)
		case !renewed && len(vs) != 1:
			t.Errorf("not renewed: violations %v; want the write after the end", vs)
		}
	}
}

// A renewal sent in time whose reply comes after the deadline it extends
// (a slow grantor) makes the sidecar call the grant valid again; a holder
// that did not look in between believes throughout, and its writes after
// the old deadline are within its interval.
func TestGrantRevivedByLateRenewal(t *testing.T) {
	b := newHist().
		rec(workload.Record{Kind: workload.KindAcquire, Op: "a.1.1", Name: "x", At: 0}).
		rec(workload.Record{Kind: workload.KindAcquired, Op: "a.1.1", Name: "x", Token: 5, Deadline: 2 * s, At: 1 * s}).
		rec(workload.Record{Kind: workload.KindCheck, Op: "a.1.1", Name: "x", Token: 5, Deadline: 3 * s, At: 2500 * msec, End: 2500 * msec})
	b.h.Events = []SidecarEvent{{Event: ipc.Event{Event: ipc.EventRenewed, Lease: "x", Token: "5", DeadlineBoottimeNs: 3 * s}, At: 2300 * msec}}
	b.h.Writes = []RegisterWrite{{Write: workload.Write{Name: "x", Holder: "a.1.1", Token: 5, Deadline: 3 * s, Kind: "post"}, Seq: 1, At: 2500 * msec, Accepted: true}}
	gs := grants(&b.h)
	if len(gs) != 1 || gs[0].Start != 1*s || gs[0].End != 3*s {
		t.Fatalf("grants %v; want one, [1s, 3s)", gs)
	}
	if vs := checkRegister(&b.h, gs); len(vs) != 0 {
		t.Fatalf("violations %v", vs)
	}
	// A second holder from 2.1s overlaps the revived interval.
	b.hold("b.1.1", "x", 6, 2*s, 2100*msec, 5*s, 4*s)
	if vs := checkIntervals(grants(&b.h)); len(vs) != 1 {
		t.Fatalf("violations %v; want the overlap of tokens 5 and 6", vs)
	}
}

// A renewal sent after its sidecar was cut off with fewer grantors than a
// quorum may not be confirmed before the heal; one sent before the cut
// (or within the slack), one on the side with the quorum, and one
// confirmed after the heal began may.
func TestCheckQuorum(t *testing.T) {
	b := newHist().
		rec(workload.Record{Kind: workload.KindAcquire, Op: "a.1.1", Name: "x", TTLMs: 1000, At: 1 * s}).
		rec(workload.Record{Kind: workload.KindAcquired, Op: "a.1.1", Name: "x", Token: 3, Deadline: 2 * s, At: 1 * s}).
		rec(workload.Record{Kind: workload.KindAcquire, Op: "b.1.1", Name: "y", TTLMs: 1000, At: 1 * s}).
		rec(workload.Record{Kind: workload.KindAcquired, Op: "b.1.1", Name: "y", Token: 4, Deadline: 2 * s, At: 1 * s})
	b.h.Faults = []Fault{{Kind: Split, Island: []string{"g1", "s1"}, Rest: []string{"g2", "g3", "g4", "s2"}, Start: 9 * s, Cut: 10 * s, Heal: 20 * s, End: 21 * s}}
	dl := func(t0 int64) int64 {
		return int64(clockwatch.DefaultTiming().HolderDeadline(clockwatch.Instant(t0), time.Second))
	}
	renewed := func(sidecar, name, token string, t0, at int64) SidecarEvent {
		return SidecarEvent{Sidecar: sidecar, Event: ipc.Event{Event: ipc.EventRenewed, Lease: name, Token: token, DeadlineBoottimeNs: dl(t0)}, At: at}
	}
	b.h.Events = []SidecarEvent{
		renewed("s1", "x", "3", 9800*msec, 10300*msec),  // sent before the cut
		renewed("s1", "x", "3", 10400*msec, 10600*msec), // within the slack
		renewed("s1", "x", "3", 12*s, 12100*msec),       // sent after: the violation
		renewed("s2", "y", "4", 12*s, 12100*msec),       // the side with the quorum
		renewed("s1", "x", "3", 19900*msec, 20200*msec), // confirmed after the heal began
	}
	vs := checkQuorum(&b.h, 3)
	if len(vs) != 1 || vs[0].At != 12100*msec || vs[0].Checker != CheckQuorum {
		t.Fatalf("violations %v; want one, at 12.1s", vs)
	}
	// With five grantors, two on the island are no quorum either; three are.
	b.h.Faults[0].Island = []string{"g1", "g2", "s1"}
	b.h.Faults[0].Rest = []string{"g3", "g4", "g5", "g6", "s2"}
	if vs := checkQuorum(&b.h, 5); len(vs) != 1 {
		t.Fatalf("five grantors, two cut off: violations %v; want one", vs)
	}
	b.h.Faults[0].Island = []string{"g1", "g2", "g3", "s1"}
	if vs := checkQuorum(&b.h, 5); len(vs) != 0 {
		t.Fatalf("five grantors, three cut off: violations %v; want none", vs)
	}
}

// A semaphore of two: a third holder while two believe is a violation; a
// holder that starts the instant another ends is a handoff.
func TestCheckSemaphore(t *testing.T) {
	g := func(token uint64, start, end int64) *Grant {
		return &Grant{Name: "sem", Token: token, Holder: "h" + strconv.FormatUint(token, 10), Start: start, End: end}
	}
	handoff := []*Grant{g(1, 1*s, 5*s), g(2, 2*s, 6*s), g(3, 5*s, 7*s)}
	if vs := checkSemaphore(handoff, 2); len(vs) != 0 {
		t.Fatalf("handoff: violations %v", vs)
	}
	three := []*Grant{g(1, 1*s, 5*s), g(2, 2*s, 6*s), g(3, 3*s, 4*s), g(4, 3500*msec, 4500*msec)}
	vs := checkSemaphore(three, 2)
	if len(vs) != 1 || vs[0].At != 3*s || vs[0].B.Token != 3 || vs[0].A.Token != 1 || !strings.Contains(vs[0].Message, "tokens 1, 2, 3") {
		t.Fatalf("violations %v; want one at 3s, token 3 over 1 and 2", vs)
	}
	if vs := checkSemaphore(three, 3); len(vs) != 1 || vs[0].At != 3500*msec {
		t.Fatalf("limit 3: violations %v; want one at 3.5s", vs)
	}
}

// A grant that waited 2s in the queue: with t0 read before the request
// left, its deadline is at most the call plus its term; a later one is
// the mark of a t0 read after the reply, unless a renewal told it (a
// grant that came late is confirmed by a renewal), or a fault stopped the
// client or its sidecar during the call.
func TestCheckT0(t *testing.T) {
	build := func(deadline int64) *hist {
		return newHist().
			rec(workload.Record{Kind: workload.KindAcquire, Client: "s1c1", Op: "s1c1.1.1", Name: "x", TTLMs: 1000, WaitMs: 2000, At: 1 * s}).
			rec(workload.Record{Kind: workload.KindAcquired, Client: "s1c1", Op: "s1c1.1.1", Name: "x", Token: 7, Deadline: deadline, At: 3 * s})
	}
	if vs := checkT0(&build(1900 * msec).h); len(vs) != 0 {
		t.Fatalf("deadline from the call: violations %v", vs)
	}
	late := build(3900 * msec) // t0 at the read, 3s
	if vs := checkT0(&late.h); len(vs) != 1 || vs[0].Checker != CheckT0 {
		t.Fatalf("deadline from the read: violations %v; want one", vs)
	}
	late.h.Events = []SidecarEvent{{Sidecar: "s1", Event: ipc.Event{Event: ipc.EventRenewed, Lease: "x", Token: "7", DeadlineBoottimeNs: 3900 * msec}, At: 2990 * msec}}
	if vs := checkT0(&late.h); len(vs) != 0 {
		t.Fatalf("deadline set by a renewal: violations %v", vs)
	}
	// The watcher missed that renewed event; the reply says the grant was
	// renewed, so its deadline may be as late as the read plus the term.
	late.h.Events = nil
	late.h.Records[1].Renewals, late.h.Records[1].Deadline = 1, 3850*msec // the read plus the term less eps
	if vs := checkT0(&late.h); len(vs) != 0 {
		t.Fatalf("a renewed grant: violations %v", vs)
	}
	late.h.Records[1].Deadline = 4100 * msec
	if vs := checkT0(&late.h); len(vs) != 1 {
		t.Fatalf("a renewed grant's deadline beyond the read plus its term: violations %v; want one", vs)
	}
	late.h.Records[1].Deadline, late.h.Records[1].Renewals = 3900*msec, 0
	stalled := build(3900 * msec)
	stalled.h.Faults = []Fault{{Kind: StallSidecar, Target: "s1", Start: 2 * s, End: 5 * s}}
	if vs := checkT0(&stalled.h); len(vs) != 0 {
		t.Fatalf("sidecar stalled during the call: violations %v", vs)
	}
	// The same owner process held x before and its release was not seen
	// to succeed: the sidecar sends that release first, then reads t0.
	owing := newHist().
		rec(workload.Record{Kind: workload.KindAcquire, Client: "s1c1", Op: "s1c1.1.0", Name: "x", Owner: ipc.OwnerPID, TTLMs: 1000, At: 0}).
		rec(workload.Record{Kind: workload.KindAcquired, Client: "s1c1", Op: "s1c1.1.0", Name: "x", Token: 6, Deadline: 900 * msec, At: 10 * msec})
	owing.h.Records = append(owing.h.Records, late.h.Records...)
	if vs := checkT0(&owing.h); len(vs) != 0 {
		t.Fatalf("a release owed first: violations %v", vs)
	}
	owing.h.Records = slices.Insert(owing.h.Records, 2, workload.Record{Kind: workload.KindReleased, Client: "s1c1", Op: "s1c1.1.0", Name: "x", Token: 6, At: 500 * msec})
	if vs := checkT0(&owing.h); len(vs) != 1 {
		t.Fatalf("the earlier grant released: violations %v; want one", vs)
	}
	// The same owner process's last acquire of x had no clear answer:
	// it is settled (its grant, if made, ended) before the next acquire.
	unclear := func(code string) *hist {
		b := newHist().
			rec(workload.Record{Kind: workload.KindAcquire, Client: "s1c1", Op: "s1c1.1.0", Name: "x", Owner: ipc.OwnerPID, TTLMs: 1000, At: 0}).
			rec(workload.Record{Kind: workload.KindAcquireFailed, Client: "s1c1", Op: "s1c1.1.0", Name: "x", Code: code, At: 10 * msec})
		b.h.Records = append(b.h.Records, late.h.Records...)
		return b
	}
	if vs := checkT0(&unclear(ipc.CodeUnavailable).h); len(vs) != 0 {
		t.Fatalf("after an unanswered acquire: violations %v", vs)
	}
	if vs := checkT0(&unclear(ipc.CodeLeaseHeld).h); len(vs) != 1 {
		t.Fatalf("after a refusal (nothing granted): violations %v; want one", vs)
	}
}
