package integration

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/internal/netlab"
	"github.com/leaseside/leaseside/ipc"
)

// The harness of the cluster tests (cluster_test.go): grantor and sidecar
// processes of the built binary, on loopback or on netlab hosts, whose
// output lines and lease events are recorded as they come, each stamped
// with the CLOCK_BOOTTIME instant the test saw it. Every process of the
// machine reads the same BOOTTIME (network namespaces have no clock of
// their own), so instants from the test, the sidecars' deadlines and the
// grantors' logs all compare.

// boottime reads CLOCK_BOOTTIME.
func boottime() clockwatch.Instant { return clockwatch.System.Now() }

// stamped is something the test saw, and when.
type stamped[T any] struct {
	v  T
	at clockwatch.Instant
}

// timeline records things in the order they come and lets tests wait for
// one, without polling. Safe for concurrent use.
type timeline[T any] struct {
	mu      sync.Mutex
	items   []stamped[T]
	changed chan struct{} // closed and replaced on every add and at end
	ended   bool
}

func newTimeline[T any]() *timeline[T] { return &timeline[T]{changed: make(chan struct{})} }

func (tl *timeline[T]) add(v T) {
	at := boottime()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.items = append(tl.items, stamped[T]{v, at})
	close(tl.changed)
	tl.changed = make(chan struct{})
}

// end says nothing more will come.
func (tl *timeline[T]) end() {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.ended = true
	close(tl.changed)
	tl.changed = make(chan struct{})
}

// mark is the index the next item will have: wait from it for what comes
// after now.
func (tl *timeline[T]) mark() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return len(tl.items)
}

func (tl *timeline[T]) all() []stamped[T] {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]stamped[T](nil), tl.items...)
}

// errEnded is what wait returns when the timeline ended without a match.
var errEnded = errors.New("ended without a match")

// wait returns the first item at index from or later that matches.
func (tl *timeline[T]) wait(ctx context.Context, from int, match func(T) bool) (int, stamped[T], error) {
	for {
		tl.mu.Lock()
		for i := from; i < len(tl.items); i++ {
			if match(tl.items[i].v) {
				it := tl.items[i]
				tl.mu.Unlock()
				return i, it, nil
			}
		}
		from = len(tl.items)
		ended, changed := tl.ended, tl.changed
		tl.mu.Unlock()
		if ended {
			return 0, stamped[T]{}, errEnded
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, stamped[T]{}, ctx.Err()
		}
	}
}

// process is a running leaseside (or other) process whose stdout and
// stderr lines are recorded, merged, in out.
type process struct {
	name   string
	cmd    *exec.Cmd
	out    *timeline[string]
	exited chan struct{} // closed when Wait has returned
	state  *os.ProcessState
}

// startProcess starts cmd; t's cleanup kills it if it still runs, and
// prints the end of its output if the test failed.
func startProcess(t *testing.T, name string, cmd *exec.Cmd) *process {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	w.Close()
	p := &process{name: name, cmd: cmd, out: newTimeline[string](), exited: make(chan struct{})}
	go func() {
		defer r.Close()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.out.add(sc.Text())
		}
		p.out.end()
	}()
	go func() {
		cmd.Wait()
		p.state = cmd.ProcessState
		close(p.exited)
	}()
	t.Cleanup(func() {
		if !p.done() {
			cmd.Process.Kill()
			select {
			case <-p.exited:
			case <-time.After(timeout):
				t.Errorf("%s: still running %v after SIGKILL", name, timeout)
			}
		}
		if t.Failed() {
			t.Logf("%s output (last 60 lines):\n%s", name, p.tail(60))
		}
	})
	return p
}

// stopped runs f while p is stopped (SIGSTOP, then SIGCONT), so that what
// f does happens while p is where its last line said, however long f
// takes on a loaded machine: an example that works for a few seconds
// after a line is still at work when another caller ends its lease.
func (p *process) stopped(t *testing.T, f func()) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %s: %v", p.name, err)
	}
	defer p.cmd.Process.Signal(syscall.SIGCONT)
	f()
}

func (p *process) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// tail returns the last n lines of the process's output.
func (p *process) tail(n int) string {
	lines := p.out.all()
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.v)
		b.WriteByte('\n')
	}
	return b.String()
}

// waitLine waits for an output line from index from on that contains
// every one of subs, and fails the test if the process ends or timeout
// passes first.
func (p *process) waitLine(t *testing.T, from int, subs ...string) (int, stamped[string]) {
	t.Helper()
	return p.waitMatch(t, from, fmt.Sprintf("a line with %q", subs), containsAll(subs...))
}

