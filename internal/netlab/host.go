package netlab

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// Host is one machine of a lab: a network namespace with a loopback and an
// eth0 on the lab's switch. Processes and sockets in it see only those two
// interfaces; the file system, users, pids and unix sockets by path are
// the test machine's own.
type Host struct {
	lab   *Lab
	index int
	ns    *netns
	addr  netip.Addr
}

// Index is the host's number in the lab, from 0.
func (h *Host) Index() int {
	return h.index
}

// Addr is the host's address on the lab network, 10.231.0.(Index+1).
func (h *Host) Addr() netip.Addr {
	return h.addr
}

// IP is Addr as a string, for flags and configuration files.
func (h *Host) IP() string {
	return h.addr.String()
}

// HostPort is "IP:port", the address of the host's port for dialing.
func (h *Host) HostPort(port int) string {
	return net.JoinHostPort(h.IP(), strconv.Itoa(port))
}

// port is the name of the host's port on the switch.
func (h *Host) port() string {
	return "h" + strconv.Itoa(h.index)
}

// NetnsPath is a path of the host's network namespace, valid until the
// lab is cleaned up, for tools that take one: `nsenter --net=PATH`,
// `ip link set DEV netns PATH`. (The namespace has no name under
// /var/run/netns, so `ip netns exec` does not know it.)
func (h *Host) NetnsPath() string {
	return h.ns.path()
}

// Command is exec.Command for a program that runs on the host: it is in
// the host's network namespace from its first instruction, through
// `nsenter --net`, which execs it in place, so cmd.Process.Pid is the
// program's own pid and signals reach it directly.
//
// The process gets SIGKILL if the test binary dies (SysProcAttr.Pdeathsig;
// a caller that replaces SysProcAttr should keep it), and Cleanup kills it
// with everything else still running on the host. Cleanup does not wait
// for it, though: whoever starts it calls Wait as usual.
func (h *Host) Command(name string, arg ...string) *exec.Cmd {
	return h.CommandContext(context.Background(), name, arg...)
}

// CommandContext is Command with exec.CommandContext's ctx.
func (h *Host) CommandContext(ctx context.Context, name string, arg ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + h.ns.path(), "--", name}, arg...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// CommandWithClocks is Command for a program that also runs in a time
// namespace of its own, whose CLOCK_BOOTTIME and CLOCK_MONOTONIC read
// boottime and monotonic (whole seconds, possibly negative) more than
// the machine's: a host that booted at another time. CLOCK_REALTIME is
// not namespaced: it stays the machine's. The program is started through
// `unshare --time`, which, like nsenter, execs it in place (the kernel
// moves a process into its new time namespace at exec), so
// cmd.Process.Pid is still the program's own. A negative offset may not
// take either clock below zero.
func (h *Host) CommandWithClocks(boottime, monotonic time.Duration, name string, arg ...string) *exec.Cmd {
	cmd := h.Command("unshare", append([]string{"--time",
		"--boottime", strconv.FormatInt(int64(boottime/time.Second), 10),
		"--monotonic", strconv.FormatInt(int64(monotonic/time.Second), 10),
		"--", name}, arg...)...)
	return cmd
}

// Listen is net.Listen on the host, for a server that runs in the test
// binary but is reached at the host's address (and cut off with it).
// network is "tcp", "tcp4" or "tcp6"; the host part of address is empty or
// an IP address. Cleanup closes the listener and the connections it
// accepted.
func (h *Host) Listen(network, address string) (net.Listener, error) {
	if err := checkAddress(network, address, true); err != nil {
		return nil, err
	}
	lc := net.ListenConfig{Control: h.ns.checkSocket}
	var ln net.Listener
	err := h.ns.run(func() error {
		var err error
		ln, err = lc.Listen(context.Background(), network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netlab: listen on host %d: %w", h.index, err)
	}
	if err := h.lab.track(ln); err != nil {
		ln.Close()
		return nil, err
	}
	return &listener{Listener: ln, lab: h.lab}, nil
}

// DialContext is net.Dialer.DialContext from the host, for a client in the
// test binary that must be on the host's side of a partition (as gRPC's
// WithContextDialer wants it). network is "tcp", "tcp4" or "tcp6"; the
// host part of address must be an IP address, not a name: resolving would
// dial from other goroutines, outside the host. Cleanup closes the
// connection.
func (h *Host) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if err := checkAddress(network, address, false); err != nil {
		return nil, err
	}
	d := net.Dialer{Control: h.ns.checkSocket}
	var c net.Conn
	err := h.ns.run(func() error {
		var err error
		c, err = d.DialContext(ctx, network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netlab: dial from host %d: %w", h.index, err)
	}
	if err := h.lab.track(c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// checkAddress accepts TCP networks and addresses whose host part is an IP
// address (or, when listening, empty).
func checkAddress(network, address string, listen bool) error {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return fmt.Errorf("netlab: network %q: only tcp, tcp4 and tcp6 are supported", network)
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("netlab: %w", err)
	}
	if listen && host == "" {
		return nil
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return fmt.Errorf("netlab: address %q: the host must be an IP address: %w", address, err)
	}
	return nil
}

// listener tracks the connections it accepts, for Cleanup to close.
type listener struct {
	net.Listener
	lab *Lab
}

// Accept is net.Listener's Accept.
func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if err := l.lab.track(c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
