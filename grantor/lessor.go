package grantor

import (
	"context"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

// proposer is the lessor's view of raft. All methods are safe for
// concurrent use. An error that says the proposal may not have been
// committed because leadership moved is a *NotLeaderError.
type proposer interface {
	// apply proposes one command and waits until it is applied here,
	// returning the FSM's response (which may itself be an error).
	apply(cmd []byte) (any, error)
	// barrier waits until every entry of earlier terms is applied.
	barrier() error
	// verifyLeader runs one quorum round, started after the call, that
	// confirms this node is still leader; it counts only answers to
	// messages sent after the call began (verify.go).
	verifyLeader() error
	// isLeader reports whether raft currently thinks it leads.
	isLeader() bool
	// term returns raft's current term.
	term() uint64
	// allowed returns the newest command type every server applies
	// (versions.go).
	allowed() cmdType
	// notLeader describes the current leader, for errors.
	notLeader() *NotLeaderError
}

// lessorConfig is the part of Config the lessor uses.
type lessorConfig struct {
	timing      clockwatch.Timing
	clock       clockwatch.Clock
	log         *slog.Logger
	sessionIdle time.Duration
	// afterOffice runs in the office's goroutine after the barrier and
	// before tE is read; it may propose (the node registers its address).
	afterOffice func(ctx context.Context)
	// hook, if set, is told of internal milestones; tests wait on it.
	hook func(testEvent)
	// metrics counts revokes, keepalives and verify rounds; nil makes
	// newLessor use counters of its own.
	metrics *counters
	// audit records revokes; nil records nothing.
	audit *audit
	// accounts are charged the waiters (account.go).
	accounts *accounts
}

// testEvent is a milestone reported to lessorConfig.hook.
type testEvent struct {
	what  string // "sleep", "queued", "refused again", "pending", "registered", "delay ended", "delay end failed", "applied ..." (fakeRaft)
	now   clockwatch.Instant
	lease string
}

// numSlots stripes the per-lease proposal slots. See lessor.slot.
const numSlots = 64

const (
	// maxExpirySleep bounds each wait of the expiry loop. Go timers run on
	// the monotonic clock, which stops during a host suspend; waking at
	// least this often notices a suspend soon after it ends.
	maxExpirySleep = time.Second
	// revokeRetry is how long the expiry loop waits before re-proposing a
	// Revoke that failed while this node still led.
	revokeRetry = time.Second
	// barrierRetry is the pause between failed barriers of a new leader.
	barrierRetry = 100 * time.Millisecond
)

// lessor is the leader-side, in-memory half of the grantor: lease expiries,
// the FCFS queues of waiting Acquires and the keepalive batches. It lives as
// long as the node; its state for one term of leadership is an office, which
// is dropped whole when leadership is lost.
//
// Lock order: lessor.mu, then fsm.mu. Nothing blocks (raft, channels to
// other goroutines) while holding lessor.mu, and the FSM calls onEvent
// without fsm.mu held, so proposals and applies cannot deadlock.
type lessor struct {
	lessorConfig
	fsm  *fsm
	prop proposer

	// slots serialise the proposals that touch one lease (Acquire and the
	// leader's per-lease Revoke of older clusters), so that a Revoke and a
	// holder's re-Acquire that keeps its token (cmdAcquire, cmdAcquire2)
	// are never in flight together. A slot is a one-element semaphore.
	slots [numSlots]chan struct{}

	mu      sync.Mutex
	cur     *office       // nil when not leader
	changed chan struct{} // closed and replaced whenever cur changes or takes office
	closed  bool
	// retired is set when the node leaves the cluster: it takes office no
	// more, and answers NotLeader so that sidecars go to the next leader.
	retired bool
	// isRetired mirrors retired for readers that must not take mu.
	isRetired atomic.Bool

	wg sync.WaitGroup // office goroutines

	// scanMu is held by the expiry loop from reading the clock until its
	// timer is set. Tests hold it while they move a fake clock, so that a
	// move never falls between the two and leaves the timer set late.
	scanMu sync.Mutex
}

// office is the lessor's state for one term of leadership of this node.
// Fields below ready are guarded by lessor.mu.
type office struct {
	ctx    context.Context // canceled when the office ends
	cancel context.CancelFunc
	ready  chan struct{} // closed once in office
	// term is the raft term the office was opened in. It serves only in
	// that term: raft's LeaderCh can drop values when its reader is slow,
	// so a lose-and-regain of leadership may never be reported; every
	// place that acts on the office's state checks the term (current).
	term uint64

	active   bool // in office and not yet resigned
	tE       clockwatch.Instant
	sessions map[string]*sessionState
	queues   map[string][]*waiter
	pending  []*renewal    // keepalives waiting for the next verify round
	kaWake   chan struct{} // 1-buffered: pending is not empty
	kick     chan struct{} // 1-buffered: the expiry loop should rescan
	// wakeAt is the instant the expiry loop sleeps until, while armed
	// (from the end of a scan until the next begins; between them every
	// new due instant kicks it). A session queued before wakeAt kicks the
	// loop; a later one is found by the scan at wakeAt. Guarded by
	// lessor.mu.
	wakeAt clockwatch.Instant
	armed  bool
	// unseen says the last scan put a session back until the event of
	// one of its grants comes (o.seen): that event kicks the loop.
	// Guarded by lessor.mu.
	unseen bool
	// slotWanted says the expiry loop proposes Revokes, which wait for
	// their lease's proposal slot (older grantors): releasing a slot
	// kicks it then.
	slotWanted atomic.Bool
	// checks are token checks waiting for the next verify round of
	// checkLoop (checktoken.go); checkWake says there are some.
	checks    []*tokenCheck
	checkWake chan struct{} // 1-buffered
	// due orders the sessions by when the expiry loop must look at them
	// again (expiry.go), so a scan costs what is due, not what is held.
	due dueHeap
	// seen is the highest token whose grant this office has counted in
	// its session's expiry (read with the table when taking office, then
	// from each grant's event). The FSM applies a grant before its event
	// reaches the office: an expiry decision leaves out grants above seen.
	seen uint64
	// proposing are the Acquires proposed with no waiter, in flight
	// (proposing.go): an optimisation, which decides no answer. Guarded by
	// lessor.mu.
	proposing map[proposalKey]*proposal
	// delays are the names in a lock-delay and when this office ends each
	// (lockdelay.go). Guarded by lessor.mu.
	delays map[grantRef]*delayState
	// ending are the grants a keepalive named untold or owner-ended
	// whose cmdEndGrant is in flight (untold.go). Guarded by lessor.mu.
	ending map[grantRef]bool
}

// sessionState is the leader's view of one session: its expiry while it
// holds leases (one expiry for all of them, issue 13), and its recent use.
type sessionState struct {
	// ttl is the largest term of the session's grants this office has
	// seen; the session's expiry is computed with it, so it is never
	// shorter than any of its leases' own rule. Zero while it holds none.
	ttl time.Duration
	// expiry is when this leader may end the session's grants; it only
	// moves later while the session holds leases. Zero while none.
	expiry clockwatch.Instant
	// queued is the instant of the due-heap entry that stands for this
	// session; entries with another instant are stale and dropped.
	queued clockwatch.Instant
	// revoking is set once the expiry loop decided to end the session's
	// grants; renewals then answer "not renewed", whatever the entry's
	// fate, until it is applied.
	revoking bool
	retryAt  clockwatch.Instant // when to decide again if the entry failed
	// decided are the grants the decision ends (set with revoking). A
	// retry re-proposes those of them the session still holds and nothing
	// else: a grant made to the session after the decision moved its
	// expiry (extendLocked) and runs until then (expiry.go).
	decided []grantRef

	busy int                // requests and streams in progress
	last clockwatch.Instant // when the session was last seen
	// term is the largest term this office has seen the session use
	// (its grants, its Acquires, its keepalives); 0 when it has seen
	// none. A session that holds nothing is forgotten a term after it
	// was last seen, or outcomeKeep after it when its record remembers a
	// grant or a release (expiry.go).
	term time.Duration
}

func newLessor(cfg lessorConfig, f *fsm, p proposer) *lessor {
	if cfg.metrics == nil {
		cfg.metrics = newCounters()
	}
	if cfg.accounts == nil {
		cfg.accounts = newAccounts(AccountLimits{}, f, cfg.clock)
	}
	l := &lessor{lessorConfig: cfg, fsm: f, prop: p, changed: make(chan struct{})}
	for i := range l.slots {
		l.slots[i] = make(chan struct{}, 1)
	}
	return l
}

func (l *lessor) test(e testEvent) {
	if l.hook != nil {
		l.hook(e)
	}
}

func (l *lessor) broadcastLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// slot returns the proposal slot for lease.
func (l *lessor) slot(lease string) chan struct{} {
	h := fnv.New32a()
	h.Write([]byte(lease))
	return l.slots[h.Sum32()%numSlots]
}

// releaseSlot frees a slot and, while the expiry loop proposes Revokes,
// asks it to look again, in case it skipped a due lease because the slot
// was taken.
func (l *lessor) releaseSlot(o *office, s chan struct{}) {
	<-s
	if o.slotWanted.Load() {
		poke(o.kick)
	}
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// onEvent is the FSM's observer: it keeps the office's sessions in step
// with what was applied. It runs on raft's FSM goroutine.
func (l *lessor) onEvent(ev fsmEvent) {
	if ev.Kind == evRegistered {
		l.test(testEvent{what: "registered", lease: ev.Lease})
		return
	}
	now := l.clock.Now() // read after the entry was applied
	l.mu.Lock()
	defer l.mu.Unlock()
	o := l.cur
	if o == nil || !o.active {
		// Not in office: taking office reads the whole table anyway.
		return
	}
	switch ev.Kind {
	case evGranted:
		o.extendLocked(l.timing, ev.Rec.Session, ev.Rec.TTL, now)
		o.seen = max(o.seen, ev.Rec.Token)
		if o.unseen {
			o.unseen = false
			poke(o.kick)
		}
	case evFreed:
		if !l.fsm.holdsLeases(ev.Rec.Session) {
			o.emptiedLocked(ev.Rec.Session, now)
		}
		// Only if the entry left room: one that handed the lease (or a
		// semaphore's slot) over in the same entry did not.
		l.wakeIfFreeLocked(o, ev.Lease)
	case evDelayed:
		// Counted from now, after the entry that ended the grant.
		l.delayUntilLocked(o, grantRef{ev.Lease, ev.Rec.Token}, ev.Rec.LockDelay, now)
		poke(o.kick)
	case evUndelayed:
		delete(o.delays, grantRef{ev.Lease, ev.Rec.Token})
		l.wakeIfFreeLocked(o, ev.Lease)
	case evRestored:
		// Every session the new state holds is live until now plus its
		// term: later than before, which is safe.
		o.seen = max(o.seen, l.fsm.lastToken())
		for name := range o.sessions {
			if !l.fsm.holdsLeases(name) {
				o.emptiedLocked(name, now)
			}
		}
		for name, ttl := range l.fsm.sessionTerms() {
			o.extendLocked(l.timing, name, ttl, now)
		}
		l.syncDelaysLocked(o, now)
		for name := range o.queues {
			l.wakeIfFreeLocked(o, name)
		}
		poke(o.kick)
	}
}

// leadershipChanged is told of every raft leadership transition. Two
// "true" in a row mean leadership was lost and regained: a new office.
func (l *lessor) leadershipChanged(isLeader bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.resignLocked()
	if isLeader {
		l.startOfficeLocked()
	}
}

func (l *lessor) startOfficeLocked() {
	if l.closed || l.retired {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := &office{
		ctx: ctx, cancel: cancel, ready: make(chan struct{}),
		term:     l.prop.term(),
		sessions: map[string]*sessionState{},
		queues:   map[string][]*waiter{},
		delays:   map[grantRef]*delayState{},
		ending:   map[grantRef]bool{},
		kaWake:   make(chan struct{}, 1),
		kick:     make(chan struct{}, 1),

		checkWake: make(chan struct{}, 1),
	}
	l.cur = o
	l.broadcastLocked()
	l.wg.Add(1)
	go l.takeOffice(o)
}

// current reports whether o may still act: raft is in the term o was
// opened in. When it is not, o ends, whatever LeaderCh said or will say,
// and if raft leads again in the new term a new office is opened (its
// barrier and wait-out start afresh). It must not be called with l.mu
// held.
func (l *lessor) current(o *office) bool {
	if l.prop.term() == o.term {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == o {
		l.log.Warn("grantor: raft term moved on under the office; opening a new one if still leader",
			"office_term", o.term, "term", l.prop.term())
		l.resignLocked()
		if l.prop.isLeader() {
			l.startOfficeLocked()
		}
	}
	return false
}

// takeOffice is rule 3 of the grantor: barrier, then tE, then every lease
// in the FSM is live until GrantorExpiry(tE, ttl), and every lock-delay
// lasts until GrantorExpiry(tE, delay) (lockdelay.go); only then serve.
func (l *lessor) takeOffice(o *office) {
	defer l.wg.Done()
	for {
		err := l.prop.barrier()
		if err == nil {
			break
		}
		if o.ctx.Err() != nil || !l.prop.isLeader() {
			return // the leadership watcher ends this office
		}
		l.log.Warn("grantor: barrier of new leader failed; retrying", "err", err)
		t := l.clock.NewTimer(barrierRetry)
		select {
		case <-t.C():
		case <-o.ctx.Done():
			t.Stop()
			return
		}
	}
	if !l.current(o) {
		return // the barrier may have run in a later term
	}
	if l.afterOffice != nil {
		l.afterOffice(o.ctx)
	}
	tE := l.clock.Now() // after the barrier: every older entry is applied
	l.mu.Lock()
	if l.cur != o || o.ctx.Err() != nil {
		l.mu.Unlock()
		return
	}
	o.tE = tE
	// The counter before the table: a grant applied in between is above
	// seen until its event (waiting for l.mu) counts it.
	o.seen = l.fsm.lastToken()
	terms := l.fsm.sessionTerms()
	for name, ttl := range terms {
		o.extendLocked(l.timing, name, ttl, tE)
	}
	for _, name := range l.fsm.sessions() {
		o.sessionLocked(name).last = tE
	}
	l.syncDelaysLocked(o, tE)
	o.active = true
	close(o.ready)
	l.broadcastLocked()
	l.wg.Add(3)
	go l.expiryLoop(o)
	go l.verifyLoop(o)
	go l.checkLoop(o)
	l.mu.Unlock()
	l.log.Info("grantor: took office", "tE", tE, "sessions_holding_leases", len(terms), "leases", l.fsm.leaseCount())
}

// resignLocked ends the current office, if any: its lease table, queues
// and pending keepalives are dropped and everyone waiting on it gets
// NotLeader (they select on o.ctx).
func (l *lessor) resignLocked() {
	o := l.cur
	if o == nil {
		return
	}
	l.cur = nil
	if o.active {
		l.log.Info("grantor: left office", "tE", o.tE)
	}
	o.active = false
	o.cancel()
	l.broadcastLocked()
}

// stop ends the office for good; later leadership is ignored.
func (l *lessor) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.resignLocked()
	l.broadcastLocked()
}

// retire ends the office for good because the node leaves the cluster.
// Unlike stop, requests then get NotLeader rather than ErrShutdown. Once
// retire returns, no renewal is acknowledged any more: a verify round in
// flight finds the office inactive. Leave relies on that before it hands
// leadership over (see verifyLoop).
func (l *lessor) retire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.retired {
		return
	}
	l.retired = true
	l.isRetired.Store(true)
	l.log.Info("grantor: retiring: acknowledging nothing more")
	l.resignLocked()
	l.broadcastLocked()
}

// stats returns the number of queued Acquires and whether in office.
func (l *lessor) stats() (waiters int, inOffice bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	o := l.cur
	if o == nil {
		return 0, false
	}
	for _, q := range o.queues {
		waiters += len(q)
	}
	return waiters, o.active
}

// wait waits for the office goroutines after stop.
func (l *lessor) wait() { l.wg.Wait() }

// await returns the office to serve a request in: at once when in office,
// after the barrier when taking office, or NotLeader.
func (l *lessor) await(ctx context.Context) (*office, error) {
	l.mu.Lock()
	o, closed := l.cur, l.closed
	l.mu.Unlock()
	if closed {
		return nil, ErrShutdown
	}
	if o == nil {
		return nil, l.prop.notLeader()
	}
	select {
	case <-o.ready:
		if o.ctx.Err() != nil || !l.prop.isLeader() || !l.current(o) {
			return nil, l.prop.notLeader()
		}
		return o, nil
	case <-o.ctx.Done():
		return nil, l.prop.notLeader()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// waitReady blocks until this node is in office.
func (l *lessor) waitReady(ctx context.Context) error {
	for {
		l.mu.Lock()
		o, ch, closed := l.cur, l.changed, l.closed
		l.mu.Unlock()
		if closed {
			return ErrShutdown
		}
		var ready chan struct{}
		if o != nil {
			ready = o.ready
		}
		select {
		case <-ready:
			return nil
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// touch marks session busy with a request until the returned func runs;
// term, when positive, is the term the request asks for.
func (l *lessor) touch(o *office, session string, term time.Duration) func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := o.sessionLocked(session)
	s.busy++
	s.last = l.clock.Now()
	s.term = max(s.term, term)
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		s.busy--
		s.last = l.clock.Now()
		if s.busy == 0 && s.expiry == 0 && o.sessions[session] == s && !l.fsm.hasSession(session) {
			// The request left no session in the FSM (a refused
			// Acquire, review R8-2): nothing to keep here either.
			delete(o.sessions, session)
		}
	}
}
