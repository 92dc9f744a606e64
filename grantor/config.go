package grantor

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/pki"
)

// Config configures a grantor Node. Start from DefaultConfig and set NodeID
// and DataDir at least.
type Config struct {
	// NodeID is the raft server ID of this node; unique in the cluster and
	// stable across restarts.
	NodeID string
	// DataDir holds the raft-wal log and stable store (DataDir/raft/wal) and
	// the file snapshots (DataDir/raft/snapshots).
	DataDir string
	// RaftAddr is the TCP address the raft transport binds. A port of 0
	// picks a free port; the bound address is then the advertised one, so
	// the host part must be a concrete IP, not 0.0.0.0.
	RaftAddr string
	// RPCAddr is the address the gRPC server binds; port 0 picks one.
	RPCAddr string
	// AdvertiseRPCAddr is the gRPC address this node tells others (in
	// NotLeader hints and gossip). Empty means the bound address, with an
	// unspecified host (0.0.0.0, ::) replaced by RaftAddr's host.
	AdvertiseRPCAddr string
	// Bootstrap makes a node without raft state bootstrap a cluster of one
	// voter, itself (dev mode). It is ignored when state exists.
	Bootstrap bool

	// TLS, when set, is this node's certificate, key and CA: raft and gRPC
	// then run over mutual TLS 1.3 (docs/design.md section 6). Raft peers must
	// present grantor certificates naming the server they speak for; gRPC
	// callers any role, each call checked against the role (authz.go). The
	// certificate must be a grantor's named NodeID. Without TLS every
	// caller is InsecureIdentity.
	TLS *pki.Configurator
	// InMemoryRaft runs raft on an in-memory transport that opens no
	// port: a single node that bootstraps itself (dev). It needs
	// Bootstrap, and excludes Gossip and TLS; RaftAddr is then ignored.
	InMemoryRaft bool
	// MaxRecvMsgSize bounds a gRPC request in bytes; zero means
	// DefaultMaxRecvMsgSize.
	MaxRecvMsgSize int
	// MaxConcurrentStreams bounds the calls in progress on one gRPC
	// connection; zero means DefaultMaxConcurrentStreams.
	MaxConcurrentStreams uint32
	// Audit receives the audit trail (audit.go); nil means Logger.
	Audit *slog.Logger
	// AuditFlush, when set, is called after every audit line is logged,
	// before the call it records goes on, and returns once the line is
	// written: Audit's writer may then hold lines back until it is
	// called, and write the lines of calls answered together in one
	// write (internal/groupwrite).
	AuditFlush func() error

	// Gossip, when set, makes the node a member of the gossip cluster
	// (discovery.go): it gossips its role, addresses, voter flag and the
	// leader it knows, and while it leads it reconciles the gossip members
	// with the raft configuration. New fills in Meta's grantor fields
	// (keeping Meta.Version) and a Name of NodeID when empty. Gossip is
	// for discovery only: nothing it reports shortens or ends a lease.
	// When no seed in Gossip.Join answers, the node gossips alone and
	// retries them in the background; a wrong or missing gossip key
	// fails New.
	Gossip *gossip.Config
	// JoinServers are, for a node without Gossip, the raft server IDs it
	// takes raft RPCs from while it has no raft configuration yet: the
	// servers of the cluster that adds it (with Gossip, its seeds say;
	// raft_members.go). Once it has a configuration, only its servers
	// speak raft to it. Only the TLS transport knows who sends an RPC.
	JoinServers []string
	// BootstrapExpect, when positive, bootstraps a new cluster once that
	// many voter grantors, none with raft state, see each other in gossip
	// (Consul's bootstrap_expect). It needs Gossip, excludes Bootstrap and
	// is ignored when the data dir has raft state.
	BootstrapExpect int
	// ReconcileInterval is how often the leader reconciles gossip with the
	// raft configuration, besides at every gossip change (retrying what
	// failed). Zero means DefaultReconcileInterval.
	ReconcileInterval time.Duration
	// Watch configures the clock watcher (pauses, suspends, the kernel's
	// sync state) whose events the node logs and exports; its Clock and
	// Rho come from Clock and Timing. Zero fields take their defaults.
	Watch clockwatch.WatcherConfig

	// Timing is the lease timing model (rho, eps); it must match the
	// sidecars'. Epsilon must be positive.
	Timing clockwatch.Timing
	// Clock decides every lease expiry; nil means clockwatch.System.
	Clock clockwatch.Clock
	// Logger receives the node's and raft's logs; nil discards them.
	Logger *slog.Logger

	// Raft timings. They decide how fast a failover is and how many
	// needless ones a starved machine sees, never whether a lease is safe:
	// a new leader waits out every old term, and renewals are
	// acknowledged only after a quorum round (docs/design.md section 2). The
	// docs/operations.md's "Choosing a term" gives the failover time they make and
	// the term that survives it.
	//
	// HeartbeatTimeout: a follower that has heard nothing from the leader
	// for a random time between it and twice it starts an election (after
	// a pre-vote); the leader heartbeats every tenth of it, and a follower
	// that heard from a leader within it refuses to vote for another.
	// ElectionTimeout (at least HeartbeatTimeout): how long, again up to
	// twice it, a candidate waits for votes before it tries again.
	// LeaderLeaseTimeout (at most HeartbeatTimeout): a leader that has not
	// heard from a quorum within it steps down (hashicorp/raft's check of
	// its lease, "failed to contact quorum of nodes, stepping down"):
	// what a starved leader does, so a longer one means fewer leader
	// changes under CPU starvation. CommitTimeout: how long the leader
	// waits without new entries before it tells followers the commit
	// index.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration

	// SnapshotThreshold is how many log entries since the last snapshot
	// make raft take another; SnapshotInterval is how often it checks.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration

	// MinTTL and MaxTTL bound the term a client may ask for; requests
	// outside get InvalidArgument. MinTTL must exceed Timing.MinTerm().
	MinTTL time.Duration
	MaxTTL time.Duration

	// MaxLockDelay bounds the lock-delay an Acquire may ask for (Chubby's
	// bound on lock-delay): a longer one gets InvalidArgument. 0 means
	// DefaultMaxLockDelay.
	MaxLockDelay time.Duration

	// Limits are the limits of each identity's account (account.go,
	// docs/limits.md): everything a caller can make the grantor keep,
	// per role and per identity. A call past one fails with
	// RESOURCE_EXHAUSTED naming it, and nothing changes.
	Limits AccountLimits

	// NameRules say which lease names each caller identity may acquire
	// and read (namerules.go); nil allows every name to everyone.
	// Node.SetNameRules replaces them while the node runs.
	NameRules *NameRules

	// SessionIdleTimeout is how long the leader keeps the idempotency
	// records of a session that holds no lease and has sent nothing when
	// it has not seen the session's term (a session opened under an
	// earlier leader); one whose term it knows is closed after that term
	// (expiry.go). A record that remembers a grant or a release is kept
	// SessionIdleTimeout plus MaxWait (outcome.go).
	SessionIdleTimeout time.Duration
}

