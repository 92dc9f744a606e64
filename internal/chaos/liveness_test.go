package chaos

import (
	"testing"
	"time"

	"github.com/leaseside/leaseside/internal/chaos/workload"
	"github.com/leaseside/leaseside/ipc"
)

// A name that clients keep asking for sees no grant for 90 s after a
// heal (the shape of finding F6 of the 30-minute run); once the clients
// stop it is free. The recovery checker reports it; the same history
// with a grant 10 s after the heal, or with nobody asking late, passes.
func TestRecoveryAfterHealChecked(t *testing.T) {
	build := func(granted int64, asking int64) *hist {
		b := newHist().hold("a.1.1", "x", 1, 0, 1*s, 5*s, 4*s)
		b.h.Faults = []Fault{{Kind: Split, Target: "minority g1,s1", Start: 5 * s, End: 10 * s}}
		for i := int64(0); 11*s+2*i*s < asking; i++ {
			op := "b.1." + string(rune('A'+i))
			b.rec(workload.Record{Kind: workload.KindAcquire, Op: op, Name: "x", TTLMs: 1000, WaitMs: 1000, At: 11*s + 2*i*s})
			b.rec(workload.Record{Kind: workload.KindAcquireFailed, Op: op, Name: "x", Code: ipc.CodeLeaseHeld, At: 12*s + 2*i*s})
		}
		b.hold("b.2.1", "x", 2, granted-msec, granted, granted+4*s, granted+3*s)
		b.h.End = 105 * s
		return b
	}
	bound := 40 * time.Second
	b := build(100*s, 100*s)
	if vs := checkRecovery(&b.h, grants(&b.h), []string{"x"}, bound); len(vs) != 1 || vs[0].Checker != CheckLiveness {
		t.Errorf("x asked for every 2 s, no grant for 90 s after the heal: violations %v; want one of liveness", vs)
	}
	b = build(20*s, 20*s)
	if vs := checkRecovery(&b.h, grants(&b.h), []string{"x"}, bound); len(vs) != 0 {
		t.Errorf("x granted 10 s after the heal: violations %v; want none", vs)
	}
	b = build(100*s, 25*s)
	if vs := checkRecovery(&b.h, grants(&b.h), []string{"x"}, bound); len(vs) != 0 {
		t.Errorf("nobody asked for x after 15 s: violations %v; want none", vs)
	}
	// A fault during the wait pauses the count: 90 s, 60 s of it in
	// faults.
	b = build(100*s, 100*s)
	b.h.Faults = append(b.h.Faults, Fault{Kind: StopGrantor, Target: "g1", Start: 20 * s, End: 80 * s})
	if vs := checkRecovery(&b.h, grants(&b.h), []string{"x"}, bound); len(vs) != 0 {
		t.Errorf("60 s of the 90 s in another fault: violations %v; want none", vs)
	}
}

// The final probes are timed from the clients' stop: a probe that was
// called late (after others) still has to be granted within the bound of
// the stop.
func TestProbesTimedFromStop(t *testing.T) {
	h := &History{End: 10 * s, Probes: []Probe{
		{Name: "a", Call: 10 * s, Return: 11 * s, Token: 3},
		{Name: "b", Call: 14 * s, Return: 16 * s, Token: 3},
	}}
	vs := checkProbes(h, []string{"a", "b"}, 5*time.Second)
	if len(vs) != 1 || vs[0].Name != "b" {
		t.Errorf("b granted 6 s after the clients stopped (bound 5 s): violations %v; want one for b", vs)
	}
}
