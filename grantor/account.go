package grantor

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/leaseside/leaseside/clockwatch"
)

// One account per identity (issue 21, DESIGN.md section 6): everything an
// identity (a certificate's role and name) can make a grantor keep is
// charged to that identity's account, against one set of Limits, and a
// call that would take it past one is refused with RESOURCE_EXHAUSTED
// naming the limit (*LimitError); nothing else changes. docs/limits.md
// lists the limits, their defaults, and what they cost at most.
//
// What is charged, and where it is counted:
//
//   - At the gRPC edge (grpc_limits.go): connections and calls in
//     progress.
//   - At the leader (lessor, watch hub): Acquires waiting in queues, Watch
//     streams, the names they watch, and the bytes of events queued for
//     them and of large answers being sent (edgeLimits.chargeAnswer); and audit
//     lines of calls that change nothing, per second.
//   - In the replicated state, on every replica (fsmUsage): the sessions
//     an identity opened, the outcomes they remember, its live grants and
//     the bytes of their values, and the names its grants left in a
//     lock-delay (counted with its leases). These counts are derived from the state
//     alone, in apply order, so every replica holds the same ones and a
//     restore rebuilds them; nothing there reads a clock. The leader
//     checks them before it proposes (a call that would open a session or
//     leave an outcome past the limit is refused without an entry); the
//     lease limit is also carried in each Acquire entry and enforced by
//     the FSM itself for live grants, as before. The leader's check counts what is
//     applied, so entries in flight at once can pass it together: by at
//     most the identity's calls in progress.
//
// Every charge is given back when its thing goes: a connection or call
// that ends, a waiter that leaves its queue, a stream that closes, a name
// it stops watching, an event it sends; a session closed or emptied, an
// outcome forgotten, a grant ended. The FSM's counts follow the state, so
// they need no refund.

// Limits are what one identity may make a grantor keep. A limit of 0 is
// no limit.
type Limits struct {
	// Conns is the most gRPC connections it holds at once.
	Conns int `json:"conns"`
	// Calls is the most gRPC calls it has in progress at once (a waiting
	// Acquire and an open stream each count); each may hold a request of
	// up to Config.MaxRecvMsgSize while it is read.
	Calls int `json:"calls"`
	// Sessions is the most sessions it opened that the replicated state
	// remembers.
	Sessions int `json:"sessions"`
	// Outcomes is the most request outcomes its sessions keep remembered.
	Outcomes int `json:"outcomes"`
	// Leases is the most live grants it holds.
	Leases int `json:"leases"`
	// ValueBytes is the most bytes of values (elections) its grants hold.
	ValueBytes int `json:"value_bytes"`
	// Waiters is the most Acquires it has queued at the leader.
	Waiters int `json:"waiters"`
	// WatchStreams is the most Watch streams it has open at the leader.
	WatchStreams int `json:"watch_streams"`
	// WatchNames is the most names its Watch streams watch, together.
	WatchNames int `json:"watch_names"`
	// QueuedBytes is the most bytes of watch events queued (or being
	// sent) for its streams, and of large answers (pages of Leases and
	// Members) being sent to it, together.
	QueuedBytes int `json:"queued_bytes"`
	// AuditLines is how many audit lines per second its calls that
	// change nothing (releases and proclaims that found no grant,
	// refusals) may write; the rest are counted and the next line written
	// says how many were suppressed. Lines of calls that change something
	// are always written.
	AuditLines int `json:"audit_lines_per_sec"`
	// UnchangedCalls is how many calls that change nothing (releases
	// and proclaims that found no grant, under a session the state knows
	// or not) it may make per second, as many at once: each Release and
	// Proclaim takes a token before it does anything, and gives it back
	// if it changed something; with none left, the call is refused. Its
	// other calls (KeepAlive, Acquire) never are.
	UnchangedCalls int `json:"unchanged_calls_per_sec"`
}

// AccountLimits configures the accounts: the Limits of each role, and of
// single identities, which replace their role's.
type AccountLimits struct {
	Sidecar  Limits
	Operator Limits
	Grantor  Limits
	// Identities maps ROLE/NAME (as a certificate names it, for example
	// "sidecar/web-7") to the limits of that identity alone.
	Identities map[string]Limits
}

