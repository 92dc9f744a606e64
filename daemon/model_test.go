package daemon

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

var (
	modelDuration = flag.Duration("model.duration", 4*time.Second, "how long TestModel drives its workload (for example 10m)")
	modelSeed     = flag.Uint64("model.seed", 0, "TestModel's seed; 0 picks one from the clock (it is logged)")
)

// TestModel drives one daemon, in front of a real one-node grantor (real
// raft in a temporary directory) behind a proxy that delays and drops
// replies, with many goroutines doing concurrent acquires, releases,
// renewals and re-acquires of a few names: connection owners (several
// goroutines on one connection, and connections that close and reopen)
// and pid owners (real child processes, acted for over several
// connections, killed at random, also while their acquires wait). A
// checker records what every owner believed and fails on two owners
// believing in one name at once, and on a lease still held by an owner
// that ended. Run it longer with -model.duration (the seed is logged;
// -model.seed replays a schedule, as far as the machine's timing allows).
func TestModel(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d, duration %v", seed, *modelDuration)
	m := newModel(t, seed)
	ctx, cancel := context.WithTimeout(context.Background(), *modelDuration)
	defer cancel()
	m.run(ctx)
	end := clockwatch.System.Now()
	for _, v := range m.chk.overlaps(end) {
		t.Error(v)
	}
	m.checkEndedOwners(t)
	t.Logf("%d operations (%d acquires granted, %d refused or failed), %d intervals checked, %d pid owners killed (%d with an acquire in flight), %d connections closed; proxy delayed %d and dropped %d messages",
		m.ops.Load(), m.granted.Load(), m.refused.Load(), m.chk.count(), m.kills.Load(), m.midAcquire.Load(), m.closes.Load(), m.proxy.delayed.Load(), m.proxy.dropped.Load())
	if m.chk.count() == 0 || m.kills.Load() == 0 {
		t.Fatal("the workload granted nothing or killed no owner: nothing was checked")
	}
}

// modelNames are the few names every owner fights over.
var modelNames = []string{"m/a", "m/b", "m/c"}

// maxLockDelay bounds the lock-delays the model asks for.
const maxLockDelay = 800 * time.Millisecond

type model struct {
	t     *testing.T
	seed  uint64
	sock  string
	d     *Daemon
	proxy *faultProxy
	chk   checker

	ops, granted, refused, kills, closes atomic.Uint64
	midAcquire                           atomic.Uint64 // kills while an acquire of the owner was in flight

	// pids are the live pid owners, by slot; pidClients are the
	// connections pid owners are acted for on.
	pidMu      sync.Mutex
	pids       []*owner
	pidClients []*ipc.Client
	// dead are the pid owners killed, with when; clients every
	// connection the workload opened.
	dead    []*owner
	clients []*ipc.Client
}

// owner is one owner's side of the model: what it believes it holds. A
// release (or the owner's end) excludes acquires of the same name by the
// same owner, as an application would; acquires of one name by one owner
// may run at once.
type owner struct {
	id    string
	pid   *exec.Cmd // pid owners
	endAt clockwatch.Instant

	mu    sync.Mutex
	held  map[string]*interval
	names map[string]*sync.RWMutex
	ended bool
	// acquiring counts the owner's acquires in flight.
	acquiring atomic.Int32
}

func newOwner(id string) *owner {
	o := &owner{id: id, held: map[string]*interval{}, names: map[string]*sync.RWMutex{}}
	for _, n := range modelNames {
		o.names[n] = &sync.RWMutex{}
	}
	return o
}

// end ends the owner's beliefs at at.
func (o *owner) end(at clockwatch.Instant) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended, o.endAt = true, at
	for n, iv := range o.held {
		iv.finish(at)
		delete(o.held, n)
	}
}

// sweep ends the beliefs in leases the client reported over.
func (o *owner) sweep() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for n, iv := range o.held {
		select {
		case <-iv.lease.Done():
			iv.finish(clockwatch.System.Now())
			delete(o.held, n)
		default:
		}
	}
}

