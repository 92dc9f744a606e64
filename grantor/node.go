package grantor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"google.golang.org/grpc"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/grantorpb"
)

const (
	// snapshotsRetained is how many raft snapshots stay on disk.
	snapshotsRetained = 2
	// logCacheEntries is how many of the latest raft entries stay in
	// memory for replication (Consul keeps 512 too): a follower that falls
	// further behind is sent older ones from the log on disk.
	logCacheEntries = 512
	// transportTimeout bounds raft RPCs between nodes.
	transportTimeout = 10 * time.Second
	// applyEnqueueTimeout bounds how long a proposal waits to enter raft.
	applyEnqueueTimeout = 5 * time.Second
	// gracefulStopTimeout bounds how long Shutdown waits for RPCs to end.
	gracefulStopTimeout = 5 * time.Second
)

// Node is one grantor: a raft member with the grantor FSM, the lessor that
// acts while it leads, and the gRPC server. Create it with New, serve with
// Run, stop with Shutdown.
type Node struct {
	cfg    Config
	log    *slog.Logger
	fsm    *fsm
	lessor *lessor
	// watch fans applied changes out to Watch streams (watch.go).
	watch *watchHub
	// nameRules are the name rules in force (namerules.go); nil allows
	// everything.
	nameRules atomic.Pointer[NameRules]
	// listMu lets one Leases call at a time read the whole table
	// (leases.go): each holds the FSM's read lock, which Apply waits for.
	listMu sync.Mutex

	dirLock *os.File // the data dir's lock (datadir.go)
	meta    *metadb.BoltMetaDB
	wal     *wal.WAL
	snaps   *raft.FileSnapshotStore
	trans   *contactTransport
	gate    *raftGate       // who may speak raft to this node (raft_members.go)
	seeds   map[string]bool // the gossip seeds' addresses, as gossip lists members
	// seedProofs holds the seed claims proven at their address
	// (seed_proof.go).
	seedProofs seedProofs
	// seedVoters holds the voters proven seeds showed this node while it
	// had no configuration (seed_voters.go).
	seedVoters seedVoters
	raft       *raft.Raft
	lis        net.Listener
	rpcAddr    string // advertised
	server     *grpc.Server
	edge       *edgeLimits // bounds of the gRPC edge (grpc_limits.go)
	// accounts charge each identity what it makes the node keep
	// (account.go).
	accounts *accounts

	gossip  *gossip.Member // nil without Config.Gossip
	removed *removedServers
	// reconcileMu serialises reconciliation passes; staged (under it)
	// holds, per grantor staged as a non-voter while this node leads, the
	// transport's request count at the staging (discovery.go).
	reconcileMu sync.Mutex
	staged      map[raft.ServerID]uint64
	rejoin      []string // seeds that did not answer at the start
	hadState    bool     // raft state existed when New ran
	watcher     *clockwatch.Watcher
	metrics     *counters
	audit       *audit

	// registeredCh is poked when a registration is applied (versions.go).
	registeredCh chan struct{}
	// halted is closed when the FSM halts (halt.go).
	halted chan struct{}

	running atomic.Bool
	served  chan struct{} // closed when grpc Serve has returned, if it ran
	done    chan struct{} // closed by Shutdown
	leaving atomic.Bool   // set by the Leave RPC
	// removal is what tells this node it was removed (self_removal.go).
	removal removal
	// claimWarns limits the log's warnings of refused gossip claims
	// (claim_warnings.go).
	claimWarns claimWarnings
	// termLeaders names the leaders of recent terms (watchLeaders).
	termLeaders termLeaders
	left        chan struct{} // closed by the Leave RPC: Run stops the node
	watchers    sync.WaitGroup
	// startMu orders Run's start of the watchers before Shutdown's wait
	// for them: a WaitGroup must not be added to while it is waited on
	// from zero (a SIGTERM right after the start raced here).
	startMu sync.Mutex

	shutdownOnce sync.Once
	shutdownErr  error
}

