// Package netlab builds small networks of "hosts" for integration tests:
// each host is a Linux network namespace with an address of its own on a
// shared switch, and the test can cut hosts off from one another (kill the
// leader's network, partition it from the majority, drop one direction
// only) and heal the network. It can also starve a process of a host of
// CPU or of disk writes (cgroups), and start a program with clocks of its
// own (a time namespace with BOOTTIME and MONOTONIC offsets).
//
// A lab is made only of network namespaces that belong to the test binary
// and of devices inside them: one "switch" namespace holding the bridges,
// and one namespace per host with a loopback and an eth0 (a veth whose
// other end is a port of the switch) addressed 10.231.0.(i+1)/24, with
// static ARP entries for all the other hosts. Nothing
// is created in the machine's own namespace: no device, no route, no named
// namespace under /var/run/netns. The hosts have no default route, so their
// traffic cannot leave the lab. Resource limits are the exception: their
// cgroups live in the machine's cgroup hierarchies, named netlab-PID-N.
//
// Nothing outlives the test either. Cleanup kills every process in the
// lab's namespaces and drops the test binary's hold on them, and the kernel
// then destroys them with their devices. If the test binary dies without
// cleaning up (a test timeout, SIGKILL), the kernel drops that hold itself,
// and processes started with [Host.Command] die with it (only empty
// netlab-PID-N cgroups can be left behind then).
//
// A lab needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN), and the `ip` and
// `nsenter` commands; [New] skips the test when it cannot build one.
// [Lab.Block] also needs `tc`, [Host.CommandWithClocks] `unshare` (all
// from iproute2 and util-linux).
package netlab

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"sync"
	"testing"
)

// MaxHosts is the largest number of hosts in a lab: the hosts of a /24.
const MaxHosts = 254

// subnet holds the hosts' addresses. It exists only inside the lab's
// namespaces, so labs of tests running at once do not collide.
var subnet = netip.MustParsePrefix("10.231.0.0/24")

// ErrClosed is returned by a host's Listen and DialContext after the lab
// has been cleaned up.
var ErrClosed = errors.New("netlab: lab cleaned up")

// Lab is a network of hosts on one switch. Its methods may be called from
// any goroutine; those that report failure through the test (Partition,
// Isolate, Heal) call t.Fatal and so belong on the test's goroutine.
type Lab struct {
	t     testing.TB
	sw    *netns // the switch: bridge "main", island bridges, ports h0, h1, ...
	hosts []*Host

	mu       sync.Mutex
	closed   bool
	islands  []string      // bridges made by Partition since the last Heal
	blocks   map[int][]int // one-way blocks since the last Heal: receiver -> senders
	closers  []io.Closer   // sockets made by hosts' Listen and DialContext
	limits   []*limit      // cgroups made by LimitCPU and LimitDiskWrites
	limitSeq int
}

// New builds a lab of n hosts, 1 <= n <= MaxHosts, all connected, and
// registers its removal with t.Cleanup. It skips the test if not run as
// root, if `ip` or `nsenter` is missing, or if the kernel refuses network
// namespaces or bridges; any other failure fails the test.
func New(t testing.TB, n int) *Lab {
	t.Helper()
	if n < 1 || n > MaxHosts {
		t.Fatalf("netlab.New: %d hosts, want 1 to %d", n, MaxHosts)
	}
	if os.Geteuid() != 0 {
		t.Skip("netlab: needs root to create network namespaces")
	}
	for _, tool := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("netlab: needs %s (iproute2, util-linux): %v", tool, err)
		}
	}
	l := &Lab{t: t}
	t.Cleanup(l.cleanup)

	var err error
	if l.sw, err = newNetns("switch"); err != nil {
		t.Skipf("netlab: cannot create a network namespace: %v", err)
	}
	if err := l.ip(l.sw, "link add main type bridge", "link set main up"); err != nil {
		t.Skipf("netlab: cannot create a bridge: %v", err)
	}
	var ports []string
	for i := 0; i < n; i++ {
		ns, err := newNetns(fmt.Sprintf("host %d", i))
		if err != nil {
			t.Fatalf("netlab: %v", err)
		}
		h := &Host{lab: l, index: i, ns: ns, addr: hostAddr(i)}
		l.hosts = append(l.hosts, h)
		ports = append(ports,
			fmt.Sprintf("link add %s type veth peer name eth0 netns %s", h.port(), ns.path()),
			fmt.Sprintf("link set %s master main up", h.port()))
	}
	if err := l.ip(l.sw, ports...); err != nil {
		t.Fatalf("netlab: %v", err)
	}
	for _, h := range l.hosts {
		cmds := []string{
			"link set lo up",
			fmt.Sprintf("link set eth0 address %s", hostMAC(h.index)),
			fmt.Sprintf("addr add %s/%d dev eth0", h.addr, subnet.Bits()),
			"link set eth0 up",
		}
		// Static neighbours: no ARP, so a partition only ever drops
		// packets, and healing it needs no ARP state to recover.
		for _, o := range l.hosts {
			if o != h {
				cmds = append(cmds, fmt.Sprintf("neigh replace %s lladdr %s dev eth0 nud permanent", o.addr, hostMAC(o.index)))
			}
		}
		if err := l.ip(h.ns, cmds...); err != nil {
			t.Fatalf("netlab: %v", err)
		}
	}
	return l
}

