package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leaseside/leaseside/internal/netlab"
	"github.com/leaseside/leaseside/ipc"
)

// The cluster of a run: grantor processes of the built leaseside binary,
// each on a netlab host of its own, one more host kept for a grantor that
// joins later (a spare), and sidecar processes (`leaseside daemon`), each
// on a host of its own where the clients run too. Every link is mutual
// TLS and gossip is encrypted, as in production: newCluster makes a CA, a
// certificate per grantor, sidecar and operator, and a gossip key with
// `leaseside tls`. Every flag the processes are started with is chosen in
// the *Args methods below, and nowhere else.

// Ports of a grantor: every host has an address of its own, so every
// grantor uses the same ones.
const (
	rpcPort    = 7400
	raftPort   = 7401
	gossipPort = 7402
)

// readyTimeout bounds the wait for a process's ready line, or for a
// leader: generous, the machine is shared.
const readyTimeout = 60 * time.Second

// grantor is one grantor node: its host, data (kept across restarts) and
// current process.
type grantor struct {
	id      string
	host    *netlab.Host
	dataDir string
	log     *os.File
	// member: started as part of the cluster (or added later), and not
	// removed since; a spare is not.
	member bool
	// clocks is the BOOTTIME offset of the time namespace the current
	// process runs in (0: the machine's clock).
	clocks time.Duration

	mu      sync.Mutex
	proc    *proc
	ready   chan struct{} // closed at the current process's ready line
	office  bool          // the current process said it took office, last
	tookAt  int64
	stopped bool // SIGSTOPped by a fault
}

// sidecar is one sidecar host's daemon.
type sidecar struct {
	name   string
	host   *netlab.Host
	socket string
	log    *os.File

	mu      sync.Mutex
	proc    *proc
	ready   chan struct{}
	stopped bool
}

// cluster is the processes of a run.
type cluster struct {
	lab      *netlab.Lab
	bin      string // leaseside
	tlsDir   string // the CA, every certificate, the gossip key
	rec      *recorder
	grantors []*grantor // members first, then the spare
	sidecars []*sidecar
	logf     func(format string, args ...any)

	officeMu sync.Mutex
	officeCh chan struct{}    // closed and replaced when a grantor takes or leaves office, or is promoted
	promoted map[string]int64 // grantor ID -> when a leader last promoted it to voter
	stopping bool             // the run ends: exits are expected
}

// officeChanged wakes whoever waits for a leader.
func (c *cluster) officeChanged() {
	c.officeMu.Lock()
	defer c.officeMu.Unlock()
	close(c.officeCh)
	c.officeCh = make(chan struct{})
}

// officeWait returns a channel closed at the next office change.
func (c *cluster) officeWait() <-chan struct{} {
	c.officeMu.Lock()
	defer c.officeMu.Unlock()
	return c.officeCh
}

// newCluster lays out n grantors, one spare and m sidecars on the lab's
// hosts (grantors on hosts 0..n, sidecars after), with their data and
// logs in dir and their sockets in sockDir. Nothing is started.
func newCluster(lab *netlab.Lab, bin, dir, sockDir string, n, m int, rec *recorder, logf func(string, ...any)) (*cluster, error) {
	c := &cluster{lab: lab, bin: bin, tlsDir: filepath.Join(dir, "tls"), rec: rec, logf: logf, officeCh: make(chan struct{}), promoted: map[string]int64{}}
	for i := 0; i <= n; i++ {
		g := &grantor{id: fmt.Sprintf("g%d", i+1), host: lab.Host(i), dataDir: filepath.Join(dir, fmt.Sprintf("g%d", i+1)), member: i < n}
		if err := os.MkdirAll(g.dataDir, 0o700); err != nil {
			return nil, err
		}
		f, err := os.Create(filepath.Join(dir, "logs", g.id+".log"))
		if err != nil {
			return nil, err
		}
		g.log = f
		c.grantors = append(c.grantors, g)
	}
	for j := 0; j < m; j++ {
		s := &sidecar{name: fmt.Sprintf("s%d", j+1), host: lab.Host(n + 1 + j)}
		sd := filepath.Join(sockDir, s.name)
		if err := os.MkdirAll(sd, 0o700); err != nil {
			return nil, err
		}
		s.socket = filepath.Join(sd, "leaseside.sock")
		f, err := os.Create(filepath.Join(dir, "logs", s.name+".log"))
		if err != nil {
			return nil, err
		}
		s.log = f
		c.sidecars = append(c.sidecars, s)
	}
	if err := c.makeTLS(); err != nil {
		return nil, err
	}
	return c, nil
}