// The default limits of every role (docs/limits.md states what they cost
// the leader at most: about 64 MiB).
const (
	DefaultMaxConns        = 32
	DefaultMaxCalls        = 64
	DefaultMaxSessions     = 256
	DefaultMaxOutcomes     = 8192
	DefaultMaxLeases       = 8192
	DefaultMaxValueBytes   = 1 << 20
	DefaultMaxWaiters      = 64
	DefaultMaxWatchStreams = 16
	DefaultMaxWatchNames   = 8192
	DefaultMaxQueuedBytes  = 4 << 20
	DefaultMaxAuditLines   = 10
	// DefaultMaxUnchangedCalls is ten times a sidecar's usual releases
	// of leases it no longer holds (retries after a lost answer).
	DefaultMaxUnchangedCalls = 100
)

// DefaultLimits returns the default Limits of every role.
func DefaultLimits() Limits {
	return Limits{
		Conns: DefaultMaxConns, Calls: DefaultMaxCalls, Sessions: DefaultMaxSessions, Outcomes: DefaultMaxOutcomes,
		Leases: DefaultMaxLeases, ValueBytes: DefaultMaxValueBytes, Waiters: DefaultMaxWaiters,
		WatchStreams: DefaultMaxWatchStreams, WatchNames: DefaultMaxWatchNames, QueuedBytes: DefaultMaxQueuedBytes,
		AuditLines: DefaultMaxAuditLines, UnchangedCalls: DefaultMaxUnchangedCalls,
	}
}

// DefaultAccountLimits returns every role's default limits. The insecure
// identity (no TLS: every caller is it, so there is nobody to tell apart)
// has none unless Identities names "operator/insecure".
func DefaultAccountLimits() AccountLimits {
	return AccountLimits{Sidecar: DefaultLimits(), Operator: DefaultLimits(), Grantor: DefaultLimits()}
}

// For returns the limits of id.
func (a AccountLimits) For(id Identity) Limits {
	if l, ok := a.Identities[id.String()]; ok {
		return l
	}
	switch {
	case id == InsecureIdentity:
		return Limits{}
	case id.Role == RoleSidecar:
		return a.Sidecar
	case id.Role == RoleGrantor:
		return a.Grantor
	}
	return a.Operator
}

// Validate reports the first negative limit or malformed identity.
func (a AccountLimits) Validate() error {
	check := func(where string, l Limits) error {
		for k := limitKind(0); k < numLimits; k++ {
			if l.of(k) < 0 {
				return fmt.Errorf("%w: limits of %s: %s is negative", ErrInvalidConfig, where, k)
			}
		}
		return nil
	}
	for _, r := range []struct {
		role string
		l    Limits
	}{{"sidecar", a.Sidecar}, {"operator", a.Operator}, {"grantor", a.Grantor}} {
		if err := check(r.role, r.l); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(a.Identities))
	for id := range a.Identities {
		names = append(names, id)
	}
	sort.Strings(names)
	for _, id := range names {
		role, name, ok := strings.Cut(id, "/")
		if _, err := ParseRole(role); !ok || err != nil || name == "" {
			return fmt.Errorf("%w: limits of identity %q: want ROLE/NAME, such as sidecar/web-7", ErrInvalidConfig, id)
		}
		if err := check(id, a.Identities[id]); err != nil {
			return err
		}
	}
	return nil
}

// limitKind names one of the Limits.
type limitKind uint8

const (
	limConns limitKind = iota
	limCalls
	limSessions
	limOutcomes
	limLeases
	limValueBytes
	limWaiters
	limWatchStreams
	limWatchNames
	limQueuedBytes
	limAuditLines
	limUnchangedCalls
	numLimits
)

// String is the limit's name in the config file and in refusals.
func (k limitKind) String() string {
	return [...]string{"conns", "calls", "sessions", "outcomes", "leases", "value_bytes", "waiters",
		"watch_streams", "watch_names", "queued_bytes", "audit_lines_per_sec",
		"unchanged_calls_per_sec"}[k]
}

// of returns the limit of kind k.
func (l Limits) of(k limitKind) int {
	return [...]int{l.Conns, l.Calls, l.Sessions, l.Outcomes, l.Leases, l.ValueBytes, l.Waiters,
		l.WatchStreams, l.WatchNames, l.QueuedBytes, l.AuditLines, l.UnchangedCalls}[k]
}

