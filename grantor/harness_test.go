package grantor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/leaseside/leaseside/clockwatch"
)

// waitTimeout is how long a test waits for an event that must happen.
// Waits end on the event; the timeout only turns a hang into a failure.
// Generous, as internal/integration's: beside two CPU hogs and the other
// packages' tests, a TLS cluster of three took more than 20 s to elect
// a leader under the race detector.
const waitTimeout = 60 * time.Second

// eventLog records lessor milestones and applied commands so tests can
// wait for them.
type eventLog struct {
	mu      sync.Mutex
	evs     []testEvent
	changed chan struct{}
}

func newEventLog() *eventLog { return &eventLog{changed: make(chan struct{})} }

func (e *eventLog) add(ev testEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
	close(e.changed)
	e.changed = make(chan struct{})
}

// mark returns a position; wait looks only at events after it.
func (e *eventLog) mark() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.evs)
}

// count returns how many events named what have been recorded.
func (e *eventLog) count(what string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.evs {
		if ev.what == what {
			n++
		}
	}
	return n
}

// all returns a copy of the events recorded so far.
func (e *eventLog) all() []testEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]testEvent(nil), e.evs...)
}

// wait blocks until an event after from satisfies match, and returns the
// position after it.
func (e *eventLog) wait(t testing.TB, from int, what string, match func(testEvent) bool) int {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		e.mu.Lock()
		for i := from; i < len(e.evs); i++ {
			if match(e.evs[i]) {
				e.mu.Unlock()
				return i + 1
			}
		}
		from = len(e.evs)
		ch := e.changed
		e.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// fakeRaft is a proposer that applies commands at once to the FSM, as a
// single-node raft would, with injectable leadership checks.
type fakeRaft struct {
	mu     sync.Mutex
	fsm    *fsm
	index  uint64
	events *eventLog

	leader   atomic.Bool
	termN    atomic.Uint64 // raft's term; newHarness starts it at 1
	allowCmd atomic.Uint32 // what allowed returns; 0 means newestCmd
	verifies atomic.Int64
	// afterFSM, when set, runs between the FSM's apply and apply's return,
	// like the delay before a raft future reports the apply; beforeFSM
	// runs before the FSM applies, like replication; inLog runs after it,
	// in log order, and holds up the entries proposed after it.
	afterFSM  func()
	beforeFSM func()
	inLog     func()
	// verify and barrierFn, when set, replace the default (succeed).
	verify    func(round int64) error
	barrierFn func() error
}

func (r *fakeRaft) apply(cmd []byte) (any, error) {
	if !r.leader.Load() {
		return nil, r.notLeader()
	}
	if f := r.beforeFSM; f != nil {
		f()
	}
	r.mu.Lock()
	// Entries apply in the order they reach the log, as in raft: one held
	// by inLog (a slow disk, slow replication) holds up every later one.
	if f := r.inLog; f != nil {
		f()
	}
	r.index++
	res := r.fsm.Apply(&raft.Log{Index: r.index, Term: r.termN.Load(), Type: raft.LogCommand, Data: cmd})
	r.mu.Unlock()
	if r.afterFSM != nil {
		r.afterFSM()
	}
	r.events.add(testEvent{what: "applied " + cmdType(cmd[0]).String(), lease: fmt.Sprint(res)})
	return res, nil
}

// entries returns how many entries were applied so far.
func (r *fakeRaft) entries() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.index
}

func (r *fakeRaft) barrier() error {
	if !r.leader.Load() {
		return r.notLeader()
	}
	if r.barrierFn != nil {
		return r.barrierFn()
	}
	return nil
}

func (r *fakeRaft) verifyLeader() error {
	n := r.verifies.Add(1)
	if r.verify != nil {
		return r.verify(n)
	}
	if !r.leader.Load() {
		return r.notLeader()
	}
	return nil
}

func (r *fakeRaft) isLeader() bool { return r.leader.Load() }

func (r *fakeRaft) term() uint64 { return r.termN.Load() }

// allowed is newestCmd unless the test set allowCmd.
func (r *fakeRaft) allowed() cmdType {
	if t := cmdType(r.allowCmd.Load()); t != 0 {
		return t
	}
	return newestCmd
}

func (r *fakeRaft) notLeader() *NotLeaderError { return &NotLeaderError{} }

// harness is a lessor over a real FSM, a fakeRaft and a fake clock.
type harness struct {
	t      testing.TB
	clock  *clockwatch.Fake
	timing clockwatch.Timing
	fsm    *fsm
	raft   *fakeRaft
	l      *lessor
	events *eventLog
}