// Defaults used by DefaultConfig. The raft timings are hashicorp/raft's
// own, except the leader lease timeout, raised from 500ms to the heartbeat
// timeout (the most raft allows): on a CPU-starved machine a leader that
// is merely slow stepped down several times a minute (lost quorum) and
// leases were lost at the failovers. A failover takes about 1.5 to 3s
// with these (docs/operations.md, "Raft timeouts" and "Choosing a term").
const (
	DefaultHeartbeatTimeout   = time.Second
	DefaultElectionTimeout    = time.Second
	DefaultLeaderLeaseTimeout = time.Second
	DefaultCommitTimeout      = 50 * time.Millisecond
	DefaultSnapshotThreshold  = 8192
	DefaultSnapshotInterval   = 2 * time.Minute
	DefaultMinTTL             = time.Second
	DefaultMaxTTL             = 24 * time.Hour
	DefaultMaxLockDelay       = time.Hour
	DefaultSessionIdleTimeout = time.Hour
	DefaultReconcileInterval  = 10 * time.Second
	// DefaultMaxRecvMsgSize, 256 KiB: an acquire is under 2 KB, a
	// keepalive of 1024 sessions (the most one may carry) about 90 KB.
	// An unfinished call can make the grantor hold this much (grpc-go
	// reads a request whole before any handler runs): the bounds of
	// grpc_limits.go multiply it.
	DefaultMaxRecvMsgSize = 256 << 10
	// DefaultMaxConcurrentStreams: a sidecar keeps one KeepAlive stream
	// and one call per acquire in flight on its connection, and an acquire
	// may wait up to MaxWait: a host with many waiting programs needs many
	// streams. Past the limit, calls queue in the client.
	DefaultMaxConcurrentStreams = 1000

	// MaxWait is the longest an Acquire may ask to queue for a lease.
	MaxWait = time.Hour
	// maxTTLLimit keeps every expiry computation far from overflow.
	maxTTLLimit = 365 * 24 * time.Hour
)

// DefaultConfig returns a Config with timings suited to loopback or a LAN,
// both addresses on 127.0.0.1 with a free port, the default timing model and
// the system clock. NodeID and DataDir are left empty.
func DefaultConfig() Config {
	return Config{
		RaftAddr:           "127.0.0.1:0",
		RPCAddr:            "127.0.0.1:0",
		Timing:             clockwatch.DefaultTiming(),
		Clock:              clockwatch.System,
		HeartbeatTimeout:   DefaultHeartbeatTimeout,
		ElectionTimeout:    DefaultElectionTimeout,
		LeaderLeaseTimeout: DefaultLeaderLeaseTimeout,
		CommitTimeout:      DefaultCommitTimeout,
		SnapshotThreshold:  DefaultSnapshotThreshold,
		SnapshotInterval:   DefaultSnapshotInterval,
		MinTTL:             DefaultMinTTL,
		MaxTTL:             DefaultMaxTTL,
		MaxLockDelay:       DefaultMaxLockDelay,
		SessionIdleTimeout: DefaultSessionIdleTimeout,
		ReconcileInterval:  DefaultReconcileInterval,
		Limits:             DefaultAccountLimits(),
		Watch:              clockwatch.DefaultWatcherConfig(),
	}
}

