package netlab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// helperEnv makes the test binary an echo server (see echoMain) instead of
// running tests, for a process to start on a host.
const helperEnv = "NETLAB_TEST_ECHO_ADDR"

func TestMain(m *testing.M) {
	if addr := os.Getenv(helperEnv); addr != "" {
		echoMain(addr)
		return
	}
	goleak.VerifyTestMain(m)
}

// echoMain listens on addr, says "ready" on stdout, and echoes every
// connection until killed.
func echoMain(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("ready")
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		go func() {
			io.Copy(c, c)
			c.Close()
		}()
	}
}

// timeout bounds every wait for something that should happen: generous,
// the machine is shared and slow at times; passing tests never reach it.
const timeout = 60 * time.Second

// cutTimeout bounds a dial that should fail because of a partition. A
// failure is what the test wants, so waiting longer would prove nothing
// more; a dial that succeeds in time on a cut link is a bug either way.
const cutTimeout = 300 * time.Millisecond

const echoPort = 7007

// echoProc is an echo server process running on a host.
type echoProc struct {
	cmd    *exec.Cmd
	exited chan error // receives cmd.Wait's result
}

// startEcho starts an echo server process on h, listening on all of h's
// addresses, and waits until it listens. It does not stop it: the lab's
// cleanup has to.
func startEcho(t *testing.T, h *Host) *echoProc {
	t.Helper()
	cmd := h.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+net.JoinHostPort("", strconv.Itoa(echoPort)))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &echoProc{cmd: cmd, exited: make(chan error, 1)}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ready <- sc.Scan() && sc.Text() == "ready"
		io.Copy(io.Discard, out)
		p.exited <- cmd.Wait()
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("echo server on host %d did not start", h.Index())
		}
	case <-time.After(timeout):
		t.Fatalf("echo server on host %d not ready after %v", h.Index(), timeout)
	}
	return p
}

// startEchoInProcess serves echo on h's echo port from a goroutine of the
// test binary, through Host.Listen. The lab's cleanup closes it all.
func startEchoInProcess(t *testing.T, h *Host) {
	t.Helper()
	ln, err := h.Listen("tcp", h.HostPort(echoPort))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				io.Copy(c, c)
				c.Close()
			}()
		}
	}()
}