// waitMatch waits for an output line from index from on that matches.
func (p *process) waitMatch(t *testing.T, from int, what string, match func(string) bool) (int, stamped[string]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	i, l, err := p.out.wait(ctx, from, match)
	if err != nil {
		t.Fatalf("%s: no %s (%v); last lines:\n%s", p.name, what, err, p.tail(30))
	}
	return i, l
}

func containsAll(subs ...string) func(string) bool {
	return func(s string) bool {
		for _, sub := range subs {
			if !strings.Contains(s, sub) {
				return false
			}
		}
		return true
	}
}

// kill sends SIGKILL, waits for the process to be gone, and returns the
// instant the signal was sent.
func (p *process) kill(t *testing.T) clockwatch.Instant {
	t.Helper()
	at := boottime()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !p.done() {
		t.Fatalf("kill -9 %s: %v", p.name, err)
	}
	p.waitExit(t)
	return at
}

// term sends SIGTERM and waits for a clean exit (status 0).
func (p *process) term(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.waitExit(t); code != 0 {
		t.Fatalf("%s exited with status %d after SIGTERM; last lines:\n%s", p.name, code, p.tail(30))
	}
}

// waitExit waits for the process to end and returns its exit status (-1
// when a signal ended it).
func (p *process) waitExit(t *testing.T) int {
	t.Helper()
	select {
	case <-p.exited:
		// Its output is all in once the pipe is drained: a test that
		// reads the tail right after the exit must find the last lines.
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		p.out.wait(ctx, p.out.mark(), func(string) bool { return false })
		return p.state.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("%s still running after %v", p.name, timeout)
	}
	return 0
}

// freeLoopbackPorts returns n distinct ports of 127.0.0.1 that are free
// for TCP and for UDP (gossip uses both on one port). They are picked
// below the kernel's ephemeral range, so that no program asking for "any
// port" gets one of them while a test has a node stopped before its
// restart on the same addresses; another test binding the same port
// explicitly is unlikely enough.
func freeLoopbackPorts(t *testing.T, n int) []int {
	t.Helper()
	low := 32768 // the kernel's default ephemeral range starts here
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 12000 {
				low = v
			}
		}
	}
	var ports []int
	var closers []interface{ Close() error }
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			t.Fatalf("found only %d free loopback ports below %d", len(ports), low)
		}
		port := 10000 + mrand.IntN(low-10000)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp4", addr)
		if err != nil {
			continue
		}
		closers = append(closers, ln)
		pc, err := net.ListenPacket("udp4", addr)
		if err != nil {
			continue
		}
		closers = append(closers, pc)
		ports = append(ports, port)
	}
	return ports
}

// Ports of the grantors on netlab hosts: every host has its own address,
// so every grantor uses the same ones.
const (
	labRPCPort    = 7400
	labRaftPort   = 7401
	labGossipPort = 7402
)

// grantorNode is one grantor of a cluster: its fixed addresses and data
// directory, which a restart reuses, and its current process.
type grantorNode struct {
	id                string
	host              *netlab.Host // nil: on the test machine's loopback
	ip                string
	rpc, raft, gossip int
	dataDir           string
	join              []string // gossip seeds
	expect            int      // --bootstrap-expect
	keyFile           string   // --gossip-key-file, when not ""
	extra             []string // more flags
	tlsDir            string   // the cluster's certificates (tlsArgs), when not ""
	proc              *process // the current (or last) run
	alive             bool
}

func (n *grantorNode) rpcAddr() string    { return net.JoinHostPort(n.ip, strconv.Itoa(n.rpc)) }
func (n *grantorNode) raftAddr() string   { return net.JoinHostPort(n.ip, strconv.Itoa(n.raft)) }
func (n *grantorNode) gossipAddr() string { return net.JoinHostPort(n.ip, strconv.Itoa(n.gossip)) }

func (n *grantorNode) args() []string {
	args := []string{"grantor",
		"--node-id", n.id,
		"--data-dir", n.dataDir,
		"--rpc-addr", n.rpcAddr(),
		"--raft-addr", n.raftAddr(),
		"--gossip-addr", n.gossipAddr(),
		"--bootstrap-expect", strconv.Itoa(n.expect),
	}
	if len(n.join) > 0 {
		args = append(args, "--join", strings.Join(n.join, ","))
	}
	if n.keyFile != "" {
		args = append(args, "--gossip-key-file", n.keyFile)
	}
	switch {
	case n.tlsDir != "":
		args = append(args, tlsArgs(n.tlsDir, "grantor", n.id)...)
	case n.host != nil:
		// Off loopback without TLS: refused without --insecure.
		args = append(args, "--insecure")
	}
	return append(args, n.extra...)
}