// ErrOverLimit is returned for a call that would take its identity past
// one of its account's limits; see LimitError.
var ErrOverLimit = errors.New("grantor: over the identity's limit")

// LimitError says which limit of whose account a call would pass. It
// matches ErrOverLimit with errors.Is, and is RESOURCE_EXHAUSTED on the
// wire.
type LimitError struct {
	// Identity is the account's owner, ROLE/NAME (a sidecar by its name
	// alone when the replicated state refused).
	Identity string
	// Limit is the limit's name (Limits' JSON key).
	Limit string
	// Used is what the account holds; Max its limit.
	Used, Max int
}

// Error names the identity, the limit and where it is configured.
func (e *LimitError) Error() string {
	return fmt.Sprintf("grantor: %s is at its limit of %s (%d of %d); nothing was changed: free some first, or raise limits.%s for this identity or its role (docs/limits.md)",
		e.Identity, e.Limit, e.Used, e.Max, e.Limit)
}

// Is makes errors.Is(err, ErrOverLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrOverLimit }

// accounts is the leader-side and edge registry of accounts, keyed by the
// identity's owner name (Identity.owner, the name the replicated state
// uses). An account exists while it is charged anything.
type accounts struct {
	limits AccountLimits
	fsm    *fsm
	clock  clockwatch.Clock

	// refused counts the refusals past each limit (metrics); the
	// replicated state's lease limit is counted by the service.
	refused *[numLimits]atomic.Uint64

	mu     sync.Mutex
	byName map[string]*account
}

// account is one identity's charges. used is guarded by accounts.mu;
// queued is the watch hub's, charged without that lock.
type account struct {
	id      Identity
	limits  Limits
	refused *[numLimits]atomic.Uint64 // the accounts' counts
	used    [numLimits]int
	queued  atomic.Int64
	// The audit limiter (a bucket of AuditLines a second) and the lines
	// it held back since the last one written, and the limiter of calls
	// that change nothing (UnchangedCalls); guarded by accounts.mu.
	audit      bucket
	suppressed int
	unchanged  bucket
}

// bucket is a token bucket of rate tokens a second, as many deep, that
// starts full.
type bucket struct {
	tokens   float64
	refilled clockwatch.Instant
}

// refill adds the tokens earned since the last refill, at rate a second.
func (b *bucket) refill(now clockwatch.Instant, rate int) {
	if el := now.Sub(b.refilled); el > 0 {
		b.tokens = min(float64(rate), b.tokens+el.Seconds()*float64(rate))
		b.refilled = now
	}
}

// newAccounts returns the accounts, their audit limiters on clock (nil:
// clockwatch.System).
func newAccounts(limits AccountLimits, f *fsm, clock clockwatch.Clock) *accounts {
	if clock == nil {
		clock = clockwatch.System
	}
	return &accounts{limits: limits, fsm: f, clock: clock, byName: map[string]*account{}, refused: new([numLimits]atomic.Uint64)}
}

// getLocked returns id's account, opening it.
func (a *accounts) getLocked(id Identity) *account {
	name := id.owner()
	acct := a.byName[name]
	if acct == nil {
		l := a.limits.For(id)
		now := a.clock.Now()
		acct = &account{id: id, limits: l, refused: a.refused,
			audit:     bucket{tokens: float64(l.AuditLines), refilled: now},
			unchanged: bucket{tokens: float64(l.UnchangedCalls), refilled: now}}
		a.byName[name] = acct
	}
	return acct
}

// charge adds n of kind k to id's account, or refuses with a *LimitError
// when that would pass its limit. The caller gives it back with refund.
func (a *accounts) charge(id Identity, k limitKind, n int) (*account, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	acct := a.getLocked(id)
	if max := acct.limits.of(k); max > 0 && acct.used[k]+n > max {
		a.dropIfIdleLocked(acct)
		a.refused[k].Add(1)
		return nil, &LimitError{Identity: id.String(), Limit: k.String(), Used: acct.used[k], Max: max}
	}
	acct.used[k] += n
	return acct, nil
}

// tryCharge is charge for a use the caller can do without (it waits
// instead): past the limit it reports false and counts no refusal.
func (a *accounts) tryCharge(id Identity, k limitKind, n int) (*account, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	acct := a.getLocked(id)
	if max := acct.limits.of(k); max > 0 && acct.used[k]+n > max {
		a.dropIfIdleLocked(acct)
		return nil, false
	}
	acct.used[k] += n
	return acct, true
}