func newModel(t *testing.T, seed uint64) *model {
	timing := clockwatch.DefaultTiming()
	grantorAddr := startGrantor(t, clockwatch.System, timing)
	addr, proxy := startFaultProxy(t, grantorAddr, faults{
		DelayRequest: 0.05, DropReply: 0.03, DelayKeepAlive: 0.05, DropKeepAlive: 0.01, MaxDelay: 150 * time.Millisecond,
	}, seed)
	cfg := DefaultConfig()
	cfg.Grantors = []string{addr}
	cfg.Timing = timing
	cfg.RequestTimeout = 5 * time.Second
	d, sock := startDaemon(t, cfg)
	return &model{t: t, seed: seed, sock: sock, d: d, proxy: proxy}
}

// client opens a connection for the workload.
func (m *model) client() *ipc.Client {
	c := &ipc.Client{Socket: m.sock}
	m.pidMu.Lock()
	m.clients = append(m.clients, c)
	m.pidMu.Unlock()
	m.t.Cleanup(func() { c.Close() })
	return c
}

// closeClients closes every connection the workload opened: every
// connection owner ends.
func (m *model) closeClients() {
	m.pidMu.Lock()
	cs := m.clients
	m.pidMu.Unlock()
	for _, c := range cs {
		c.Close()
	}
}

// run drives the workload until ctx ends, then waits for every worker.
func (m *model) run(ctx context.Context) {
	for i := 0; i < 3; i++ {
		m.pidClients = append(m.pidClients, m.client())
	}
	for i := 0; i < 3; i++ {
		m.pids = append(m.pids, m.startPID())
	}
	var wg sync.WaitGroup
	worker := func(i int, f func(r *rand.Rand)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(m.seed, uint64(i)))
			for ctx.Err() == nil {
				f(r)
			}
		}()
	}
	// Connection owners that close and reopen their connection.
	for i := 0; i < 3; i++ {
		var o *owner
		var c *ipc.Client
		gen := 0
		worker(i, func(r *rand.Rand) {
			if c == nil || r.IntN(40) == 0 {
				if c != nil {
					o.end(clockwatch.System.Now())
					c.Close()
					m.closes.Add(1)
				}
				gen++
				o, c = newOwner(fmt.Sprintf("conn%d/%d", i, gen)), m.client()
			}
			m.step(ctx, r, o, c, ipc.AcquireOptions{})
		})
	}
	// Connection owners whose one connection several goroutines share.
	for i := 0; i < 2; i++ {
		o, c := newOwner(fmt.Sprintf("shared%d", i)), m.client()
		for j := 0; j < 3; j++ {
			worker(10+3*i+j, func(r *rand.Rand) { m.step(ctx, r, o, c, ipc.AcquireOptions{}) })
		}
	}
	// Goroutines acting for the pid owners, over several connections.
	for i := 0; i < 5; i++ {
		worker(20+i, func(r *rand.Rand) {
			m.pidMu.Lock()
			o := m.pids[r.IntN(len(m.pids))]
			c := m.pidClients[r.IntN(len(m.pidClients))]
			m.pidMu.Unlock()
			m.step(ctx, r, o, c, ipc.AcquireOptions{Owner: ipc.OwnerPID, OwnerPID: o.pid.Process.Pid})
		})
	}
	// The reaper: kills a pid owner now and then, whatever it is doing.
	worker(30, func(r *rand.Rand) {
		pause(ctx, time.Duration(100+r.IntN(500))*time.Millisecond)
		m.pidMu.Lock()
		slot := r.IntN(len(m.pids))
		o := m.pids[slot]
		m.pids[slot] = m.startPID()
		m.dead = append(m.dead, o)
		m.pidMu.Unlock()
		m.kill(o)
	})
	wg.Wait()
}

// pause waits d (or until ctx ends): the model's think time between
// operations. It waits for no condition.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (m *model) startPID() *owner {
	cmd := exec.Command("sleep", "3600")
	if err := cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	o := newOwner("pid:" + strconv.Itoa(cmd.Process.Pid))
	o.pid = cmd
	return o
}