// New opens the raft-wal log and stable store and the snapshot store under
// cfg.DataDir, starts raft (bootstrapping a one-voter cluster when
// cfg.Bootstrap is set and there is no state yet) and binds the gRPC
// listener. It does not serve until Run.
func New(cfg Config) (n *Node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withNilDefaults()
	n = &Node{cfg: cfg, log: cfg.Logger, served: make(chan struct{}), done: make(chan struct{}), left: make(chan struct{}), removal: newRemoval(),
		metrics: newCounters(), audit: newAudit(cfg.Audit, cfg.AuditFlush, cfg.NodeID), claimWarns: claimWarnings{clock: cfg.Clock}}
	if cfg.TLS != nil {
		n.metrics.tls = cfg.TLS.Collector("leaseside_grantor")
		cfg.TLS.LogExpiries(n.log, time.Now())
	}
	n.SetNameRules(cfg.NameRules)
	node := n // the error returns below set n to nil
	defer func() {
		if err != nil {
			node.closeStores()
		}
	}()

	raftDir := filepath.Join(cfg.DataDir, "raft")
	walDir := filepath.Join(raftDir, "wal")
	if err := makeDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	if n.dirLock, err = lockDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	if err := n.loadSeedVoters(cfg.DataDir); err != nil {
		return nil, err
	}
	if err := makeDataDir(walDir); err != nil {
		return nil, err
	}
	hlog := newHCLog(cfg.Logger, "raft")
	// The node owns the meta database and closes it itself (raft-wal
	// v0.4.1's Close closes it too; closing twice is harmless), so that a
	// failed start leaves no lock behind for a restart in the same process.
	n.meta = &metadb.BoltMetaDB{}
	if n.wal, err = wal.Open(walDir, wal.WithMetaStore(n.meta), wal.WithLogger(hlog.Named("wal"))); err != nil {
		return nil, fmt.Errorf("grantor: opening raft log in %s: %w", walDir, err)
	}
	if n.snaps, err = raft.NewFileSnapshotStoreWithLogger(raftDir, snapshotsRetained, hlog.Named("snapshots")); err != nil {
		return nil, fmt.Errorf("grantor: opening snapshot store: %w", err)
	}
	if cfg.Gossip != nil {
		n.seeds = n.resolveSeeds(cfg.Gossip.Join)
	}
	n.gate = &raftGate{join: n.joinPath}
	if n.trans, err = n.newTransport(hlog.Named("transport")); err != nil {
		return nil, err
	}
	n.trans.refused = n.refusedAsNonMember
	if n.lis, err = listenRPC(cfg.RPCAddr); err != nil {
		return nil, err
	}
	if unixPath(cfg.RPCAddr) != "" {
		n.rpcAddr = cfg.RPCAddr
	} else if n.rpcAddr, err = advertiseRPC(cfg.AdvertiseRPCAddr, n.lis.Addr().String(), string(n.trans.LocalAddr())); err != nil {
		return nil, err
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	// Concurrent proposals share one append and one fsync: raft takes up
	// to MaxAppendEntries of them from a buffered channel at once.
	rc.BatchApplyCh = true
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.Logger = hlog
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}

	n.watcher = clockwatch.NewWatcher(cfg.Watch)
	n.fsm = newFSM()
	n.accounts = newAccounts(cfg.Limits, n.fsm, cfg.Clock)
	n.audit.accounts = n.accounts
	n.audit.nodeLog = n.log // where a failing audit trail is told of
	n.removed, n.staged = newRemovedServers(), map[raft.ServerID]uint64{}
	n.fsm.onConfig = func(c raft.Configuration) {
		n.removed.configured(c, n.gossipMembers)
		if n.listed(c) {
			n.removal.wasMember.Store(true)
			if err := n.seedVoters.forget(); err != nil {
				n.log.Warn("grantor: forgetting the voters --join seeds showed", "err", err)
			}
		}
		n.removal.wake()
	}
	n.lessor = newLessor(lessorConfig{
		timing:      cfg.Timing,
		clock:       cfg.Clock,
		log:         cfg.Logger,
		sessionIdle: cfg.SessionIdleTimeout,
		afterOffice: n.registerSelf,
		metrics:     n.metrics,
		audit:       n.audit,
		accounts:    n.accounts,
	}, n.fsm, raftProposer{n})
	n.halted = make(chan struct{})
	n.fsm.onHalt = n.halt
	n.fsm.leaderOf = n.termLeaders.of
	n.registeredCh = make(chan struct{}, 1)
	n.watch = newWatchHub(n.fsm, n.accounts)
	n.fsm.observe = func(ev fsmEvent) {
		n.lessor.onEvent(ev)
		n.watch.publish(ev)
		if ev.Kind == evRegistered || ev.Kind == evRestored {
			poke(n.registeredCh)
		}
	}

	if n.hadState, err = raft.HasExistingState(n.wal, n.wal, n.snaps); err != nil {
		return nil, fmt.Errorf("grantor: reading raft state: %w", err)
	}
	if cfg.Gossip != nil {
		// Before raft starts, so that a join that fails (a wrong gossip
		// key) leaves nothing running. The raft transport is already
		// bound: a leader that adds this node at once reaches it.
		if n.gossip, err = n.startGossip(*cfg.Gossip); err != nil {
			return nil, err
		}
	}
	if cfg.Bootstrap {
		if !n.hadState {
			conf := raft.Configuration{Servers: []raft.Server{{
				Suffrage: raft.Voter, ID: rc.LocalID, Address: n.trans.LocalAddr(),
			}}}
			if err := raft.BootstrapCluster(rc, n.wal, n.wal, n.snaps, n.trans, conf); err != nil {
				return nil, fmt.Errorf("grantor: bootstrapping: %w", err)
			}
			n.log.Info("grantor: bootstrapped single-voter cluster", "id", cfg.NodeID)
		}
	}
	// Raft reads every entry back to send it to each follower: the
	// cache answers those reads for the latest entries from memory
	// instead of a pread of the log each (issue 25 item 4).
	logs, err := raft.NewLogCache(logCacheEntries, n.wal)
	if err != nil {
		return nil, fmt.Errorf("grantor: raft log cache: %w", err)
	}
	if n.raft, err = raft.NewRaft(rc, n.fsm, logs, n.wal, n.snaps, n.trans); err != nil {
		return nil, fmt.Errorf("grantor: starting raft: %w", err)
	}
	n.gate.raft.Store(n.raft)

	n.edge = newEdgeLimits(n.accounts, n.refusedRPC)
	if unixPath(cfg.RPCAddr) == "" {
		n.lis = n.edge.listener(n.lis)
	}
	n.server = grpc.NewServer(n.serverOptions()...)
	grantorpb.RegisterGrantorServer(n.server, &service{n: n})
	n.log.Info("grantor: node started", "id", cfg.NodeID, "raft", n.RaftAddr(), "rpc", n.RPCAddr(),
		"gossip", n.GossipAddr(), "raft_state", n.hadState)
	return n, nil
}