// startGrantor starts g's process (again), in a time namespace whose
// BOOTTIME is clocks ahead of the machine's when clocks is not 0. It does
// not wait for it to be ready.
func (c *cluster) startGrantor(g *grantor, bootstrap int, clocks time.Duration) error {
	args := c.grantorArgs(g, bootstrap)
	cmd := c.commandOn(context.Background(), g.host, args...)
	if clocks != 0 {
		// MONOTONIC moves with BOOTTIME when the offset is negative, and
		// half as far when it is positive: BOOTTIME never reads behind
		// MONOTONIC (a namespace where it does is broken, and leaseside
		// refuses to start in it).
		mono := clocks
		if clocks > 0 {
			mono = clocks / 2
		}
		cmd = g.host.CommandWithClocks(clocks, mono, c.bin, args...)
		cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	}
	ready := make(chan struct{})
	var once sync.Once
	p, err := startProc("grantor "+g.id, cmd, g.log, func(line string, at int64) {
		switch {
		case strings.Contains(line, "leaseside grantor ready"):
			once.Do(func() { close(ready) })
		case strings.Contains(line, "took office"):
			g.mu.Lock()
			g.office, g.tookAt = true, at
			g.mu.Unlock()
			c.officeChanged()
		case strings.Contains(line, "left office"):
			g.mu.Lock()
			g.office = false
			g.mu.Unlock()
			c.officeChanged()
		case strings.Contains(line, "promoting a grantor that answers to voter"):
			if m := nodeIDRE.FindStringSubmatch(line); m != nil {
				c.officeMu.Lock()
				c.promoted[m[1]] = at
				c.officeMu.Unlock()
				c.officeChanged()
			}
		}
		c.rec.productLine("grantor "+g.id, line, at)
	})
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.proc, g.ready, g.office, g.stopped, g.clocks = p, ready, false, false, clocks
	g.mu.Unlock()
	go func() {
		<-p.exited
		if !p.expected.Load() && !c.isStopping() {
			c.rec.productLine("grantor "+g.id, fmt.Sprintf("fatal error: exited by itself (%v)", p.state), boottime())
		}
	}()
	return nil
}

// nodeIDRE finds the node_id of a log line.
var nodeIDRE = regexp.MustCompile(`node_id=(\S+)`)

// waitPromoted waits until a leader promoted grantor id to voter at since
// or later, or d passes; it reports whether it was.
func (c *cluster) waitPromoted(id string, since int64, d time.Duration) bool {
	timeout := time.After(d)
	for {
		changed := c.officeWait()
		c.officeMu.Lock()
		at, ok := c.promoted[id]
		c.officeMu.Unlock()
		if ok && at >= since {
			return true
		}
		select {
		case <-changed:
		case <-timeout:
			return false
		}
	}
}

func (c *cluster) isStopping() bool {
	c.officeMu.Lock()
	defer c.officeMu.Unlock()
	return c.stopping
}

// waitReady waits for the ready line of g's current process.
func (g *grantor) waitReady(d time.Duration) error {
	g.mu.Lock()
	p, ready := g.proc, g.ready
	g.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-p.exited:
		return fmt.Errorf("grantor %s exited before it was ready:\n%s", g.id, p.lastLines())
	case <-time.After(d):
		return fmt.Errorf("grantor %s not ready after %v:\n%s", g.id, d, p.lastLines())
	}
}

// running reports whether g has a live process.
func (g *grantor) running() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.proc != nil && !g.proc.done()
}

// current returns g's process (nil before the first start).
func (g *grantor) current() *proc {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.proc
}

// leader returns the grantor that leads as far as the logs tell: of the
// running members whose last word on office is that they took it, the
// one that took it last; nil when none.
func (c *cluster) leader() *grantor {
	var best *grantor
	var at int64
	for _, g := range c.grantors {
		g.mu.Lock()
		ok := g.proc != nil && !g.proc.done() && g.office && g.tookAt > at
		if ok {
			best, at = g, g.tookAt
		}
		g.mu.Unlock()
	}
	return best
}

// waitLeader waits until a running grantor that is not stopped leads,
// having taken office at since or later, or d passes.
func (c *cluster) waitLeader(since int64, d time.Duration) *grantor {
	timeout := time.After(d)
	for {
		changed := c.officeWait()
		if l := c.leader(); l != nil {
			l.mu.Lock()
			ok := l.tookAt >= since && !l.stopped
			l.mu.Unlock()
			if ok {
				return l
			}
		}
		select {
		case <-changed:
		case <-timeout:
			return nil
		}
	}
}

