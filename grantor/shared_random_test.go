package grantor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"
)

// rwChecker checks, as each entry applies, the read/write lock rule on
// the FSM's state: an exclusive grant stands alone (no other grant, no
// delay), shared grants stand only beside shared grants and shared
// grants' delays, and every new grant's token is above every earlier
// grant's of the name.
type rwChecker struct {
	t    testing.TB
	f    *fsm
	mu   sync.Mutex
	last map[string]uint64
	errs []string
	// grants counts new grants by kind.
	shared, exclusive int
}

func (c *rwChecker) observe(ev fsmEvent) {
	c.f.mu.RLock()
	_, excl := c.f.st.Leases[ev.Lease]
	sem := c.f.st.Sems[ev.Lease]
	ds := c.f.st.Delays[ev.Lease]
	c.f.mu.RUnlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	fail := func(format string, args ...any) {
		c.errs = append(c.errs, fmt.Sprintf("entry %d (%v of %q token %d): ", ev.Index, ev.Kind, ev.Lease, ev.Rec.Token)+fmt.Sprintf(format, args...))
	}
	switch {
	case excl && sem != nil:
		fail("an exclusive grant beside %d shared grants", len(sem.Holders))
	case excl && len(ds) > 0:
		fail("an exclusive grant beside %d delays", len(ds))
	case sem != nil && !sem.Shared:
		fail("a semaphore appeared")
	case sem != nil && len(ds) > 0 && !ds[0].Shared:
		fail("shared grants beside an exclusive grant's delay")
	}
	if ev.Kind == evGranted && !ev.Retry {
		if ev.Rec.Token <= c.last[ev.Lease] {
			fail("token %d not above the name's earlier grant %d", ev.Rec.Token, c.last[ev.Lease])
		}
		c.last[ev.Lease] = ev.Rec.Token
		if sem != nil {
			c.shared++
		} else {
			c.exclusive++
		}
	}
}

func (c *rwChecker) check() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) > 0 {
		c.t.Fatalf("%d violations, first: %s", len(c.errs), c.errs[0])
	}
}

// rwActor is one holder: a session that asks for one name at a time.
type rwActor struct {
	session string
	seq     uint64
	// pending is the outcome of an Acquire in flight; long says it waits
	// longer than the test runs and did not hold the name when it asked
	// (it must be granted in the end).
	pending <-chan acquireOutcome
	long    bool
	token   uint64
	lease   string
}

func (a *rwActor) next() uint64 { a.seq++; return a.seq }

// sharedSeed returns the seed of a randomized run: LEASESIDE_SHARED_SEED
// when set, else a new one (logged, so a failure can be replayed).
func sharedSeed(t *testing.T) uint64 {
	if s := os.Getenv("LEASESIDE_SHARED_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LEASESIDE_SHARED_SEED: %v", err)
		}
		return n
	}
	return rand.Uint64()
}