// hostAddr is the address of host i.
func hostAddr(i int) netip.Addr {
	a := subnet.Addr().As4()
	a[3] = byte(i + 1)
	return netip.AddrFrom4(a)
}

// hostMAC is the MAC address of host i's eth0: locally administered,
// and ending in the bytes of its IP address, 02:00:0a:e7:00:(i+1).
func hostMAC(i int) string {
	a := hostAddr(i).As4()
	return fmt.Sprintf("02:00:%02x:%02x:%02x:%02x", a[0], a[1], a[2], a[3])
}

// Host returns host i, 0 <= i < Len().
func (l *Lab) Host(i int) *Host {
	if i < 0 || i >= len(l.hosts) {
		panic(fmt.Sprintf("netlab: host %d of a lab of %d", i, len(l.hosts)))
	}
	return l.hosts[i]
}

// Hosts returns all the hosts, in order.
func (l *Lab) Hosts() []*Host {
	return append([]*Host(nil), l.hosts...)
}

// Len is the number of hosts.
func (l *Lab) Len() int {
	return len(l.hosts)
}

// ip runs `ip -batch` with the commands in the namespace ns.
func (l *Lab) ip(ns *netns, cmds ...string) error {
	return batch(ns, "ip", cmds)
}

// tc runs `tc -batch` with the commands in the switch's namespace.
func (l *Lab) tc(cmds ...string) error {
	return batch(l.sw, "tc", cmds)
}

// batch runs the iproute2 tool (ip, tc) in the namespace ns with the
// commands on its standard input, one a line.
func batch(ns *netns, tool string, cmds []string) error {
	var in []byte
	for _, c := range cmds {
		in = append(in, c...)
		in = append(in, '\n')
	}
	cmd := exec.Command("nsenter", "--net="+ns.path(), "--", tool, "-batch", "-")
	cmd.Stdin = bytes.NewReader(in)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s in the %s namespace: %w: %s", tool, ns.name, err, out)
	}
	return nil
}

// track remembers a socket for cleanup; it fails after cleanup.
func (l *Lab) track(c io.Closer) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.closers = append(l.closers, c)
	return nil
}

// cleanup kills the processes in the lab, closes the sockets hosts made,
// and releases the namespaces. It reports what it could not undo with
// t.Error.
func (l *Lab) cleanup() {
	l.mu.Lock()
	l.closed = true
	closers := l.closers
	l.closers = nil
	l.mu.Unlock()

	var nss []*netns
	if l.sw != nil {
		nss = append(nss, l.sw)
	}
	for _, h := range l.hosts {
		nss = append(nss, h.ns)
	}
	if err := killAllIn(nss); err != nil {
		l.t.Errorf("netlab cleanup: %v", err)
	}
	if err := l.removeLimits(); err != nil {
		l.t.Errorf("netlab cleanup: %v", err)
	}
	for _, c := range closers {
		c.Close()
	}
	for _, n := range nss {
		n.close()
	}
}