// Validate reports the first problem with c, wrapping ErrInvalidConfig.
// A nil Clock or Logger is fine (see the fields).
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case c.NodeID == "":
		return bad("NodeID is empty")
	case len(c.NodeID) > 256:
		return bad("NodeID is longer than 256 bytes")
	case c.DataDir == "":
		return bad("DataDir is empty")
	case c.RaftAddr == "":
		return bad("RaftAddr is empty")
	case c.RPCAddr == "":
		return bad("RPCAddr is empty")
	}
	if err := c.Timing.Validate(); err != nil {
		return bad("%v", err)
	}
	if c.Timing.Epsilon <= 0 {
		return bad("Timing.Epsilon must be positive (a zero safety margin is almost surely a forgotten Timing)")
	}
	switch {
	case c.HeartbeatTimeout < 5*time.Millisecond:
		return bad("the raft heartbeat timeout %v is below 5ms", c.HeartbeatTimeout)
	case c.ElectionTimeout < c.HeartbeatTimeout:
		return bad("the raft election timeout %v is below the raft heartbeat timeout %v", c.ElectionTimeout, c.HeartbeatTimeout)
	case c.LeaderLeaseTimeout < 5*time.Millisecond:
		return bad("the raft leader lease timeout %v is below 5ms", c.LeaderLeaseTimeout)
	case c.LeaderLeaseTimeout > c.HeartbeatTimeout:
		return bad("the raft leader lease timeout %v exceeds the raft heartbeat timeout %v", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	case c.CommitTimeout < time.Millisecond:
		return bad("the raft commit timeout %v is below 1ms", c.CommitTimeout)
	case c.SnapshotThreshold == 0:
		return bad("SnapshotThreshold is 0")
	case c.SnapshotInterval < 5*time.Millisecond:
		return bad("SnapshotInterval %v is below 5ms", c.SnapshotInterval)
	case c.MinTTL <= c.Timing.MinTerm():
		return bad("MinTTL %v leaves holders no validity with epsilon %v (need more than %v)",
			c.MinTTL, c.Timing.Epsilon, c.Timing.MinTerm())
	case c.MaxTTL < c.MinTTL:
		return bad("MaxTTL %v is below MinTTL %v", c.MaxTTL, c.MinTTL)
	case c.MaxTTL > maxTTLLimit:
		return bad("MaxTTL %v exceeds %v", c.MaxTTL, maxTTLLimit)
	case c.MaxLockDelay < 0:
		return bad("MaxLockDelay %v is negative", c.MaxLockDelay)
	case c.MaxLockDelay > maxTTLLimit:
		return bad("MaxLockDelay %v exceeds %v", c.MaxLockDelay, maxTTLLimit)
	case c.SessionIdleTimeout <= 0:
		return bad("SessionIdleTimeout is not positive")
	case c.ReconcileInterval < 0:
		return bad("ReconcileInterval is negative")
	case c.BootstrapExpect < 0:
		return bad("BootstrapExpect %d is negative", c.BootstrapExpect)
	case c.BootstrapExpect > 0 && c.Gossip == nil:
		return bad("BootstrapExpect needs Gossip: the grantors find each other there")
	case c.BootstrapExpect > 0 && c.Bootstrap:
		return bad("Bootstrap and BootstrapExpect exclude each other")
	case c.InMemoryRaft && (!c.Bootstrap || c.Gossip != nil || c.TLS != nil):
		return bad("InMemoryRaft is for a single node: it needs Bootstrap and excludes Gossip and TLS")
	case c.MaxRecvMsgSize < 0:
		return bad("MaxRecvMsgSize %d is negative", c.MaxRecvMsgSize)
	}
	if c.TLS != nil {
		if id := c.TLS.Identity(); id.Role != pki.RoleGrantor || id.Name != c.NodeID {
			return bad("the TLS certificate is %s, but a grantor needs a grantor certificate named after its node ID (grantor/%s): make one with `leaseside tls cert create --grantor %s`",
				id, c.NodeID, c.NodeID)
		}
	}
	if err := c.Limits.Validate(); err != nil {
		return err
	}
	if err := c.Watch.Validate(); err != nil {
		return bad("%v", err)
	}
	return nil
}

func (c Config) withNilDefaults() Config {
	if c.Clock == nil {
		c.Clock = clockwatch.System
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = DefaultReconcileInterval
	}
	if c.MaxLockDelay == 0 {
		c.MaxLockDelay = DefaultMaxLockDelay
	}
	if c.MaxRecvMsgSize == 0 {
		c.MaxRecvMsgSize = DefaultMaxRecvMsgSize
	}
	if c.MaxConcurrentStreams == 0 {
		c.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if c.Audit == nil {
		c.Audit = c.Logger
	}
	c.Watch.Clock = c.Clock
	if c.Timing.Rho > 0 {
		c.Watch.Rho = c.Timing.Rho
	}
	return c
}