// echo sends a line over c and checks that it comes back within d.
func echo(c net.Conn, d time.Duration) error {
	c.SetDeadline(time.Now().Add(d))
	msg := "hello from " + c.LocalAddr().String() + "\n"
	if _, err := io.WriteString(c, msg); err != nil {
		return err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if got != msg {
		return fmt.Errorf("echoed %q, want %q", got, msg)
	}
	return nil
}

// reach reports whether from reaches to's echo server: nil if it does,
// an error if it does not, within the bound d.
func reach(from, to *Host, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	c, err := from.DialContext(ctx, "tcp", to.HostPort(echoPort))
	if err != nil {
		return err
	}
	defer c.Close()
	return echo(c, d)
}

// checkReach checks, all at once, which hosts reach which: want[i][j]
// says whether host i reaches host j. Dials that should fail are bounded
// by cutTimeout, the others by timeout.
func checkReach(t *testing.T, l *Lab, after string, want [][]bool) {
	t.Helper()
	type result struct {
		from, to int
		err      error
	}
	results := make(chan result)
	n := 0
	for i, row := range want {
		for j, ok := range row {
			n++
			go func() {
				d := timeout
				if !ok {
					d = cutTimeout
				}
				results <- result{i, j, reach(l.Host(i), l.Host(j), d)}
			}()
		}
	}
	for ; n > 0; n-- {
		r := <-results
		switch {
		case want[r.from][r.to] && r.err != nil:
			t.Errorf("after %s: host %d cannot reach host %d: %v", after, r.from, r.to, r.err)
		case !want[r.from][r.to] && r.err == nil:
			t.Errorf("after %s: host %d reaches host %d through a partition", after, r.from, r.to)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// all is the reachability matrix of a healthy lab of n hosts.
func all(n int) [][]bool {
	m := make([][]bool, n)
	for i := range m {
		m[i] = make([]bool, n)
		for j := range m[i] {
			m[i][j] = true
		}
	}
	return m
}

func TestHostsReachEachOther(t *testing.T) {
	l := New(t, 3)
	for i, h := range l.Hosts() {
		if want := fmt.Sprintf("10.231.0.%d", i+1); h.IP() != want {
			t.Errorf("host %d has IP %s, want %s", i, h.IP(), want)
		}
	}
	startEcho(t, l.Host(0))
	startEchoInProcess(t, l.Host(1))
	startEcho(t, l.Host(2))
	checkReach(t, l, "New", all(3))
}

// A process started with Command is in the host's namespace: it sees
// only lo and eth0, with the host's address.
func TestCommandRunsOnHost(t *testing.T) {
	l := New(t, 2)
	out, err := l.Host(1).Command("ip", "-o", "-4", "addr", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("ip addr show: %v: %s", err, out)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		got = append(got, f[1]+" "+f[3])
	}
	want := "lo 127.0.0.1/8,eth0 10.231.0.2/24"
	if strings.Join(got, ",") != want {
		t.Errorf("addresses on host 1: %q, want %q", got, want)
	}
}

// Sockets from Listen and DialContext are in the host's namespace.
func TestSocketsOnHost(t *testing.T) {
	l := New(t, 2)
	// Host 1 does not have host 0's address: binding it fails there, as it
	// does in the test binary's own namespace.
	if ln, err := l.Host(1).Listen("tcp", l.Host(0).HostPort(0)); err == nil {
		ln.Close()
		t.Errorf("host 1 listens on host 0's address")
	}
	if ln, err := net.Listen("tcp", l.Host(0).HostPort(0)); err == nil {
		ln.Close()
		t.Errorf("the test binary listens on host 0's address")
	}
	if _, err := l.Host(0).DialContext(context.Background(), "tcp", "localhost:1"); err == nil {
		t.Errorf("DialContext accepted a host name")
	}
	if _, err := l.Host(0).Listen("udp", ":0"); err == nil {
		t.Errorf("Listen accepted udp")
	}
}

func TestPartitionAndHeal(t *testing.T) {
	l := New(t, 3)
	a, b := l.Host(0), l.Host(1)
	startEcho(t, a)
	startEcho(t, b)
	startEchoInProcess(t, l.Host(2))

	// A connection made before the partition stalls: nothing resets it,
	// and it resumes after Heal.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := b.DialContext(ctx, "tcp", a.HostPort(echoPort))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := echo(conn, timeout); err != nil {
		t.Fatal(err)
	}

	l.Isolate(0)
	if err := echo(conn, cutTimeout); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("echo over a connection through a partition: %v, want a timeout", err)
	}
	checkReach(t, l, "Isolate(0)", [][]bool{
		{true, false, false},
		{false, true, true},
		{false, true, true},
	})

	l.Heal()
	checkReach(t, l, "Heal", all(3))
	// The line sent during the partition comes back first; it is the same.
	if err := echo(conn, timeout); err != nil {
		t.Errorf("echo over the stalled connection after Heal: %v", err)
	}
}

func TestPartitionGroups(t *testing.T) {
	l := New(t, 3)
	for _, h := range l.Hosts() {
		startEchoInProcess(t, h)
	}
	l.Partition(0, 1)
	checkReach(t, l, "Partition(0, 1)", [][]bool{
		{true, true, false},
		{true, true, false},
		{false, false, true},
	})
	l.Isolate(1)
	checkReach(t, l, "Isolate(1)", [][]bool{
		{true, false, false},
		{false, true, false},
		{false, false, true},
	})
	l.Heal()
	checkReach(t, l, "Heal", all(3))
	l.Heal() // twice is fine
	checkReach(t, l, "Heal", all(3))
}

// Cleanup kills what runs on the hosts, and then nothing refers to the
// lab's namespaces any more (so the kernel destroys them and their
// devices), and nothing was ever made outside them.
func TestCleanupLeavesNothing(t *testing.T) {
	rootLinksBefore := rootLinks(t)
	var nss []*netns
	var procs []*echoProc
	var conns [2]net.Conn
	t.Run("lab", func(t *testing.T) {
		l := New(t, 3)
		nss = append(nss, l.sw)
		for _, h := range l.Hosts() {
			nss = append(nss, h.ns)
			procs = append(procs, startEcho(t, h))
		}
		// A grandchild too, not started by the test binary.
		sh := l.Host(1).Command("sh", "-c", "sleep 1000 & echo started; wait")
		out, err := sh.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := sh.Start(); err != nil {
			t.Fatal(err)
		}
		p := &echoProc{cmd: sh, exited: make(chan error, 1)}
		started := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(out)
			if sc.Scan() {
				close(started)
			}
			io.Copy(io.Discard, out)
			p.exited <- sh.Wait()
		}()
		procs = append(procs, p)
		select {
		case <-started:
		case <-time.After(timeout):
			t.Fatal("sh did not start sleep")
		}
		// A listener, and both ends of a connection, left open for the
		// lab to close.
		ln, err := l.Host(2).Listen("tcp", l.Host(2).HostPort(echoPort+1))
		if err != nil {
			t.Fatal(err)
		}
		if conns[0], err = l.Host(0).DialContext(context.Background(), "tcp", l.Host(2).HostPort(echoPort+1)); err != nil {
			t.Fatal(err)
		}
		if conns[1], err = ln.Accept(); err != nil {
			t.Fatal(err)
		}
		if pids, err := pidsIn(nss); err != nil || len(pids) != 5 {
			t.Fatalf("processes in the lab: %v, %v; want 5", pids, err)
		}
	})
	for _, p := range procs {
		select {
		case err := <-p.exited:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Errorf("%v exited with %v, want killed", p.cmd.Args, err)
			}
		case <-time.After(timeout):
			t.Fatalf("%v still running after cleanup", p.cmd.Args)
		}
	}
	for _, c := range conns {
		if c == nil {
			continue
		}
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
			t.Errorf("read from a connection after cleanup: %v, want net.ErrClosed", err)
		}
	}
	if pids, err := pidsIn(nss); err != nil || len(pids) != 0 {
		t.Errorf("processes in the lab after cleanup: %v, %v", pids, err)
	}
	for _, ref := range nsRefs(t, nss) {
		t.Errorf("lab namespace still referred to by %s", ref)
	}
	for name := range rootLinks(t) {
		if !rootLinksBefore[name] {
			t.Errorf("device %s appeared in the root namespace", name)
		}
	}
	if names, err := filepath.Glob("/var/run/netns/*"); err == nil && len(names) > 0 {
		t.Logf("named namespaces (netlab makes none): %v", names)
	}
}

