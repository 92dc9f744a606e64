package ipc

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net"
	"sync"
	"time"
)

// Client is a Go client of the daemon. Its zero value works and talks to
// ClientSocketPath; the connection is opened on first use and kept, so
// leases bound to the connection live until Close. Safe for concurrent use.
type Client struct {
	// Socket is the daemon's socket path; "" means ClientSocketPath().
	Socket string

	mu      sync.Mutex
	wmu     sync.Mutex // one writer at a time, whole lines only
	conn    *net.UnixConn
	nextID  uint64
	pending map[uint64]chan *Response
	leases  map[string]*Lease
	// acquiring counts acquires in flight per name; orphans keeps the
	// end of a lease whose event overtook its grant, for those names only.
	acquiring map[string]int
	orphans   map[string]*Event
	events    []chan<- *Event
	// observers follow leaders of observed names (client_prims.go).
	observers map[string][]*observer
	closed    chan struct{}
	err       error // why the connection ended
	// closing is set by Close: a connection that ends then is not
	// reconnected to resume its leases (resume.go).
	closing bool
	// resuming is closed when a reconnection to resume leases after the
	// daemon restarted has ended, one way or the other; nil when none
	// runs.
	resuming chan struct{}
	// toResume are the leases a resume has yet to bind to a new
	// connection.
	toResume []*Lease
}

// AcquireOptions are the knobs of Acquire.
type AcquireOptions struct {
	// TTL is the lease term. Required.
	TTL time.Duration
	// Wait is how long to wait for a held lease; 0 fails at once;
	// WaitForever waits without a limit. A wait longer than MaxWait
	// (which one request may carry) is made of several requests.
	Wait time.Duration
	// Owner is the binding: OwnerConnection (default), OwnerPID or
	// OwnerDetached.
	Owner string
	// OwnerPID is the owner process for OwnerPID.
	OwnerPID int
	// LockDelay keeps the lease held this long after its owner ends
	// without releasing it.
	LockDelay time.Duration
	// NoRenew (detached leases only) stops the daemon from renewing the
	// lease; it lapses at its deadline unless renewed with Renew.
	NoRenew bool
	// Limit, above 1, makes the lease a semaphore: up to Limit holders
	// at once, cluster-wide, each with its own token.
	Limit int
	// Shared asks for a shared (read) grant of a read/write lock: any
	// number of shared holders at once, or one exclusive (without
	// Shared). A waiting exclusive acquire keeps new shared ones out.
	// Not with Limit above 1. Needs a daemon of protocol 5.
	Shared bool
}

// Lease is a lease this client acquired. Grant is the grant as first
// made; Deadline follows the renewals.
type Lease struct {
	Grant

	mu       sync.Mutex
	deadline int64 // CLOCK_BOOTTIME ns; only ever moves later
	timer    *time.Timer

	once   sync.Once
	done   chan struct{}
	reason string

	// state is the lease's state as the daemon last told it (Safe or
	// Jeopardy; Lost once done); stateCh is closed at its next change.
	state   State
	stateCh chan struct{}
	// proclaimed is the value last proclaimed through the client.
	proclaimed *string
}

func newLease(g *Grant) *Lease {
	l := &Lease{Grant: *g, deadline: g.DeadlineBoottimeNs, done: make(chan struct{}), stateCh: make(chan struct{})}
	l.mu.Lock()
	l.timer = time.AfterFunc(time.Duration(l.deadline-boottime()), l.watchdog)
	l.mu.Unlock()
	return l
}

// Done is closed when the lease is lost or released, when the connection
// to the daemon ends (for connection-bound leases, that releases them),
// or when this process's own watchdog finds the deadline passed without a
// renewal (so even a hung daemon cannot keep it open). Stop acting on the
// lease when it is closed. The watchdog is a Go timer, which counts
// CLOCK_MONOTONIC: that stops while the host is suspended, so after a
// suspend Done can close late. Valid, which reads CLOCK_BOOTTIME, is the
// check to make right before each action.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Reason says why Done was closed: a Reason constant (of lost or of
// released), "replaced", or "connection_closed".
func (l *Lease) Reason() string {
	<-l.done
	return l.reason
}