// refund gives back n of kind k that charge or tryCharge took.
func (a *accounts) refund(acct *account, k limitKind, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	// Never below zero, whatever a bug refunded: a charge never
	// stops a grantor.
	acct.used[k] = max(0, acct.used[k]-n)
	a.dropIfIdleLocked(acct)
}

// dropIfIdleLocked forgets acct when it holds nothing, its audit
// limiter has nothing to report and its bucket of calls that change
// nothing was full when last looked at (forgetting it would fill it). An
// identity that calls holds a connection (with TLS), so its limiters
// outlive its calls.
func (a *accounts) dropIfIdleLocked(acct *account) {
	if acct.used == [numLimits]int{} && acct.queued.Load() == 0 && acct.suppressed == 0 &&
		acct.unchanged.tokens >= float64(acct.limits.UnchangedCalls) {
		if a.byName[acct.id.owner()] == acct {
			delete(a.byName, acct.id.owner())
		}
	}
}

// chargeQueued charges n bytes of watch events to acct, or refuses with
// a *LimitError. Lock-free: the watch hub calls it under its own locks.
func (acct *account) chargeQueued(n int) error {
	max := acct.limits.QueuedBytes
	if used := acct.queued.Add(int64(n)); max > 0 && used > int64(max) {
		acct.queued.Add(-int64(n))
		acct.refused[limQueuedBytes].Add(1)
		return &LimitError{Identity: acct.id.String(), Limit: limQueuedBytes.String(), Used: int(used) - n, Max: max}
	}
	return nil
}

// refundQueued gives back n bytes chargeQueued took.
func (acct *account) refundQueued(n int) { acct.queued.Add(-int64(n)) }

// auditLine reports whether id may write an audit line of a call that
// changed nothing now, and how many it was refused since the last one.
func (a *accounts) auditLine(id Identity) (suppressed int, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	acct := a.getLocked(id)
	rate := acct.limits.AuditLines
	if rate <= 0 {
		return 0, true
	}
	acct.audit.refill(a.clock.Now(), rate)
	if acct.audit.tokens < 1 {
		acct.suppressed++
		return 0, false
	}
	acct.audit.tokens--
	suppressed, acct.suppressed = acct.suppressed, 0
	a.dropIfIdleLocked(acct)
	return suppressed, true
}

// takeUnchanged takes a token of id's bucket of calls that change
// nothing (UnchangedCalls) for a Release or Proclaim, before anything
// else is done with it, or returns a *LimitError when the bucket is
// empty, and the call is refused. A call that turns out to change
// something gives its token back (changedAfterAll), so only calls that
// change nothing (or fail) spend the rate, however many are in flight.
//
// The refusal is made in the handler, not at the gRPC tap (before the
// request is read): grpc-go queues a tap refusal's answer outside every
// bound of the connection (the stream is never active, and the answer is
// not a transport response it throttles), and a flood refused there at
// 5,900 calls a second held 130 MiB live at the grantor. In the handler
// the call counts in the identity's calls in progress, and its answer is
// flow-controlled like any other.
func (a *accounts) takeUnchanged(id Identity) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	acct := a.getLocked(id)
	rate := acct.limits.UnchangedCalls
	if rate <= 0 {
		return nil
	}
	acct.unchanged.refill(a.clock.Now(), rate)
	if acct.unchanged.tokens < 1 {
		a.refused[limUnchangedCalls].Add(1)
		return &LimitError{Identity: id.String(), Limit: limUnchangedCalls.String(), Used: rate, Max: rate}
	}
	acct.unchanged.tokens--
	return nil
}

// changedAfterAll gives back the token takeUnchanged took for a call of
// id that changed something (a release that freed a grant, a proclaim
// that set a value).
func (a *accounts) changedAfterAll(id Identity) {
	a.mu.Lock()
	defer a.mu.Unlock()
	acct := a.getLocked(id)
	if rate := acct.limits.UnchangedCalls; rate > 0 {
		acct.unchanged.tokens = min(float64(rate), acct.unchanged.tokens+1)
	}
	a.dropIfIdleLocked(acct)
}