// rootLinks lists the devices of the test binary's namespace that have a
// name netlab uses in its switch namespace.
func rootLinks(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	ours := regexp.MustCompile(`^(main|island[0-9]+|h[0-9]+)(@.*)?$`)
	links := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && ours.MatchString(strings.TrimSuffix(f[1], ":")) {
			links[f[1]] = true
		}
	}
	return links
}

// nsRefs lists what still refers to the namespaces nss: open files of
// any process, and mounts.
func nsRefs(t *testing.T, nss []*netns) []string {
	t.Helper()
	var refs []string
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		var st syscall.Stat_t
		if syscall.Stat(fd, &st) != nil {
			continue
		}
		for _, n := range nss {
			if n.is(&st) {
				refs = append(refs, fd)
			}
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nss {
		if tag := fmt.Sprintf("net:[%d]", n.ino); strings.Contains(string(mounts), tag) {
			refs = append(refs, "a mount of "+tag)
		}
	}
	return refs
}

// udpReach reports whether a datagram from host from arrives at host to
// within d: it sends one every 50ms until one arrives or d passes.
func udpReach(t *testing.T, from, to *Host, d time.Duration) bool {
	t.Helper()
	var rx, tx net.PacketConn
	if err := to.ns.run(func() (err error) {
		rx, err = net.ListenPacket("udp4", to.HostPort(0))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	if err := from.ns.run(func() (err error) {
		tx, err = net.ListenPacket("udp4", from.HostPort(0))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	got := make(chan bool, 1)
	go func() {
		rx.SetReadDeadline(time.Now().Add(d))
		_, _, err := rx.ReadFrom(make([]byte, 16))
		got <- err == nil
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := tx.WriteTo([]byte("x"), rx.LocalAddr()); err != nil {
			t.Fatalf("send from host %d: %v", from.Index(), err)
		}
		select {
		case ok := <-got:
			return ok
		case <-tick.C:
		}
	}
}

// Block cuts one direction only: datagrams from host 0 to host 1 are
// lost, those from 1 to 0 arrive; a TCP connection needs both ways, so
// neither side can open one. Blocks add up, Heal undoes them.
func TestBlockOneWay(t *testing.T) {
	l := New(t, 3)
	for _, h := range l.Hosts() {
		startEchoInProcess(t, h)
	}
	h0, h1, h2 := l.Host(0), l.Host(1), l.Host(2)
	l.Block(0, 1)
	if udpReach(t, h0, h1, cutTimeout) {
		t.Errorf("after Block(0, 1): a datagram from host 0 reached host 1")
	}
	if !udpReach(t, h1, h0, timeout) {
		t.Errorf("after Block(0, 1): no datagram from host 1 reached host 0")
	}
	checkReach(t, l, "Block(0, 1)", [][]bool{
		{true, false, true},
		{false, true, true},
		{true, true, true},
	})
	l.Block(2, 1)
	l.Block(0, 1) // again: no change
	if udpReach(t, h2, h1, cutTimeout) {
		t.Errorf("after Block(2, 1): a datagram from host 2 reached host 1")
	}
	if !udpReach(t, h2, h0, timeout) {
		t.Errorf("after Block(2, 1): no datagram from host 2 reached host 0")
	}
	l.Heal()
	checkReach(t, l, "Heal", all(3))
	if !udpReach(t, h0, h1, timeout) {
		t.Errorf("after Heal: no datagram from host 0 reached host 1")
	}
}

// A program started with CommandWithClocks reads BOOTTIME ahead of the
// machine's by the offset, and its pid is cmd.Process.Pid.
func TestCommandWithClocks(t *testing.T) {
	l := New(t, 1)
	before, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	cmd := l.Host(0).CommandWithClocks(48*time.Hour, time.Hour, "sh", "-c", `echo $$; cat /proc/uptime`)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v", cmd.Args, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("output %q", out)
	}
	if lines[0] != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("the program's pid is %s, cmd.Process.Pid %d", lines[0], cmd.Process.Pid)
	}
	up := func(s string) float64 {
		v, err := strconv.ParseFloat(strings.Fields(s)[0], 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got, min := up(lines[1]), up(string(before))+48*3600; got < min {
		t.Errorf("uptime in the time namespace %.2fs, want at least %.2fs", got, min)
	}
}
