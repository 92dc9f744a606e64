package hosts

import (
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/credentials"
)

// Config says how many hosts to simulate and what to measure.
type Config struct {
	// Grantors are the cluster's gRPC addresses; GrantorPIDs their
	// process ids on this machine, in the same order (the leader's CPU
	// and RSS are read from /proc, and the kill needs them).
	Grantors    []string
	GrantorPIDs []int
	// Credentials are the sidecars' TLS (a sidecar certificate, shared
	// by every simulated host: the grantors must not limit that identity,
	// docs/scale.md); nil dials in plain text.
	Credentials credentials.TransportCredentials

	// Hosts is the number of simulated hosts, each a sidecar of its own;
	// LeasesPerHost the leases each holds, all of term Term.
	Hosts         int
	LeasesPerHost int
	Term          time.Duration
	// Concurrency is the number of hosts started at once, over all the
	// shard processes.
	Concurrency int
	// Warmup runs after every host holds its leases and before the
	// measured Duration.
	Warmup, Duration time.Duration
	// KillLeader, if not 0, kills the leader with SIGKILL this long into
	// the measured Duration, and the run then watches every host renew
	// at the new leader, for at most Recovery.
	KillLeader time.Duration
	Recovery   time.Duration
	// Sources is the number of loopback source addresses the hosts dial
	// from (127.1.x.y), round robin: a grantor holds at most 256
	// connections from one address, as a host has one.
	Sources int
	// ShardArgs are the arguments that make this program run Shard (its
	// stdin and stdout to Run, with the sidecars' credentials), and
	// HostsPerShard the most hosts one shard process holds (fewer when
	// the open files limit says so).
	ShardArgs     []string
	HostsPerShard int
	// Progress, if not nil, receives a line now and then.
	Progress io.Writer
}

// DefaultConfig returns the defaults of the hosts workload; Grantors and
// GrantorPIDs are left to set.
func DefaultConfig() Config {
	return Config{
		Hosts:         1000,
		LeasesPerHost: 1,
		Term:          15 * time.Second,
		Concurrency:   16,
		Warmup:        15 * time.Second,
		Duration:      30 * time.Second,
		Recovery:      time.Minute,
		Sources:       1024,
		HostsPerShard: 2500,
	}
}

// perSource is how many hosts dial from one source address: below the
// grantors' limit of connections from one address (256).
const perSource = 200

// Validate reports the first problem with c.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error { return fmt.Errorf("bench hosts: "+format, args...) }
	switch {
	case len(c.Grantors) == 0:
		return bad("no grantor address")
	case len(c.GrantorPIDs) != len(c.Grantors):
		return bad("%d grantor pids for %d grantors: give each grantor's pid, in the order of --grantors", len(c.GrantorPIDs), len(c.Grantors))
	case c.Hosts < 1:
		return bad("hosts %d is below 1", c.Hosts)
	case c.LeasesPerHost < 1 || c.LeasesPerHost > 10000:
		return bad("leases per host %d is outside [1, 10000]", c.LeasesPerHost)
	case c.Term < 3*time.Second || c.Term > time.Hour:
		return bad("term %v is outside [3s, 1h]", c.Term)
	case c.Concurrency < 1:
		return bad("concurrency %d is below 1", c.Concurrency)
	case c.Warmup < 0 || c.Duration <= 0:
		return bad("warmup %v must not be negative and duration %v must be positive", c.Warmup, c.Duration)
	case c.KillLeader < 0 || c.KillLeader >= c.Duration:
		return bad("kill-leader %v must lie inside the measured duration %v", c.KillLeader, c.Duration)
	case c.Recovery <= 0:
		return bad("recovery %v is not positive", c.Recovery)
	case c.HostsPerShard < 1:
		return bad("hosts per shard %d is below 1", c.HostsPerShard)
	case c.Sources < 1 || c.Sources > 250*250:
		return bad("sources %d is outside [1, 62500]", c.Sources)
	case c.Hosts > c.Sources*perSource:
		return bad("%d hosts need at least %d source addresses (%d hosts a source), have %d", c.Hosts, (c.Hosts+perSource-1)/perSource, perSource, c.Sources)
	}
	for i, p := range c.GrantorPIDs {
		if p <= 0 {
			return bad("grantor pid %d (of %s) is not a process id", p, c.Grantors[i])
		}
	}
	return nil
}