// Randomized: many readers and writers over few names, on the real
// lessor and FSM with a fake clock: acquires with and without waits,
// releases, lock-delays, session expiries and operator revokes. The
// rwChecker watches every entry; at the end the holders go away and every
// waiter that waits long enough must be served.
func TestSharedRandomized(t *testing.T) {
	seed := sharedSeed(t)
	t.Logf("seed %d (LEASESIDE_SHARED_SEED=%d replays the choices)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	h := newHarness(t)
	chk := &rwChecker{t: t, f: h.fsm, last: map[string]uint64{}}
	h.fsm.observe = func(ev fsmEvent) {
		chk.observe(ev)
		h.l.onEvent(ev)
	}
	h.takeOffice()
	names := []string{"rw/a", "rw/b"}
	actors := make([]*rwActor, 12)
	for i := range actors {
		actors[i] = &rwActor{session: fmt.Sprintf("s%d", i)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	settle := func(a *rwActor, o acquireOutcome) {
		t.Helper()
		if o.err != nil {
			t.Fatalf("%s: acquire failed: %v", a.session, o.err)
		}
		if a.long && !o.res.Granted && !o.res.Ended {
			t.Fatalf("%s: a waiter that waits past the run was refused: %+v", a.session, o.res)
		}
		a.pending, a.long = nil, false
		if o.res.Granted {
			a.token = o.res.Token
		}
	}
	collect := func() {
		for _, a := range actors {
			if a.pending == nil {
				continue
			}
			select {
			case o := <-a.pending:
				settle(a, o)
			default:
			}
		}
	}
	release := func(a *rwActor) {
		t.Helper()
		if _, err := h.l.release(h.ctx(), releaseCmd{ID: requestID{Session: a.session, Seq: a.next()}, Lease: a.lease, Owner: "o", Token: a.token}); err != nil {
			t.Fatalf("%s: release: %v", a.session, err)
		}
		a.token = 0
	}
	const steps = 1500
	for step := 0; step < steps; step++ {
		collect()
		a := actors[rng.IntN(len(actors))]
		switch op := rng.IntN(10); {
		case a.pending != nil:
			// Busy: let time pass instead.
			h.advanceTo(h.clock.Now().Add(time.Duration(1+rng.IntN(3)) * time.Second))
		case a.token != 0 && op < 6:
			release(a)
		case a.token != 0 && op < 7:
			_, _, _ = h.l.operatorRevoke(h.ctx(), Identity{Role: RoleOperator, Name: "op"}, a.lease, a.token)
		case op < 8:
			h.advanceTo(h.clock.Now().Add(time.Duration(1+rng.IntN(5)) * time.Second))
		default:
			a.token = 0 // a grant it still held ends by expiry or revoke
			a.lease = names[rng.IntN(len(names))]
			c := acq(a.session, a.next(), a.lease, time.Duration(5+rng.IntN(30))*time.Second)
			c.Shared = rng.IntN(3) > 0
			if rng.IntN(4) == 0 {
				c.LockDelay = time.Duration(1+rng.IntN(3)) * time.Second
			}
			var wait time.Duration
			switch rng.IntN(3) {
			case 1:
				wait = time.Duration(1+rng.IntN(20)) * time.Second
			case 2:
				// A holder of the name (a grant it forgot above, still
				// standing) that asks again while others wait is refused
				// at once, for good: they wait for its grant to go
				// (waiters.go, errWaitForOwnGrant). Only others must be
				// served in the end.
				wait, a.long = MaxWait, !h.fsm.heldBy(a.lease, a.session, "o")
			}
			m := h.events.mark()
			a.pending = h.goAcquire(ctx, c, wait)
			// Queued or answered: either way the lessor has it.
			if o, ok := queuedOr(t, h.events, m, a.lease, a.pending); ok {
				settle(a, o)
			}
		}
		chk.check()
	}
	// The holders go away: every grant is released as it comes, and time
	// passes for expiries and lock-delays, until every waiter is served.
	// The fake clock moves only once no outcome came for a quiet period
	// of real time: a grant handed to a waiter reaches its goroutine in
	// real time, and must not be outrun by fake time it does not need.
	// A waiter that is never served sees its wait (an hour) run out and
	// fails the run in settle.
	drainStart := h.clock.Now()
	for {
		for _, a := range actors {
			if a.token != 0 {
				release(a)
			}
		}
		var cases []reflect.SelectCase
		var waiting []*rwActor
		for _, a := range actors {
			if a.pending != nil {
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(a.pending)})
				waiting = append(waiting, a)
			}
		}
		if len(waiting) == 0 {
			break
		}
		if h.clock.Now().Sub(drainStart) > MaxWait {
			t.Fatalf("%d waiters not served in an hour after their holders went away", len(waiting))
		}
		quiet := time.NewTimer(50 * time.Millisecond) // a quiet period, not a wait for a condition
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(quiet.C)})
		i, v, _ := reflect.Select(cases)
		quiet.Stop()
		if i < len(waiting) {
			settle(waiting[i], v.Interface().(acquireOutcome))
			continue
		}
		h.advanceTo(h.clock.Now().Add(2 * time.Second))
	}
	chk.check()
	chk.mu.Lock()
	defer chk.mu.Unlock()
	t.Logf("%d shared and %d exclusive grants", chk.shared, chk.exclusive)
	if chk.shared == 0 || chk.exclusive == 0 {
		t.Fatalf("the run granted %d shared and %d exclusive: it tested nothing", chk.shared, chk.exclusive)
	}
}

// queuedOr waits until a waiter is queued on lease after mark m (false)
// or the Acquire's outcome comes on ch (true).
func queuedOr(t *testing.T, e *eventLog, m int, lease string, ch <-chan acquireOutcome) (acquireOutcome, bool) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		e.mu.Lock()
		for i := m; i < len(e.evs); i++ {
			if e.evs[i].what == "queued" && e.evs[i].lease == lease {
				e.mu.Unlock()
				return acquireOutcome{}, false
			}
		}
		m = len(e.evs)
		changed := e.changed
		e.mu.Unlock()
		select {
		case o := <-ch:
			return o, true
		case <-changed:
		case <-deadline.C:
			t.Fatalf("an acquire of %s was neither queued nor answered", lease)
		}
	}
}
