package ipc

import (
	"encoding/json"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// users counts, per uid, the connections open, the requests in flight
// and the bytes queued for its connections, for Limits.
type users struct {
	mu sync.Mutex
	m  map[int]*use
}

type use struct {
	conns, inflight int
	queued          *uidBytes            // set while conns > 0
	logged          map[string]time.Time // last refusal of each kind logged, so a flood logs little
}

// uidBytes counts the bytes of replies and events queued for one uid's
// connections together (Limits.QueueBytesPerUID): each connection adds
// what it queues and takes off what it wrote, and what was left when it
// ended. A nil *uidBytes (a Conn a test made) counts nothing.
type uidBytes struct {
	uid    int
	n      atomic.Int64
	budget int64

	mu     sync.Mutex
	fell   chan struct{} // closed when n falls to the budget or below, then replaced
	logged time.Time     // when a connection held back for the uid was last logged
}

func newUIDBytes(uid, budget int) *uidBytes {
	return &uidBytes{uid: uid, budget: int64(budget), fell: make(chan struct{})}
}

// add adds d (negative: takes off), and wakes the readers waiting in
// under when the count falls to the budget.
func (u *uidBytes) add(d int) {
	if u == nil {
		return
	}
	n := u.n.Add(int64(d))
	if d < 0 && n <= u.budget && n-int64(d) > u.budget {
		u.mu.Lock()
		close(u.fell)
		u.fell = make(chan struct{})
		u.mu.Unlock()
	}
}

// addUnder adds d (positive) if the count is at most the budget, and
// reports whether it did: one CAS, so that of replies added at once only
// the first may pass the budget. A nil u adds nothing and reports true.
func (u *uidBytes) addUnder(d int) bool {
	if u == nil {
		return true
	}
	for {
		n := u.n.Load()
		if n > u.budget {
			return false
		}
		if u.n.CompareAndSwap(n, n+int64(d)) {
			return true
		}
	}
}

// over reports whether more than times the budget is queued.
func (u *uidBytes) over(times int64) bool { return u != nil && u.n.Load() > times*u.budget }

// under returns a channel closed when the count next falls to the budget
// or below: take it before looking at the count. Nil for a nil u.
func (u *uidBytes) under() <-chan struct{} {
	if u == nil {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.fell
}

// heldBack logs, at most once a minute per uid, that c is not read from
// because its uid's connections have more than their budget unread.
func (u *uidBytes) heldBack(c *Conn) {
	u.mu.Lock()
	now := time.Now()
	log := now.Sub(u.logged) >= time.Minute
	if log {
		u.logged = now
	}
	u.mu.Unlock()
	if log {
		c.log.Warn("ipc: not reading the requests of a uid whose connections leave more than its budget of replies and events unread",
			"uid", u.uid, "pid", c.Cred.PID, "conn", c.ID, "queued_bytes", u.n.Load(), "limit_bytes", u.budget)
	}
}

func (u *users) get(uid int) *use {
	if u.m == nil {
		u.m = map[int]*use{}
	}
	x := u.m[uid]
	if x == nil {
		x = &use{}
		u.m[uid] = x
	}
	return x
}

// drop forgets a uid that has nothing open. The caller holds u.mu.
func (u *users) drop(uid int, x *use) {
	if x.conns == 0 && x.inflight == 0 {
		delete(u.m, uid)
	}
}

// open counts a connection of uid, unless uid has max open already, and
// returns the count of bytes queued for uid's connections (of budget).
func (u *users) open(uid, max, budget int) (*uidBytes, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	x := u.get(uid)
	if x.conns >= max {
		return nil, false
	}
	if x.queued == nil {
		x.queued = newUIDBytes(uid, budget)
	}
	x.conns++
	return x.queued, true
}

func (u *users) closed(uid int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	x := u.get(uid)
	x.conns--
	u.drop(uid, x)
}

// start counts a request of uid in flight, unless uid has max already.
func (u *users) start(uid, max int) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	x := u.get(uid)
	if x.inflight >= max {
		return false
	}
	x.inflight++
	return true
}

func (u *users) finish(uid int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	x := u.get(uid)
	x.inflight--
	u.drop(uid, x)
}

// shouldLog reports whether a refusal of uid for its limit on what
// should be logged: at most once a minute per uid and limit.
func (u *users) shouldLog(uid int, what string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	x := u.get(uid)
	if time.Since(x.logged[what]) < time.Minute {
		return false
	}
	if x.logged == nil {
		x.logged = map[string]time.Time{}
	}
	x.logged[what] = time.Now()
	return true
}

// refuseConn answers a connection over its uid's limit with one
// resource_exhausted line, briefly, and closes it.
func (s *Server) refuseConn(nc *net.UnixConn, cred Cred, max int) {
	defer nc.Close()
	if s.users.shouldLog(cred.UID, "connections") {
		s.logger().Warn("ipc: refusing connections of a uid over its limit", "uid", cred.UID, "pid", cred.PID, "limit", max)
	}
	b, _ := json.Marshal(errorLine(nil, Errorf(CodeResourceExhausted, "uid %d has %d connections open, the most the daemon allows one user", cred.UID, max)))
	nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	nc.Write(append(b, '\n'))
}

// RaiseFileLimit raises the soft limit on open files to the hard limit
// (the Go runtime raises it to one below), and logs what it is at debug
// level: each connection costs one.
func RaiseFileLimit(log *slog.Logger) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
			log.Warn("ipc: could not raise the open files limit", "err", err)
			return
		}
	}
	log.Debug("ipc: open files limit", "nofile", rl.Cur)
}

// refuseRequest answers a request of a uid at its limit of requests in
// flight with resource_exhausted, and logs it at most once a minute.
func (s *Server) refuseRequest(c *Conn, id *uint64, max int) {
	if s.users.shouldLog(c.Cred.UID, "requests") {
		s.logger().Warn("ipc: refusing requests of a uid over its limit", "uid", c.Cred.UID, "pid", c.Cred.PID, "limit", max)
	}
	c.enqueue(errorLine(id, Errorf(CodeResourceExhausted, "uid %d has %d requests in flight, the most the daemon allows one user; try again when some are answered", c.Cred.UID, max)), false)
}
