package daemon

import (
	"fmt"
	"math"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// never is an instant no clock reaches.
const never = clockwatch.Instant(math.MaxInt64)

// lease is one entry of the local lease table. Fields are guarded by the
// Daemon's mutex. The small fields are together at the end, and the owner
// binding a byte: 240 bytes a lease where it took 288 (size classes),
// 48 KB at 10,000 leases (issue 25 item 6; TestLeaseSize).
type lease struct {
	name  string
	token uint64
	ttl   time.Duration
	// key is the lease's key in the table when it is a semaphore's slot
	// (slotKey); "" for an exclusive lease, whose key is its name.
	key string
	// value is the grant's value (elections).
	value string
	// sess is the grantor session the grant belongs to: the one of its
	// term, renewed as a whole.
	sess *gsession
	// ownerID names the owner to the grantor, unique within this
	// session; ownerPID is the owner process of a pid binding.
	ownerID  string
	ownerPID int
	// conn is the connection that acquired the lease; for connection-bound
	// leases it is also the owner. Events go to it while it is open.
	conn *ipc.Conn
	// stopWatch ends the pidfd watch of a pid-bound lease (a no-op for
	// others).
	stopWatch func()
	// lockDelay is the grant's lock-delay, which the grantor keeps: it
	// holds the name that long after the grant ends without a release
	// (its owner ended, it was lost, its session expired).
	lockDelay time.Duration
	// why is the reason it ended, or is ending (an ipc.Reason*, or a
	// text).
	why string

	// t0 is when the request behind the last successful grant or renewal
	// was sent; deadline is the holder's validity that follows from it:
	// t0 + d(1-rho) - eps.
	t0       clockwatch.Instant
	deadline clockwatch.Instant
	// stoppedSince is when the owner process (stoppedPID) was first seen
	// stopped.
	stoppedSince clockwatch.Instant
	// renewAt is when the next renewal is due: t0 + d/3.
	renewAt clockwatch.Instant
	// renewed, made by a waiter (renewWaitLocked), is closed and dropped
	// when a keepalive carrying this lease completes, or the lease leaves
	// the table (whether it renewed l, renewals says). It stays nil while
	// nobody waits: a channel per lease remade at every renewal was a
	// sixth of a detached lease's memory (issue 25 item 6).
	renewed chan struct{}
	// renewals counts the keepalives that renewed this grant; renewLatency
	// is the round trip of the last one, from t0 to its reply.
	renewals     int64
	renewLatency time.Duration
	// resume is the secret a connection owner resumes the lease with
	// after a restart of the daemon (resume.go); "" when the daemon
	// keeps no state.
	resume string

	// limit is a semaphore's limit (0 or 1: exclusive; at most
	// ipc.MaxLimit); holders how many grants of the name stood at the
	// grantor when this one was made.
	limit   int32
	holders uint32
	// uid acquired the lease; only it (or root) may release it.
	uid        uint32
	stoppedPID int32
	// owner is the binding (ipc.Owner*, ownerOf).
	owner ownerKind
	// shared is set for a shared grant of a read/write lock: several
	// owners on one host hold shared grants of one name, each a slot
	// (slotKey), as a semaphore's holders do.
	shared bool
	// noRenew leases are renewed only on request (the caller's option).
	noRenew bool
	// state is where the lease is in its life (leasestate.go).
	state leaseState
}

// ownerKind is a lease's owner binding: ipc.OwnerConnection, ipc.OwnerPID
// or ipc.OwnerDetached, in a byte.
type ownerKind uint8

const (
	ownerConnection ownerKind = iota
	ownerProcess
	ownerDetached
)

var ownerNames = [...]string{ipc.OwnerConnection, ipc.OwnerPID, ipc.OwnerDetached}

// String is the binding's name on the socket.
func (k ownerKind) String() string {
	if int(k) < len(ownerNames) {
		return ownerNames[k]
	}
	return fmt.Sprintf("owner(%d)", k)
}

// ownerOf is the binding named name, and whether there is one.
func ownerOf(name string) (ownerKind, bool) {
	for k, n := range ownerNames {
		if n == name {
			return ownerKind(k), true
		}
	}
	return 0, false
}

func (l *lease) grant(now clockwatch.Instant) *ipc.Grant {
	g := ipc.NewGrant(l.name, l.token, l.ttl, l.deadline.Nanoseconds(), now.Nanoseconds())
	g.Owner, g.OwnerPID = l.owner.String(), l.ownerPID
	g.LockDelayMs = l.lockDelay.Milliseconds()
	g.NoRenew = l.noRenew || l.state == stateLapsing
	g.Renewals, g.RenewalLatencyUs = l.renewals, l.renewLatency.Microseconds()
	if l.renewals > 0 {
		g.RenewedAgoMs = max(now.Sub(l.t0).Milliseconds(), 1)
	}
	if l.limit > 1 {
		g.Limit, g.Holders = int(l.limit), int(l.holders)
	}
	if l.shared {
		g.Shared, g.Holders = true, int(l.holders)
	}
	g.Value = l.value
	return g
}

// tableKey is l's key in the daemon's lease table.
func (l *lease) tableKey() string {
	if l.key == "" {
		return l.name
	}
	return l.key
}

// slotKey is the table key of an owner's grant of name: the name for an
// exclusive lease; for a semaphore (limit above 1) or a shared grant,
// whose holders on one host are several owners, the name and the owner.
// A name cannot contain "#", so no slot key is a name.
func slotKey(name string, limit int, shared bool, ownerID string) string {
	if limit <= 1 && !shared {
		return ""
	}
	return name + "#" + ownerID
}

// scheduleRenewal sets when l is next renewed after a grant or renewal
// whose request left at t0: rule 4, every d/3, so that two lost renewals
// still leave time. Leases the daemon does not renew are never due.
func (l *lease) scheduleRenewal(t0 clockwatch.Instant) {
	if l.noRenew || l.state == stateLapsing {
		l.renewAt = never
		return
	}
	l.renewAt = t0.Add(renewInterval(l.ttl))
}

// renewInterval is rule 4 of the timing model.
func renewInterval(ttl time.Duration) time.Duration { return ttl / 3 }

// signalRenewed wakes whoever waits for l's next keepalive to complete
// (whether it renewed l, renewals says).
func (l *lease) signalRenewed() {
	if l.renewed != nil {
		close(l.renewed)
		l.renewed = nil
	}
}

// renewWaitLocked returns the channel that signalRenewed closes at the
// next completed keepalive carrying l. The caller holds d.mu.
func (l *lease) renewWaitLocked() <-chan struct{} {
	if l.renewed == nil {
		l.renewed = make(chan struct{})
	}
	return l.renewed
}