func newHarness(t testing.TB) *harness {
	h := &harness{
		t:      t,
		clock:  clockwatch.NewFake(clockwatch.Instant(1000 * time.Second)),
		timing: clockwatch.Timing{Rho: 0.01, Epsilon: 100 * time.Millisecond},
		fsm:    newFSM(),
		events: newEventLog(),
	}
	h.raft = &fakeRaft{fsm: h.fsm, events: h.events}
	h.raft.termN.Store(1)
	h.l = newLessor(lessorConfig{
		timing:      h.timing,
		clock:       h.clock,
		log:         slog.New(slog.DiscardHandler),
		sessionIdle: time.Hour,
		hook:        h.events.add,
	}, h.fsm, h.raft)
	h.fsm.observe = h.l.onEvent
	t.Cleanup(func() {
		h.l.stop()
		h.l.wait()
	})
	return h
}

func (h *harness) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	h.t.Cleanup(cancel)
	return ctx
}

// takeOffice makes the lessor leader and waits until it serves.
func (h *harness) takeOffice() {
	h.t.Helper()
	h.raft.leader.Store(true)
	h.l.leadershipChanged(true)
	if err := h.l.waitReady(h.ctx()); err != nil {
		h.t.Fatal(err)
	}
}

func acq(session string, seq uint64, lease string, ttl time.Duration) acquireCmd {
	return acquireCmd{ID: requestID{Session: session, Seq: seq}, Lease: lease, Owner: "o", TTL: ttl}
}

func (h *harness) acquire(c acquireCmd) *acquireResult {
	h.t.Helper()
	r, err := h.l.acquire(h.ctx(), c, 0)
	if err != nil {
		h.t.Fatalf("acquire %+v: %v", c, err)
	}
	return r
}

type acquireOutcome struct {
	res *acquireResult
	err error
}

// goAcquire starts a waiting Acquire and returns where its outcome goes.
func (h *harness) goAcquire(ctx context.Context, c acquireCmd, wait time.Duration) <-chan acquireOutcome {
	ch := make(chan acquireOutcome, 1)
	go func() {
		r, err := h.l.acquire(ctx, c, wait)
		ch <- acquireOutcome{r, err}
	}()
	return ch
}

func (h *harness) outcome(ch <-chan acquireOutcome) acquireOutcome {
	h.t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(waitTimeout):
		h.t.Fatal("timed out waiting for an acquire outcome")
	}
	return acquireOutcome{}
}

func (h *harness) pending(ch <-chan acquireOutcome) {
	h.t.Helper()
	select {
	case o := <-ch:
		h.t.Fatalf("acquire ended early: %+v %v", o.res, o.err)
	default:
	}
}

// enqueueWaiter starts a waiting Acquire and returns once it is queued.
func (h *harness) enqueueWaiter(ctx context.Context, c acquireCmd, wait time.Duration) <-chan acquireOutcome {
	h.t.Helper()
	m := h.events.mark()
	ch := h.goAcquire(ctx, c, wait)
	h.events.wait(h.t, m, "waiter queued on "+c.Lease, func(e testEvent) bool { return e.what == "queued" && e.lease == c.Lease })
	return ch
}

// advanceTo moves the fake clock to target and waits until the expiry loop
// has looked at the clock at target or later and gone back to sleep.
// target must not be before the loop's next wake-up, which is at most
// maxExpirySleep after its last scan.
func (h *harness) advanceTo(target clockwatch.Instant) {
	h.t.Helper()
	advanceTo(h.t, h.l, h.clock, h.events, target)
}

func advanceTo(t testing.TB, l *lessor, clock *clockwatch.Fake, events *eventLog, target clockwatch.Instant) {
	t.Helper()
	m := events.mark()
	advance(l, clock, target.Sub(clock.Now()))
	events.wait(t, m, fmt.Sprintf("expiry loop scan at %v", target), func(e testEvent) bool {
		return e.what == "sleep" && !e.now.Before(target)
	})
}

// advance moves the fake clock by d between two scans of the expiry loop.
func advance(l *lessor, clock *clockwatch.Fake, d time.Duration) {
	l.scanMu.Lock()
	clock.Advance(d)
	l.scanMu.Unlock()
}

// held returns the token a lease is held with, or 0.
func (h *harness) held(lease string) uint64 {
	rec, _ := h.fsm.lease(lease)
	return rec.Token
}

func isNotLeader(err error) bool { return errors.Is(err, ErrNotLeader) }

// rlog builds a raft.Log for direct FSM applies in tests.
type rlog struct {
	index uint64
	data  []byte
}

func (r rlog) log() *raft.Log {
	return &raft.Log{Index: r.index, Term: 1, Type: raft.LogCommand, Data: r.data}
}