// advertiseRPC returns the gRPC address to tell others: explicit when
// given, else the bound one with an unspecified host replaced by the raft
// address's host.
func advertiseRPC(explicit, bound, raftAddr string) (string, error) {
	if explicit != "" {
		if _, _, err := net.SplitHostPort(explicit); err != nil {
			return "", fmt.Errorf("%w: AdvertiseRPCAddr %q: %v", ErrInvalidConfig, explicit, err)
		}
		return explicit, nil
	}
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return "", fmt.Errorf("grantor: gRPC listener address %q: %w", bound, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		return bound, nil
	}
	rhost, _, err := net.SplitHostPort(raftAddr)
	if err != nil {
		return "", fmt.Errorf("grantor: raft address %q: %w", raftAddr, err)
	}
	return net.JoinHostPort(rhost, port), nil
}

// Run serves gRPC and follows raft leadership, running the lessor while
// this node leads, until ctx ends, Shutdown is called or the node has left
// the cluster through the Leave RPC; then it shuts the node down. It
// returns nil when ctx ends (whatever ctx.Err is) or after a Leave RPC, a
// *HaltError (errors.Is ErrHalted) when the node met a raft log entry it
// cannot apply, nil when it was removed from the raft configuration and
// learned it (self_removal.go), a *RetiredError (errors.Is ErrRetired)
// when it started outside the configuration and no join rule admits it
// any more (retired.go), or the error that stopped serving or shutting down.
// Run may be called once.
func (n *Node) Run(ctx context.Context) error {
	if !n.running.CompareAndSwap(false, true) {
		return errors.New("grantor: Run called twice")
	}
	n.startMu.Lock()
	select {
	case <-n.done:
		n.startMu.Unlock()
		// Shut down before Run: Shutdown may have seen running already set
		// and left the listener to Serve, which will not run now.
		_ = n.lis.Close()
		return ErrShutdown
	default:
	}
	serveErr := make(chan error, 1)
	go func() {
		defer close(n.served)
		serveErr <- n.server.Serve(n.lis)
	}()
	n.watchers.Add(4)
	go n.watchLeaders()
	go n.watchLeadership()
	go n.watchClock()
	go n.registerLoop()
	if n.gossip != nil {
		n.watchers.Add(1)
		go n.gossipLeader()
		if len(n.rejoin) > 0 {
			n.watchers.Add(1)
			go n.retryJoin()
		}
		if n.seedProven() != nil {
			n.watchers.Add(1)
			go n.proveSeeds()
		}
		if n.cfg.BootstrapExpect > 0 && !n.hadState {
			n.watchers.Add(1)
			go n.bootstrapExpect()
		}
	}
	n.startMu.Unlock()

	var err error
	select {
	case <-ctx.Done():
	case <-n.left:
		n.log.Info("grantor: left the cluster through the Leave RPC; stopping")
	case <-n.done:
	case <-n.halted:
		err = n.fsm.haltErr()
	case <-n.removal.done:
		if r := n.removal.retired.Load(); r != nil {
			err = r
			break
		}
		n.log.Warn("grantor: this grantor was removed from the raft configuration; stopping (the others refuse its raft messages). To bring it back, start it again: the leader adds it back once gossip sees the new run")
	case err = <-serveErr:
		if errors.Is(err, grpc.ErrServerStopped) {
			err = nil
		}
		if err != nil {
			err = fmt.Errorf("grantor: serving gRPC: %w", err)
		}
	}
	if serr := n.Shutdown(); err == nil {
		err = serr
	}
	return err
}