// kill ends a pid owner: its beliefs end before the process does.
func (m *model) kill(o *owner) {
	o.end(clockwatch.System.Now())
	if o.acquiring.Load() > 0 {
		m.midAcquire.Add(1)
	}
	o.pid.Process.Signal(syscall.SIGKILL)
	o.pid.Wait()
	m.kills.Add(1)
}

// step is one operation of owner o on connection c.
func (m *model) step(ctx context.Context, r *rand.Rand, o *owner, c *ipc.Client, base ipc.AcquireOptions) {
	o.sweep()
	name := modelNames[r.IntN(len(modelNames))]
	o.mu.Lock()
	iv, holds := o.held[name]
	o.mu.Unlock()
	switch p := r.IntN(100); {
	case holds && p < 40:
		m.release(ctx, o, c, name, iv)
	case holds && p < 55:
		m.ops.Add(1)
		c.RenewToken(ctx, name, iv.token)
	case p < 80:
		opt := base
		opt.TTL = time.Duration(1000+r.IntN(2000)) * time.Millisecond
		if holds {
			opt.TTL = time.Duration(iv.lease.TTLMs) * time.Millisecond // the same again: a no-op
		}
		if r.IntN(3) == 0 {
			opt.Wait = time.Duration(r.IntN(1000)) * time.Millisecond
		}
		if r.IntN(4) == 0 {
			opt.LockDelay = time.Duration(r.Int64N(int64(maxLockDelay)))
		}
		m.acquire(ctx, o, c, name, opt)
	default:
		pause(ctx, time.Duration(r.IntN(100))*time.Millisecond)
	}
}

func (m *model) acquire(ctx context.Context, o *owner, c *ipc.Client, name string, opt ipc.AcquireOptions) {
	lock := o.names[name]
	lock.RLock()
	defer lock.RUnlock()
	m.ops.Add(1)
	actx, cancel := context.WithTimeout(ctx, opt.Wait+10*time.Second)
	defer cancel()
	o.acquiring.Add(1)
	l, err := c.Acquire(actx, name, opt)
	o.acquiring.Add(-1)
	if err != nil {
		m.refused.Add(1)
		return
	}
	m.granted.Add(1)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended {
		return // a grant for an owner that ended is nobody's belief
	}
	if cur := o.held[name]; cur != nil {
		if cur.token == l.Token {
			return // the same grant, acquired again
		}
		cur.finish(clockwatch.System.Now())
	}
	o.held[name] = m.chk.begin(name, o.id, l)
}

func (m *model) release(ctx context.Context, o *owner, c *ipc.Client, name string, iv *interval) {
	lock := o.names[name]
	lock.Lock()
	defer lock.Unlock()
	o.mu.Lock()
	if o.held[name] != iv {
		o.mu.Unlock()
		return
	}
	iv.finish(clockwatch.System.Now()) // the owner stops believing before it asks
	delete(o.held, name)
	o.mu.Unlock()
	m.ops.Add(1)
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.ReleaseToken(rctx, name, iv.token)
}

// checkEndedOwners fails the test for every lease still held for a pid
// owner that was killed more than a lock-delay ago, then ends every
// owner and checks that the daemon lets go of everything.
func (m *model) checkEndedOwners(t *testing.T) {
	c := &ipc.Client{Socket: m.sock} // the checker's own, not the workload's
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events := make(chan *ipc.Event, 1024)
	c.Notify(events)
	if err := c.Watch(ctx, ""); err != nil {
		t.Fatal(err)
	}
	leases, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := clockwatch.System.Now()
	for _, g := range leases {
		for _, o := range m.dead {
			if g.OwnerPID == o.pid.Process.Pid && now.Sub(o.endAt) > maxLockDelay+2*time.Second {
				t.Errorf("%s (token %s) is still held for pid %d, killed %v ago", g.Lease, g.Token, g.OwnerPID, now.Sub(o.endAt))
			}
		}
	}
	// Every owner ends: the pids die, the connections close.
	for _, o := range m.pids {
		m.kill(o)
	}
	m.closeClients()
	for {
		leases, err := c.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(leases) == 0 {
			return
		}
		select {
		case <-events:
		case <-ctx.Done():
			t.Errorf("after every owner ended, the daemon still holds %+v", leases)
			return
		}
	}
}