// tlsArgs are the --tls-* flags for the certificate of role and name in
// dir, as `leaseside tls cert create --dir dir` names it.
func tlsArgs(dir, role, name string) []string {
	return []string{"--tls-ca", filepath.Join(dir, "ca.pem"),
		"--tls-cert", filepath.Join(dir, role+"-"+name+".pem"),
		"--tls-key", filepath.Join(dir, role+"-"+name+"-key.pem")}
}

// cluster is a set of grantor nodes of one raft group.
type cluster struct {
	t     *testing.T
	nodes []*grantorNode
}

// newLoopbackCluster lays out n grantors on 127.0.0.1, each with ports of
// its own, all expecting n voters; node 0 starts the gossip cluster and
// the others join it. Nothing is started.
func newLoopbackCluster(t *testing.T, n int) *cluster {
	t.Helper()
	ports := freeLoopbackPorts(t, 3*n)
	c := &cluster{t: t}
	for i := range n {
		c.nodes = append(c.nodes, &grantorNode{
			id: fmt.Sprintf("g%d", i+1), ip: "127.0.0.1",
			rpc: ports[3*i], raft: ports[3*i+1], gossip: ports[3*i+2],
			dataDir: t.TempDir(), expect: n,
		})
	}
	c.seedJoins()
	return c
}

// newLabCluster lays out one grantor on each of the given netlab hosts.
func newLabCluster(t *testing.T, lab *netlab.Lab, hosts ...int) *cluster {
	t.Helper()
	c := &cluster{t: t}
	for i, h := range hosts {
		host := lab.Host(h)
		c.nodes = append(c.nodes, &grantorNode{
			id: fmt.Sprintf("g%d", i+1), host: host, ip: host.IP(),
			rpc: labRPCPort, raft: labRaftPort, gossip: labGossipPort,
			dataDir: t.TempDir(), expect: len(hosts),
		})
	}
	c.seedJoins()
	return c
}

// seedJoins points every node but the first at the first one's gossip.
func (c *cluster) seedJoins() {
	for _, n := range c.nodes[1:] {
		n.join = []string{c.nodes[0].gossipAddr()}
	}
}

// start starts node i (again, on the same addresses and data) and does
// not wait for it.
func (c *cluster) start(i int) {
	c.t.Helper()
	n := c.nodes[i]
	if n.alive {
		c.t.Fatalf("grantor %s started twice", n.id)
	}
	var cmd *exec.Cmd
	if n.host != nil {
		cmd = n.host.Command(bin, n.args()...)
	} else {
		cmd = exec.Command(bin, n.args()...)
	}
	n.proc = startProcess(c.t, "grantor "+n.id, cmd)
	n.alive = true
}

// waitReady waits for node i's ready line.
func (c *cluster) waitReady(i int) {
	c.t.Helper()
	c.nodes[i].proc.waitLine(c.t, 0, "leaseside grantor ready")
}

// startAll starts every node and waits until all are ready. The first
// node is the others' gossip seed; they start once its gossip is up (it
// logs "node started" after that, and is ready no earlier), so that their
// joins succeed at once rather than on a background retry.
func (c *cluster) startAll() {
	c.t.Helper()
	c.start(0)
	c.nodes[0].proc.waitMatch(c.t, 0, "node started or ready line", func(s string) bool {
		return strings.Contains(s, "grantor: node started") || strings.Contains(s, "leaseside grantor ready")
	})
	for i := range c.nodes[1:] {
		c.start(i + 1)
	}
	for i := range c.nodes {
		c.waitReady(i)
	}
}

// kill sends node i SIGKILL and returns when it is gone, with the instant
// of the signal.
func (c *cluster) kill(i int) clockwatch.Instant {
	c.t.Helper()
	n := c.nodes[i]
	at := n.proc.kill(c.t)
	n.alive = false
	return at
}

// stop sends node i SIGTERM and waits for a clean exit.
func (c *cluster) stop(i int) {
	c.t.Helper()
	n := c.nodes[i]
	n.proc.term(c.t)
	n.alive = false
}

// marks returns, per node, where its output stands now (0 for nodes never
// started): wait from them for what happens after this point.
func (c *cluster) marks() []int {
	m := make([]int, len(c.nodes))
	for i, n := range c.nodes {
		if n.proc != nil {
			m[i] = n.proc.out.mark()
		}
	}
	return m
}