// watchLeadership hands raft's leadership transitions to the lessor, and
// runs the gossip reconciliation while this node leads.
func (n *Node) watchLeadership() {
	defer n.watchers.Done()
	ch := n.raft.LeaderCh()
	stopReconcile := func() {}
	defer func() { stopReconcile() }()
	for {
		select {
		case isLeader := <-ch:
			n.log.Info("grantor: leadership changed", "leader", isLeader)
			if isLeader {
				n.metrics.becameLeader.Add(1)
			}
			n.lessor.leadershipChanged(isLeader)
			stopReconcile()
			stopReconcile = func() {}
			if isLeader && n.gossip != nil {
				stopReconcile = n.startReconcile()
			}
		case <-n.done:
			return
		}
	}
}

// watchClock runs the clock watcher and logs and counts what it notices.
// A stall of the grantor needs no action here: a renewal that queued up
// during it is acknowledged only after a quorum round that started after
// it arrived (keepalive.go), and expiries are read from the Clock.
func (n *Node) watchClock() {
	defer n.watchers.Done()
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		if err := n.watcher.Run(ctx); err != nil {
			n.log.Error("grantor: clock watcher stopped", "err", err)
		}
	}()
	defer func() {
		cancel()
		<-runDone
	}()
	for {
		select {
		case ev := <-n.watcher.Events():
			n.metrics.clockEvent(ev.Kind)
			n.log.Warn("grantor: clock event", "kind", ev.Kind, "length", ev.Length,
				"leader", n.raft.State() == raft.Leader)
		case <-n.done:
			return
		}
	}
}

