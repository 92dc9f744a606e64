package chaos

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leaseside/leaseside/internal/chaos/workload"
)

// clientProc is one client: a process on a sidecar host, restarted
// (with the next incarnation) whenever it exits, until the run stops.
type clientProc struct {
	name    string
	sidecar *sidecar
	cfg     workload.Config
	log     *os.File

	mu          sync.Mutex
	proc        *proc
	incarnation int
	stopped     bool // SIGSTOPped by a fault
}

// clients supervises the clients of a run.
type clients struct {
	bin  string // the chaos client program
	rec  *recorder
	list []*clientProc

	mu       sync.Mutex
	stopping bool
	wg       sync.WaitGroup
}

// newClients lays out per clients on each sidecar host, then prims
// clients of the semaphore and the election (sNp1, ...), with cfg as the
// template of their configuration.
func newClients(bin, logDir string, sidecars []*sidecar, per, prims int, cfg workload.Config, rec *recorder) (*clients, error) {
	cs := &clients{bin: bin, rec: rec}
	add := func(s *sidecar, name string, isPrims bool) error {
		c := &clientProc{name: name, sidecar: s, cfg: cfg}
		c.cfg.Client, c.cfg.Socket, c.cfg.Prims = c.name, s.socket, isPrims
		c.cfg.Seed = cfg.Seed ^ uint64(len(cs.list)+1)<<32
		f, err := os.Create(filepath.Join(logDir, c.name+".log"))
		if err != nil {
			return err
		}
		c.log = f
		cs.list = append(cs.list, c)
		return nil
	}
	for _, s := range sidecars {
		for i := 1; i <= per; i++ {
			if err := add(s, fmt.Sprintf("%sc%d", s.name, i), false); err != nil {
				return nil, err
			}
		}
	}
	for _, s := range sidecars {
		for i := 1; i <= prims; i++ {
			if err := add(s, fmt.Sprintf("%sp%d", s.name, i), true); err != nil {
				return nil, err
			}
		}
	}
	return cs, nil
}

// start starts every client, each supervised on a goroutine of its own.
func (cs *clients) start() error {
	for _, c := range cs.list {
		if err := cs.startOne(c); err != nil {
			return err
		}
		cs.wg.Add(1)
		go cs.supervise(c)
	}
	return nil
}

// startOne starts the next incarnation of c.
func (cs *clients) startOne(c *clientProc) error {
	c.mu.Lock()
	c.incarnation++
	cfg := c.cfg
	cfg.Incarnation = c.incarnation
	c.mu.Unlock()
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	cmd := c.sidecar.host.Command(cs.bin)
	cmd.Env = append(os.Environ(), workload.EnvConfig+"="+string(b))
	p, err := startProc("client "+c.name, cmd, c.log, func(line string, at int64) { cs.rec.clientLine("client "+c.name, line, at) })
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.proc, c.stopped = p, false
	c.mu.Unlock()
	return nil
}

// errStopping says the run stops: no restart.
var errStopping = errors.New("stopping")

// supervise restarts c whenever it exits, until the run stops.
func (cs *clients) supervise(c *clientProc) {
	defer cs.wg.Done()
	for {
		c.mu.Lock()
		p, inc := c.proc, c.incarnation
		c.mu.Unlock()
		<-p.exited
		at := boottime()
		cs.rec.exit(ClientExit{Client: c.name, Incarnation: inc, Pid: p.pid(), Killed: p.killedBySignal(), At: at})
		if p.state != nil && !p.killedBySignal() && p.state.ExitCode() != 0 {
			// A client exits 0 (or is killed): anything else is its crash
			// (2 for a panic, 66 for a race).
			cs.rec.productLine("client "+c.name, fmt.Sprintf("fatal error: exited with code %d", p.state.ExitCode()), at)
		}
		// Under cs.mu, so that stop sees every process started.
		cs.mu.Lock()
		err := errStopping
		if !cs.stopping {
			err = cs.startOne(c)
		}
		cs.mu.Unlock()
		if err != nil {
			if err != errStopping {
				fmt.Fprintf(c.log, "restarting %s: %v\n", c.name, err)
			}
			return
		}
	}
}

// current returns c's process.
func (c *clientProc) current() *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc
}

// stop kills every client (SIGKILL, after SIGCONT for those stopped):
// the leases they hold end by their owners' deaths.
func (cs *clients) stop() {
	cs.mu.Lock()
	cs.stopping = true
	cs.mu.Unlock()
	for _, c := range cs.list {
		p := c.current()
		p.signal(syscall.SIGCONT)
		p.signal(syscall.SIGKILL)
	}
	done := make(chan struct{})
	go func() {
		cs.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(procTimeout):
	}
	for _, c := range cs.list {
		c.log.Close()
	}
}

// tails returns the last lines of every client, for messages.
func (cs *clients) tails() string {
	var b strings.Builder
	for _, c := range cs.list {
		fmt.Fprintf(&b, "--- client %s:\n%s\n", c.name, c.current().lastLines())
	}
	return b.String()
}