// marks0 is marks for processes just started: from their first line.
func (c *cluster) marks0() []int { return make([]int, len(c.nodes)) }

// office is a grantor taking office as raft leader: the lessor's "took
// office" line, with the tE it logged (the instant from which it waits
// out every old term: it grants no lease held before it took office until
// tE + d(1+rho) + eps).
type office struct {
	node int
	tE   clockwatch.Instant
	seen clockwatch.Instant // when the test read the line
}

var tERE = regexp.MustCompile(`\btE=boot\+([0-9]+\.[0-9]+)s`)

// waitOffice waits until one of the nodes among (all alive nodes when
// empty) logs that it took office after its mark in from.
func (c *cluster) waitOffice(from []int, among ...int) office {
	c.t.Helper()
	if len(among) == 0 {
		for i, n := range c.nodes {
			if n.alive {
				among = append(among, i)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	type found struct {
		node int
		line stamped[string]
	}
	ch := make(chan found, len(among))
	for _, i := range among {
		out, from := c.nodes[i].proc.out, from[i]
		go func() {
			if _, l, err := out.wait(ctx, from, containsAll("took office")); err == nil {
				ch <- found{i, l}
			}
		}()
	}
	select {
	case f := <-ch:
		return c.officeOf(f.node, f.line)
	case <-ctx.Done():
		var tails strings.Builder
		for _, i := range among {
			fmt.Fprintf(&tails, "--- grantor %s:\n%s", c.nodes[i].id, c.nodes[i].proc.tail(15))
		}
		c.t.Fatalf("no grantor among %v took office within %v\n%s", among, timeout, tails.String())
	}
	return office{}
}

// officeOf parses node i's "took office" line.
func (c *cluster) officeOf(i int, line stamped[string]) office {
	c.t.Helper()
	m := tERE.FindStringSubmatch(line.v)
	if m == nil {
		c.t.Fatalf("grantor %s: no tE in %q", c.nodes[i].id, line.v)
	}
	secs, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		c.t.Fatal(err)
	}
	return office{node: i, tE: clockwatch.Instant(math.Round(secs * 1e9)), seen: line.at}
}

// currentLeader returns the office of the node that leads now, from the
// logs: of the live nodes whose last word on office is that they took it,
// the one that took it last. If none has, it waits for one.
func (c *cluster) currentLeader() office {
	c.t.Helper()
	var best *office
	for i, n := range c.nodes {
		if !n.alive {
			continue
		}
		var last stamped[string]
		for _, l := range n.proc.out.all() {
			if strings.Contains(l.v, "took office") || strings.Contains(l.v, "left office") {
				last = l
			}
		}
		if strings.Contains(last.v, "took office") {
			if o := c.officeOf(i, last); best == nil || o.tE.After(best.tE) {
				best = &o
			}
		}
	}
	if best == nil {
		return c.waitOffice(c.marks())
	}
	return *best
}

// addrs joins the chosen address of the given nodes (all when none).
func (c *cluster) addrs(addr func(*grantorNode) string, idx ...int) string {
	if len(idx) == 0 {
		for i := range c.nodes {
			idx = append(idx, i)
		}
	}
	var s []string
	for _, i := range idx {
		s = append(s, addr(c.nodes[i]))
	}
	return strings.Join(s, ",")
}

func (c *cluster) rpcAddrs(idx ...int) string {
	return c.addrs((*grantorNode).rpcAddr, idx...)
}

func (c *cluster) gossipAddrs(idx ...int) string {
	return c.addrs((*grantorNode).gossipAddr, idx...)
}

// others lists the node indexes other than the given ones.
func (c *cluster) others(not ...int) []int {
	var o []int
	for i := range c.nodes {
		skip := false
		for _, n := range not {
			skip = skip || i == n
		}
		if !skip {
			o = append(o, i)
		}
	}
	return o
}

// sidecar is a running `leaseside daemon`.
type sidecar struct {
	*process
	socket string
	events *timeline[*ipc.Event] // every event of the host, from a watch
	watch  *ipc.Client
}

// startSidecar starts `leaseside daemon` with args (--grantors or --join
// and the like) on host (nil: the test machine), waits until it is ready,
// and subscribes to all of its lease events.
func startSidecar(t *testing.T, name string, host *netlab.Host, args ...string) *sidecar {
	t.Helper()
	return startSidecarOn(t, name, host, tempSocket(t), args...)
}

// startSidecarOn is startSidecar on a given socket (a restart uses the
// socket, and the state beside it, of the sidecar before it).
func startSidecarOn(t *testing.T, name string, host *netlab.Host, socket string, args ...string) *sidecar {
	t.Helper()
	full := append([]string{"daemon", "--socket", socket}, args...)
	if host != nil && !slices.Contains(args, "--tls-ca") {
		// Off loopback without TLS: refused without --insecure.
		full = append(full, "--insecure")
	}
	var cmd *exec.Cmd
	if host != nil {
		cmd = host.Command(bin, full...)
	} else {
		cmd = exec.Command(bin, full...)
	}
	s := &sidecar{process: startProcess(t, name, cmd), socket: socket}
	s.waitLine(t, 0, "leaseside daemon ready")
	s.events = newTimeline[*ipc.Event]()
	s.watch = &ipc.Client{Socket: socket}
	ch := make(chan *ipc.Event, 4096)
	s.watch.Notify(ch)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.watch.Watch(ctx, ""); err != nil {
		t.Fatalf("%s: watch: %v", name, err)
	}
	go func() {
		for {
			select {
			case ev := <-ch:
				s.events.add(ev)
			case <-s.watch.Closed():
				// Drain what came before the end.
				for {
					select {
					case ev := <-ch:
						s.events.add(ev)
					default:
						s.events.end()
						return
					}
				}
			}
		}
	}()
	t.Cleanup(func() {
		s.watch.Close()
		if t.Failed() {
			var b strings.Builder
			for _, e := range s.events.all() {
				j, _ := json.Marshal(e.v)
				fmt.Fprintf(&b, "%v %s\n", e.at, j)
			}
			t.Logf("%s events:\n%s", name, b.String())
		}
	})
	return s
}

// waitEvent waits for an event of lease (any lease when "") of the given
// kind from index from of the sidecar's events.
func (s *sidecar) waitEvent(t *testing.T, from int, kind, lease string) (int, stamped[*ipc.Event]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	i, ev, err := s.events.wait(ctx, from, func(e *ipc.Event) bool {
		return e.Event == kind && (lease == "" || e.Lease == lease)
	})
	if err != nil {
		t.Fatalf("%s: no %s event for %q (%v)", s.name, kind, lease, err)
	}
	return i, ev
}

// lost lists the lost events the sidecar reported so far.
func (s *sidecar) lost() []stamped[*ipc.Event] {
	var l []stamped[*ipc.Event]
	for _, e := range s.events.all() {
		if e.v.Event == ipc.EventLost {
			l = append(l, e)
		}
	}
	return l
}

// lastDeadline is the latest deadline the sidecar reported for the grant
// (lease, token), from its renewed events, or from def if later.
func (s *sidecar) lastDeadline(lease, token string, def int64) clockwatch.Instant {
	dl := def
	for _, e := range s.events.all() {
		if e.v.Event == ipc.EventRenewed && e.v.Lease == lease && e.v.Token == token {
			dl = max(dl, e.v.DeadlineBoottimeNs)
		}
	}
	return clockwatch.Instant(dl)
}

// client returns a new Go client of the sidecar, closed at cleanup.
func (s *sidecar) client(t *testing.T) *ipc.Client {
	c := &ipc.Client{Socket: s.socket}
	t.Cleanup(func() { c.Close() })
	return c
}

// writeGossipKey writes a new random gossip key file (AES-256, base64).
func writeGossipKey(t *testing.T) string {
	t.Helper()
	var k [32]byte
	if _, err := rand.Read(k[:]); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(k[:])+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// tctx is a context bounded by the tests' timeout.
func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// ms renders a duration in milliseconds for the logs of measurements.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 0, 64) + "ms"
}

// longestPause is the longest stall (a clock watcher's pause event) any of
// the processes logged so far: grantors and sidecars log "clock event
// kind=pause length=D". A bound on how soon something happened is only
// meaningful beyond the stalls of those who had to act.
func longestPause(procs ...*process) time.Duration {
	var longest time.Duration
	for _, p := range procs {
		for _, l := range p.out.all() {
			if !strings.Contains(l.v, "clock event") || !strings.Contains(l.v, "kind=pause") {
				continue
			}
			_, rest, ok := strings.Cut(l.v, "length=")
			if !ok {
				continue
			}
			if d, err := time.ParseDuration(strings.Fields(rest)[0]); err == nil {
				longest = max(longest, d)
			}
		}
	}
	return longest
}

// grantorProcs lists the processes of the cluster's grantors that ran.
func (c *cluster) grantorProcs() []*process {
	var ps []*process
	for _, n := range c.nodes {
		if n.proc != nil {
			ps = append(ps, n.proc)
		}
	}
	return ps
}