// checkRequest refuses a request r of id that would open a session, leave
// one more outcome than it makes its session forget (first_unacked,
// also_received), take one more lease (newLease: live grants and names in
// a lock-delay together) or hold valueBytes more of values past id's
// limits, reading what the replicated state holds for it. A retry (its
// outcome remembered) opens and leaves nothing.
func (a *accounts) checkRequest(id Identity, r requestID, valueBytes int, newLease bool) error {
	l := a.limits.For(id)
	if l.Sessions <= 0 && l.Outcomes <= 0 && l.Leases <= 0 && l.ValueBytes <= 0 {
		// Nothing to count against: usage walks every session of the
		// identity, and with one certificate for 10,000 hosts (the hosts
		// bench's, docs/scale.md) every acquire cost O(hosts).
		return nil
	}
	newSession := !a.fsm.hasSession(r.Session)
	if a.fsm.hasOutcome(r.Session, r.Seq) {
		return nil
	}
	newOutcome := a.fsm.forgets(r) == 0
	u := a.fsm.usage(id.owner())
	over := func(k limitKind, used, n int) error {
		if max := l.of(k); max > 0 && used+n > max {
			a.refused[k].Add(1)
			return &LimitError{Identity: id.String(), Limit: k.String(), Used: used, Max: max}
		}
		return nil
	}
	var err error
	if newSession {
		err = over(limSessions, u.Sessions, 1)
	}
	if err == nil && newOutcome {
		err = over(limOutcomes, u.Outcomes, 1)
	}
	if err == nil && newLease {
		err = over(limLeases, u.Leases, 1)
	}
	if err == nil && valueBytes > 0 {
		err = over(limValueBytes, u.ValueBytes, valueBytes)
	}
	return err
}

// countRefused counts a refusal past k made elsewhere (the replicated
// state's lease limit).
func (a *accounts) countRefused(k limitKind) { a.refused[k].Add(1) }

// highest returns, for each limit, the largest share of it that one
// account uses now (0 to 1; limits of 0 are left out): what an operator
// alerts on before a host is refused.
func (a *accounts) highest() [numLimits]float64 {
	var out [numLimits]float64
	for name, u := range a.snapshot() {
		l := a.limitsOf(name)
		used := [numLimits]int{u.Conns, u.Calls, u.Sessions, u.Outcomes, u.Leases, u.ValueBytes, u.Waiters,
			u.WatchStreams, u.WatchNames, u.QueuedBytes, 0, 0}
		for k := limitKind(0); k < numLimits; k++ {
			if max := l.of(k); max > 0 {
				out[k] = math.Max(out[k], float64(used[k])/float64(max))
			}
		}
	}
	return out
}

// limitsOf returns the limits of the identity whose owner name is name
// (Identity.owner): a sidecar by its name alone, any other ROLE/NAME.
func (a *accounts) limitsOf(name string) Limits {
	role, rest, ok := strings.Cut(name, "/")
	if !ok {
		if name == InsecureIdentity.Name {
			return a.limits.For(InsecureIdentity)
		}
		return a.limits.For(Identity{Role: RoleSidecar, Name: name})
	}
	r, err := ParseRole(role)
	if err != nil {
		return Limits{}
	}
	return a.limits.For(Identity{Role: r, Name: rest})
}

// usage is what one identity's account holds, as the stats and metrics
// show it.
type usage struct {
	Sessions, Outcomes, Leases, ValueBytes                       int
	Conns, Calls, Waiters, WatchStreams, WatchNames, QueuedBytes int
}

// snapshot returns every account's usage, by ROLE/NAME, for the
// metrics and tests: the leader's counts and the replicated state's.
func (a *accounts) snapshot() map[string]usage {
	a.mu.Lock()
	out := make(map[string]usage, len(a.byName))
	for _, acct := range a.byName {
		u := acct.used
		out[acct.id.owner()] = usage{Conns: u[limConns], Calls: u[limCalls], Waiters: u[limWaiters],
			WatchStreams: u[limWatchStreams], WatchNames: u[limWatchNames], QueuedBytes: int(acct.queued.Load())}
	}
	a.mu.Unlock()
	for name, f := range a.fsm.usages() {
		u := out[name]
		u.Sessions, u.Outcomes, u.Leases, u.ValueBytes = f.Sessions, f.Outcomes, f.Leases, f.ValueBytes
		out[name] = u
	}
	return out
}
