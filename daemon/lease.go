package daemon

import (
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// lease is one entry of the local lease table. Fields are guarded by the
// Daemon's mutex.
type lease struct {
	name  string
	token uint64
	ttl   time.Duration
	// owner is the binding kind (ipc.Owner*); ownerID names the owner to
	// the grantor, unique within this session.
	owner    string
	ownerID  string
	ownerPID int
	// conn is the connection that acquired the lease; for connection-bound
	// leases it is also the owner. Events go to it while it is open.
	conn *ipc.Conn
	// stopWatch ends the pidfd watch of a pid-bound lease.
	stopWatch func()

	// deadline is the holder's validity: t0 + d(1-rho) - eps of the last
	// successful grant or renewal.
	deadline clockwatch.Instant
	// renewAt is when the next renewal is due: t0 + d/3.
	renewAt clockwatch.Instant
	// renewed is closed and replaced whenever a keepalive carrying this
	// lease completes, successfully or not.
	renewed chan struct{}
}

func (l *lease) grant(now clockwatch.Instant) *ipc.Grant {
	g := ipc.NewGrant(l.name, l.token, l.ttl, l.deadline.Nanoseconds(), now.Nanoseconds())
	g.Owner, g.OwnerPID = l.owner, l.ownerPID
	return g
}

// renewInterval is rule 4 of the timing model: renew every d/3, so that two
// lost renewals still leave time.
func renewInterval(ttl time.Duration) time.Duration { return ttl / 3 }
