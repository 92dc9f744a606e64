package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/leaseside/leaseside/internal/netlab"
)

// The command lines of the run's processes: the TLS material every
// identity gets, and the flags of grantors, sidecars and the operator.

// operator names the suite's own certificate, for members and leave.
const operator = "chaos"

// makeTLS makes the cluster's CA, a certificate for every grantor (with
// its address), sidecar and the operator, and a gossip key, in c.tlsDir.
func (c *cluster) makeTLS() error {
	run := func(args ...string) ([]byte, error) {
		out, err := exec.Command(c.bin, args...).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = fmt.Errorf("%w: %s", err, ee.Stderr)
			}
			return nil, fmt.Errorf("leaseside %s: %w", strings.Join(args, " "), err)
		}
		return out, nil
	}
	if _, err := run("tls", "ca", "create", "--dir", c.tlsDir); err != nil {
		return err
	}
	for _, g := range c.grantors {
		if _, err := run("tls", "cert", "create", "--dir", c.tlsDir, "--grantor", g.id, "--ip", g.host.IP()); err != nil {
			return err
		}
	}
	for _, s := range c.sidecars {
		if _, err := run("tls", "cert", "create", "--dir", c.tlsDir, "--sidecar", s.name); err != nil {
			return err
		}
	}
	if _, err := run("tls", "cert", "create", "--dir", c.tlsDir, "--operator", operator); err != nil {
		return err
	}
	key, err := run("tls", "gossip-key")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.tlsDir, "gossip.key"), key, 0o600)
}

// tlsArgs are the TLS flags of the identity ROLE/NAME.
func (c *cluster) tlsArgs(role, name string) []string {
	cert := filepath.Join(c.tlsDir, role+"-"+name)
	return []string{"--tls-ca", filepath.Join(c.tlsDir, "ca.pem"), "--tls-cert", cert + ".pem", "--tls-key", cert + "-key.pem"}
}

// gossipKeyArgs is the flag of the cluster's gossip key.
func (c *cluster) gossipKeyArgs() []string {
	return []string{"--gossip-key-file", filepath.Join(c.tlsDir, "gossip.key")}
}

// gossipAddrs lists every grantor's gossip address (spare included):
// seeds for grantors and sidecars alike. Seeds that do not answer are
// retried in the background.
func (c *cluster) gossipAddrs(except *grantor) string {
	var a []string
	for _, g := range c.grantors {
		if g != except {
			a = append(a, g.host.HostPort(gossipPort))
		}
	}
	return strings.Join(a, ",")
}

// members counts the member grantors.
func (c *cluster) members() int {
	n := 0
	for _, g := range c.grantors {
		if g.member {
			n++
		}
	}
	return n
}

// grantorArgs are the flags of grantor g. A spare has no
// --bootstrap-expect: it waits for the running cluster's leader to add it.
func (c *cluster) grantorArgs(g *grantor, bootstrap int) []string {
	args := []string{"grantor",
		"--node-id", g.id,
		"--data-dir", g.dataDir,
		"--rpc-addr", g.host.HostPort(rpcPort),
		"--raft-addr", g.host.HostPort(raftPort),
		"--gossip-addr", g.host.HostPort(gossipPort),
		"--join", c.gossipAddrs(g),
	}
	args = append(append(args, c.gossipKeyArgs()...), c.tlsArgs("grantor", g.id)...)
	if bootstrap > 0 {
		args = append(args, "--bootstrap-expect", strconv.Itoa(bootstrap))
	}
	return args
}

// sidecarArgs are the flags of sidecar s: it learns the grantors and
// their leader from gossip, so it follows grantors that join later.
func (c *cluster) sidecarArgs(s *sidecar) []string {
	args := append([]string{"daemon", "--socket", s.socket, "--join", c.gossipAddrs(nil)}, c.gossipKeyArgs()...)
	return append(args, c.tlsArgs("sidecar", s.name)...)
}

// operatorArgs are the flags of an operator's command against the
// grantors (`leaseside members remove`), given the gRPC addresses to ask.
func (c *cluster) operatorArgs(grantors []string) []string {
	return append([]string{"--grantors", strings.Join(grantors, ",")}, c.tlsArgs("operator", operator)...)
}

// leaveArgs are the flags of `leaseside grantor leave` for grantor g,
// run on g's host.
func (c *cluster) leaveArgs(g *grantor) []string {
	return append([]string{"--rpc-addr", g.host.HostPort(rpcPort)}, c.tlsArgs("operator", operator)...)
}

// commandOn returns the command of a leaseside process on host: the race
// detector's exit sleep off (a second more in every stop it would
// otherwise add).
func (c *cluster) commandOn(ctx context.Context, host *netlab.Host, args ...string) *exec.Cmd {
	cmd := host.CommandContext(ctx, c.bin, args...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	return cmd
}

// command runs a leaseside command on host (an operator there) and
// returns its output.
func (c *cluster) command(host *netlab.Host, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	out, err := c.commandOn(ctx, host, args...).CombinedOutput()
	return string(out), err
}
