package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/ipc"
)

// Config configures a Daemon.
type Config struct {
	// Grantors are gRPC addresses of grantors to start from; the daemon
	// follows the leader from there.
	Grantors []string
	// Credentials are how the daemon dials grantors: with the cluster's
	// TLS, its sidecar certificate (pki.Configurator.ClientCredentials),
	// under whose name the grantors keep its session. Nil dials in plain
	// text, where every caller is the same insecure operator (loopback
	// dev, --insecure).
	Credentials credentials.TransportCredentials
	// Dialer, when set, opens the connections to grantors (the hosts
	// bench gives each simulated host a source address of its own, as a
	// host has); nil dials as gRPC does by default.
	Dialer func(ctx context.Context, addr string) (net.Conn, error)
	// Gossip, when set, is this sidecar's membership of the gossip cluster:
	// the daemon learns the grantors and their leader from it (Grantors
	// may then be empty).
	Gossip *gossip.Member
	// GossipJoin are gossip seeds the daemon joins through, retrying in
	// the background until one answers (it serves its socket meanwhile);
	// with Gossip only.
	GossipJoin []string
	// Timing is the drift rate and safety margin used for deadlines.
	Timing clockwatch.Timing
	// Clock decides every deadline; nil means clockwatch.System.
	Clock clockwatch.Clock
	// Logger receives the daemon's log; nil discards it.
	Logger *slog.Logger
	// MinTTL and MaxTTL bound the terms callers may ask for.
	MinTTL, MaxTTL time.Duration
	// RenewTimeout is how long a keepalive may go unanswered before it
	// counts as failed and is retried (it is also capped at a quarter of
	// the shortest term in its batch).
	RenewTimeout time.Duration
	// RequestTimeout bounds a relayed acquire or release, on top of the
	// caller's wait.
	RequestTimeout time.Duration
	// LeaderConfirmTimeout is how long a request may wait at a grantor
	// (an acquire queued for a held lease) before that grantor must
	// confirm that it still leads, and how long it has to answer; one
	// that does not is abandoned for the others. About the grantors'
	// election timeout; 0 never asks.
	LeaderConfirmTimeout time.Duration
	// Version is reported by hello.
	Version string
	// ACL limits which callers may use which lease names; empty allows all.
	ACL ACL
	// Watch configures the clock watcher (its Clock and Rho come from
	// Clock and Timing above).
	Watch clockwatch.WatcherConfig
	// Limits bound what one local user can make the socket server hold
	// (connections, requests in flight, unread replies); zero fields
	// take ipc's defaults.
	Limits ipc.Limits
	// MaxLeasesPerUID bounds the leases one local user may hold (and be
	// acquiring) on this host; more get resource_exhausted. 0: no limit.
	MaxLeasesPerUID int
	// OwnerStoppedLimit: an owner process found stopped (state T) longer
	// than this is treated as ended. 0 turns the check off.
	OwnerStoppedLimit time.Duration
	// StateDir is where the daemon keeps what a restart resumes (its
	// grantor sessions and lease table; persist.go): only this user may
	// control it (safefs). "" keeps nothing: a restart drops the leases.
	StateDir string
}

// DefaultMaxLeasesPerUID is the default of Config.MaxLeasesPerUID: a
// quarter of the leases the grantors let one sidecar hold by default
// (grantor.DefaultMaxLeases, 8,192), so that one local user holding all
// it may leaves the host's other users room to acquire.
const DefaultMaxLeasesPerUID = 2048

// DefaultConfig returns a Config with the defaults filled in; Grantors
// still have to be set.
func DefaultConfig() Config {
	return Config{
		Timing:         clockwatch.DefaultTiming(),
		MinTTL:         time.Second,
		MaxTTL:         24 * time.Hour,
		RenewTimeout:   2 * time.Second,
		RequestTimeout: 10 * time.Second,
		Version:        "dev",
		Watch:          clockwatch.DefaultWatcherConfig(),

		LeaderConfirmTimeout: time.Second,
		MaxLeasesPerUID:      DefaultMaxLeasesPerUID,
		OwnerStoppedLimit:    10 * time.Second,
	}
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	if len(c.GossipJoin) > 0 && c.Gossip == nil {
		return errors.New("daemon: GossipJoin without Gossip")
	}
	if len(c.Grantors) == 0 && c.Gossip == nil {
		return errors.New("daemon: no grantor address and no gossip to find one")
	}
	if err := c.Timing.Validate(); err != nil {
		return err
	}
	if c.MinTTL <= c.Timing.MinTerm() {
		return fmt.Errorf("daemon: MinTTL %v leaves no validity with epsilon %v", c.MinTTL, c.Timing.Epsilon)
	}
	if c.MaxTTL < c.MinTTL {
		return fmt.Errorf("daemon: MaxTTL %v below MinTTL %v", c.MaxTTL, c.MinTTL)
	}
	if c.MaxTTL > ipc.MaxTTL {
		return fmt.Errorf("daemon: MaxTTL %v above the protocol's %v", c.MaxTTL, ipc.MaxTTL)
	}
	if c.RenewTimeout <= 0 || c.RequestTimeout <= 0 {
		return errors.New("daemon: timeouts must be positive")
	}
	if err := c.Watch.Validate(); err != nil {
		return err
	}
	return c.ACL.Validate()
}