// Deadline returns the current deadline on CLOCK_BOOTTIME, in nanoseconds:
// the first grant's, moved later by every renewal the daemon reported and
// earlier by every shortening (a drift found after it was told).
func (l *Lease) Deadline() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Valid reports whether the lease is held and its deadline has not passed
// by CLOCK_BOOTTIME now, which counts a host suspend. Call it right before
// each externally visible action, and send the token with the action
// anyway. When it finds the deadline passed it ends the lease at once
// (Done closes, Reason says deadline_passed), without waiting for the
// watchdog.
func (l *Lease) Valid() bool {
	select {
	case <-l.done:
		return false
	default:
	}
	if boottime() < l.Deadline() {
		return true
	}
	l.end(ReasonDeadlinePassed)
	return false
}

func (l *Lease) renewed(deadline int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deadline = max(l.deadline, deadline)
}

// shortened moves the deadline earlier (EventShortened) and wakes the
// watchdog for it.
func (l *Lease) shortened(deadline int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if deadline < l.deadline {
		l.deadline = deadline
		l.timer.Reset(time.Duration(deadline - boottime()))
	}
}

// watchdog ends the lease when its deadline has passed, and otherwise
// sleeps again until the (possibly renewed) deadline.
func (l *Lease) watchdog() {
	l.mu.Lock()
	left := time.Duration(l.deadline - boottime())
	if left > 0 {
		l.timer.Reset(left)
	}
	l.mu.Unlock()
	if left <= 0 {
		l.end(ReasonDeadlinePassed)
	}
}

func (l *Lease) end(reason string) {
	l.once.Do(func() {
		l.reason = reason
		close(l.done)
		l.mu.Lock()
		l.timer.Stop()
		l.setStateLocked(Lost)
		l.mu.Unlock()
	})
}

// Hello asks the daemon who it is.
func (c *Client) Hello(ctx context.Context) (*Hello, error) {
	resp, err := c.call(ctx, &Request{Op: OpHello})
	if err != nil {
		return nil, err
	}
	return resp.Hello, nil
}

// WaitForever, as AcquireOptions.Wait, waits for a held lease without a
// limit (flock and etcdctl lock do): the client asks again, MaxWait at a
// time, while the lease is held elsewhere, until it is granted or ctx
// ends.
const WaitForever = time.Duration(math.MaxInt64)

// Acquire takes the named lease. When it is held elsewhere the error
// matches ErrLeaseHeld and is an *Error with HolderToken set.
func (c *Client) Acquire(ctx context.Context, name string, opt AcquireOptions) (*Lease, error) {
	return waitInTurns(ctx, opt.Wait, func(wait time.Duration) (*Lease, error) {
		req := &Request{Op: OpAcquire, Lease: name, TTLMs: opt.TTL.Milliseconds(), WaitMs: wait.Milliseconds(),
			Owner: opt.Owner, OwnerPID: opt.OwnerPID, LockDelayMs: opt.LockDelay.Milliseconds(), NoRenew: opt.NoRenew, Limit: opt.Limit, Shared: opt.Shared}
		return c.acquire(ctx, req)
	})
}

// waitInTurns calls try with the wait one request may carry (at most
// MaxWait) and asks again while the lease is held elsewhere, until wait
// (WaitForever: no limit) is used up, counted in the turns asked, or ctx
// ends. A wait up to MaxWait is one request.
func waitInTurns(ctx context.Context, wait time.Duration, try func(time.Duration) (*Lease, error)) (*Lease, error) {
	if wait <= MaxWait {
		return try(max(wait, 0))
	}
	left := wait
	for {
		turn := min(MaxWait, left)
		if dl, ok := ctx.Deadline(); ok {
			turn = min(turn, max(time.Until(dl), 0))
		}
		if wait != WaitForever {
			left -= turn
		}
		l, err := try(turn)
		if err == nil || !isHeld(err) || ctx.Err() != nil || left <= 0 {
			return l, err
		}
	}
}

