package ipc

import (
	"encoding/json"
	"log/slog"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// users counts, per uid, the connections open and the requests in flight,
// for Limits.
type users struct {
	mu sync.Mutex
	m  map[int]*use
}

type use struct {
	conns, inflight int
	logged          map[string]time.Time // last refusal of each kind logged, so a flood logs little
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

// open counts a connection of uid, unless uid has max open already.
func (u *users) open(uid, max int) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	x := u.get(uid)
	if x.conns >= max {
		return false
	}
	x.conns++
	return true
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