// startSidecar starts s's daemon (again) and waits until it serves.
func (c *cluster) startSidecar(s *sidecar) error {
	os.Remove(s.socket) // a daemon killed with -9 leaves its socket behind
	ready := make(chan struct{})
	var once sync.Once
	p, err := startProc("sidecar "+s.name, c.commandOn(context.Background(), s.host, c.sidecarArgs(s)...), s.log, func(line string, at int64) {
		if strings.Contains(line, "leaseside daemon ready") {
			once.Do(func() { close(ready) })
		}
		c.rec.productLine("sidecar "+s.name, line, at)
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.proc, s.ready, s.stopped = p, ready, false
	s.mu.Unlock()
	go func() {
		<-p.exited
		if !p.expected.Load() && !c.isStopping() {
			c.rec.productLine("sidecar "+s.name, fmt.Sprintf("fatal error: exited by itself (%v)", p.state), boottime())
		}
	}()
	select {
	case <-ready:
		return nil
	case <-p.exited:
		return fmt.Errorf("sidecar %s exited before it was ready:\n%s", s.name, p.lastLines())
	case <-time.After(readyTimeout):
		return fmt.Errorf("sidecar %s not ready after %v:\n%s", s.name, readyTimeout, p.lastLines())
	}
}

// kill kill -9s the sidecar's daemon.
func (s *sidecar) kill() error {
	return s.current().kill()
}

func (s *sidecar) current() *proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// start starts the member grantors and waits for them and a leader, then
// the sidecars.
func (c *cluster) start() error {
	n := c.members()
	for _, g := range c.grantors {
		if g.member {
			if err := c.startGrantor(g, n, 0); err != nil {
				return err
			}
		}
	}
	for _, g := range c.grantors {
		if g.member {
			if err := g.waitReady(readyTimeout); err != nil {
				return err
			}
		}
	}
	if c.waitLeader(0, readyTimeout) == nil {
		return fmt.Errorf("no grantor took office within %v", readyTimeout)
	}
	for _, s := range c.sidecars {
		if err := c.startSidecar(s); err != nil {
			return err
		}
	}
	return nil
}

// watch follows every sidecar's events (a `watch` of all leases on its
// socket) into the history until ctx ends, reconnecting after the daemon
// restarts.
func (c *cluster) watch(ctx context.Context, wg *sync.WaitGroup) {
	for _, s := range c.sidecars {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c.watchOnce(ctx, s)
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond): // the daemon restarts: no event says when
				}
			}
		}()
	}
}

// watchOnce follows s's events until the connection ends or ctx does.
func (c *cluster) watchOnce(ctx context.Context, s *sidecar) {
	cl := &ipc.Client{Socket: s.socket}
	defer cl.Close()
	ch := make(chan *ipc.Event, 1024)
	cl.Notify(ch)
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := cl.Watch(wctx, "")
	cancel()
	if err != nil {
		return
	}
	for {
		select {
		case ev := <-ch:
			c.rec.event(s.name, ev, boottime())
		case <-cl.Closed():
			return
		case <-ctx.Done():
			return
		}
	}
}

// stop ends every process: SIGCONT first for those a fault stopped, then
// SIGKILL. Logs are closed.
func (c *cluster) stop() {
	c.officeMu.Lock()
	c.stopping = true
	c.officeMu.Unlock()
	var procs []*proc
	for _, g := range c.grantors {
		if p := g.current(); p != nil {
			procs = append(procs, p)
		}
	}
	for _, s := range c.sidecars {
		if p := s.current(); p != nil {
			procs = append(procs, p)
		}
	}
	for _, p := range procs {
		p.signal(syscall.SIGCONT)
		p.kill()
	}
	for _, g := range c.grantors {
		g.log.Close()
	}
	for _, s := range c.sidecars {
		s.log.Close()
	}
}

// grantorHost and sidecarHost are the lab indexes of the hosts.
func (g *grantor) hostIndex() int { return g.host.Index() }
func (s *sidecar) hostIndex() int { return s.host.Index() }

// rpcAddrs lists the gRPC addresses of the running member grantors.
func (c *cluster) rpcAddrs() []string {
	var a []string
	for _, g := range c.grantors {
		if g.member && g.running() {
			a = append(a, net.JoinHostPort(g.host.IP(), strconv.Itoa(rpcPort)))
		}
	}
	return a
}

// waitGossipGone waits until the grantors' gossip no longer calls grantor
// id alive (`leaseside members --json`, asked every half second: gossip
// gives the suite no event), or d passes; it reports whether it did.
func (c *cluster) waitGossipGone(id string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		args := append([]string{"members", "--json"}, c.operatorArgs(c.rpcAddrs())...)
		if out, err := c.command(c.sidecars[0].host, args...); err == nil {
			var m struct {
				Members []ipc.Member `json:"members"`
			}
			if json.Unmarshal([]byte(out), &m) == nil {
				alive := false
				for _, mb := range m.Members {
					alive = alive || mb.Role == "grantor" && (mb.Name == id || mb.NodeID == id) && mb.GossipState == "alive"
				}
				if !alive {
					return true
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return false
}