// acquire sends an acquire or an elect and follows the lease it grants.
func (c *Client) acquire(ctx context.Context, req *Request) (*Lease, error) {
	name := req.Lease
	if _, err := c.connect(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.acquiring[name]++
	c.mu.Unlock()
	resp, err := c.call(ctx, req)
	c.mu.Lock()
	defer c.mu.Unlock()
	orphan := c.orphans[name]
	if c.acquiring[name]--; c.acquiring[name] == 0 {
		delete(c.acquiring, name)
		delete(c.orphans, name)
	}
	if err != nil {
		return nil, err
	}
	if resp.Grant == nil {
		return nil, fmt.Errorf("ipc: acquire reply without a grant")
	}
	if old := c.leases[name]; old != nil && old.Token == resp.Grant.Token {
		return old, nil // the same grant, acquired again
	}
	l := newLease(resp.Grant)
	if old := c.leases[name]; old != nil {
		old.end("replaced")
	}
	c.leases[name] = l
	if orphan != nil && orphan.Token == l.Token {
		delete(c.leases, name)
		l.end(eventReason(orphan))
	}
	return l, nil
}

// Release gives up the named lease held by this host, whatever its token.
func (c *Client) Release(ctx context.Context, name string) error {
	return c.ReleaseToken(ctx, name, "")
}

// ReleaseToken gives up the named lease if it still has the given token
// (a newer grant of the name is left alone; "" matches any).
func (c *Client) ReleaseToken(ctx context.Context, name, token string) error {
	_, err := c.ReleaseGrant(ctx, name, token)
	return err
}

// ReleaseGrant is ReleaseToken, and returns the token of the grant it
// released: which of a semaphore's slots, when this host holds the name
// more than once and token is "".
func (c *Client) ReleaseGrant(ctx context.Context, name, token string) (string, error) {
	resp, err := c.call(ctx, &Request{Op: OpRelease, Lease: name, Token: token})
	if err != nil {
		return "", err
	}
	released := cmp.Or(resp.ReleasedToken, token) // a daemon of protocol 3 does not say
	c.endLease(name, released, EventReleased)
	return released, nil
}

// GiveUp releases the grant of name with token (required) because its
// owner stopped using it when it could not be renewed in time: the daemon
// reports it lost with reason renew_failed, not released, so that
// watchers see what happened (protocol 4).
func (c *Client) GiveUp(ctx context.Context, name, token string) error {
	if token == "" {
		return fmt.Errorf("ipc: GiveUp needs the grant's token")
	}
	_, err := c.call(ctx, &Request{Op: OpRelease, Lease: name, Token: token, Reason: ReasonRenewFailed})
	if err == nil {
		c.endLease(name, token, ReasonRenewFailed)
	}
	return err
}

// Renew renews a lease this host holds at once and returns its new grant.
func (c *Client) Renew(ctx context.Context, name string) (*Grant, error) {
	return c.RenewToken(ctx, name, "")
}

// RenewToken is Renew for the grant with the given token only ("" for any).
func (c *Client) RenewToken(ctx context.Context, name, token string) (*Grant, error) {
	return c.grantCall(ctx, &Request{Op: OpRenew, Lease: name, Token: token})
}

// Check returns the grant of the named lease if this host holds it, with
// the given token unless token is "", and it is valid now.
func (c *Client) Check(ctx context.Context, name, token string) (*Grant, error) {
	return c.grantCall(ctx, &Request{Op: OpCheck, Lease: name, Token: token})
}

// Watch subscribes this connection to the events of every lease on the
// host, or of the named one; they arrive on the channels given to Notify.
func (c *Client) Watch(ctx context.Context, name string) error {
	_, err := c.call(ctx, &Request{Op: OpWatch, Lease: name})
	return err
}

func (c *Client) grantCall(ctx context.Context, req *Request) (*Grant, error) {
	resp, err := c.call(ctx, req)
	if err != nil {
		return nil, err
	}
	if resp.Grant == nil {
		return nil, fmt.Errorf("ipc: %s reply without a grant", req.Op)
	}
	return resp.Grant, nil
}

// Members lists the cluster's grantors and sidecars, as a grantor sees
// them, and the raft leader's ID.
func (c *Client) Members(ctx context.Context) ([]Member, string, error) {
	resp, err := c.call(ctx, &Request{Op: OpMembers})
	if err != nil {
		return nil, "", err
	}
	if resp.Members == nil {
		return nil, resp.LeaderID, nil
	}
	return *resp.Members, resp.LeaderID, nil
}

// Clock returns the daemon's view of its clock.
func (c *Client) Clock(ctx context.Context) (*ClockStatus, error) {
	resp, err := c.call(ctx, &Request{Op: OpClock})
	if err != nil {
		return nil, err
	}
	return resp.Clock, nil
}

// ResetRho lowers the drift bound the daemon computes deadlines with back
// to what is configured and observed now, and returns the clock view
// after it (root or the daemon's uid only).
func (c *Client) ResetRho(ctx context.Context) (*ClockStatus, error) {
	resp, err := c.call(ctx, &Request{Op: OpResetRho})
	if err != nil {
		return nil, err
	}
	return resp.Clock, nil
}

// Status lists the leases this host holds.
func (c *Client) Status(ctx context.Context) ([]Grant, error) {
	leases, _, err := c.StatusClock(ctx)
	return leases, err
}

// StatusClock lists the leases this host holds, with the daemon's clock
// summary.
func (c *Client) StatusClock(ctx context.Context) ([]Grant, *ClockStatus, error) {
	s, err := c.StatusAll(ctx)
	if err != nil {
		return nil, nil, err
	}
	return s.Leases, s.Clock, nil
}

// Status is the whole answer to the status op.
type Status struct {
	Leases  []Grant
	Clock   *ClockStatus
	Grantor *GrantorStatus
}

// StatusAll returns the leases this host holds, the daemon's clock
// summary and how it reaches the grantor leader.
func (c *Client) StatusAll(ctx context.Context) (*Status, error) {
	resp, err := c.call(ctx, &Request{Op: OpStatus})
	if err != nil {
		return nil, err
	}
	s := &Status{Clock: resp.Clock, Grantor: resp.Grantor}
	if resp.Leases != nil {
		s.Leases = *resp.Leases
	}
	return s, nil
}

// Notify relays every event the daemon pushes on this connection to ch.
// Sends do not block: events are dropped when ch is full.
func (c *Client) Notify(ch chan<- *Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, ch)
}

// Closed is closed when the connection to the daemon has ended (or was
// never opened).
func (c *Client) Closed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return c.closed
}

// Close closes the connection; connection-bound leases are released by the
// daemon.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closing = true
	conn, closed, resuming := c.conn, c.closed, c.resuming
	c.mu.Unlock()
	if conn == nil {
		return nil
	}
	err := conn.Close()
	<-closed
	if resuming != nil {
		<-resuming
		c.mu.Lock()
		conn, closed = c.conn, c.closed
		c.mu.Unlock()
		conn.Close()
		<-closed
	}
	return err
}

// SocketPath is the socket this client is connected to (the one Dial
// chose, when Socket is ""), or, before its first call, the one it would
// dial. Give it to a child that should reach the same daemon.
func (c *Client) SocketPath() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		return c.conn.RemoteAddr().String()
	}
	if c.Socket != "" {
		return c.Socket
	}
	return ClientSocketPath()
}