// RPCAddr returns the gRPC address this node advertises: the bound one,
// unless Config.AdvertiseRPCAddr says otherwise or the bound host is
// unspecified (see AdvertiseRPCAddr).
func (n *Node) RPCAddr() string { return n.rpcAddr }

// GossipAddr returns the address this node gossips on, "" without gossip.
func (n *Node) GossipAddr() string {
	if n.gossip == nil {
		return ""
	}
	return n.gossip.Addr()
}

// NodeID returns the node's raft server ID.
func (n *Node) NodeID() string { return n.cfg.NodeID }

// RaftAddr returns the address the raft transport is bound to and
// advertises.
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// WaitReady blocks until this node is raft leader and has taken office
// (barrier applied, every lease live until tE + d(1+rho) + eps), so that it
// answers requests; or until ctx ends or the node is shut down. It needs
// Run to be running.
func (n *Node) WaitReady(ctx context.Context) error { return n.lessor.waitReady(ctx) }

// Shutdown stops serving, fails waiting requests and streams, and closes
// raft and the stores. It is safe to call more than once and concurrently
// with Run; later calls return the first call's result.
func (n *Node) Shutdown() error {
	n.shutdownOnce.Do(func() {
		n.startMu.Lock()
		close(n.done)
		n.startMu.Unlock()
		n.watchers.Wait()
		n.lessor.stop()
		var errs []error
		if err := n.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("raft shutdown: %w", err))
		}
		n.stopServer()
		n.lessor.wait()
		if n.gossip != nil {
			// Without Leave first, the others see this member die: as
			// they should when the node stops without leaving.
			errs = append(errs, n.gossip.Shutdown())
		}
		errs = append(errs, n.closeStores())
		n.shutdownErr = errors.Join(errs...)
		n.log.Info("grantor: node stopped", "id", n.cfg.NodeID)
	})
	return n.shutdownErr
}

func (n *Node) stopServer() {
	if !n.running.Load() {
		// Serve never ran (closeStores closes the listener): Stop
		// only ends the server's stream workers.
		n.server.Stop()
		return
	}
	stopped := make(chan struct{})
	go func() {
		n.server.GracefulStop()
		close(stopped)
	}()
	t := time.NewTimer(gracefulStopTimeout)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		// Stop closes every connection and returns; GracefulStop may
		// still be waiting for a handler, which is not waited for.
		n.server.Stop()
	}
	<-n.served
}

// closeStores closes what New opened, in reverse order; nil fields are
// skipped, so it also cleans up after a failed New (where a gossip member
// that started is shut down here too).
func (n *Node) closeStores() error {
	var errs []error
	if n.gossip != nil && n.raft == nil {
		errs = append(errs, n.gossip.Shutdown())
	}
	if n.lis != nil && !n.running.Load() {
		_ = n.lis.Close()
	}
	if n.edge != nil {
		n.edge.close()
	}
	if n.trans != nil {
		// Close the pooled outbound connections too, so that the peers'
		// handlers of them end; Close alone only stops the listener.
		n.trans.CloseStreams()
		errs = append(errs, n.trans.Close())
	}
	if n.wal != nil {
		errs = append(errs, n.wal.Close())
	}
	if n.meta != nil {
		errs = append(errs, n.meta.Close())
	}
	if n.dirLock != nil {
		errs = append(errs, n.dirLock.Close())
	}
	n.audit.close()
	return errors.Join(errs...)
}

// untilStopped returns a context that ends when the node stops, or when
// its cancel is called (which the caller must do).
func (n *Node) untilStopped() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-n.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// leaderChanges returns a channel of raft's leader observations (each
// change of the leader this node knows) and the func that stops them.
func (n *Node) leaderChanges() (<-chan raft.Observation, func()) {
	ch := make(chan raft.Observation, 1)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(obs)
	return ch, func() { n.raft.DeregisterObserver(obs) }
}
