package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor"
	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/pki"
	"github.com/leaseside/leaseside/internal/groupwrite"
)

// grantorOptions are the settings of `leaseside grantor`, from the
// defaults, then the config file, then the flags given on the command line.
type grantorOptions struct {
	NodeID          string
	DataDir         string
	RPCAddr         string
	RaftAddr        string
	GossipAddr      string
	Join            []string
	BootstrapExpect int
	GossipKeyFile   string
	MetricsAddr     string
	Timing          clockwatch.Timing
	// Limits are the accounts' limits (limits.go): the config file's
	// "limits" and max_leases_per_sidecar, then --limit.
	Limits grantor.AccountLimits
	// Security (tls.go): TLS files, --insecure, the audit trail's file
	// and the largest gRPC request.
	TLS             pki.Files
	Insecure        bool
	AuditLog        string
	MaxRequestBytes int
	// NameRules is the name rules file (grantor/namerules.go), "" for
	// none: every identity may use every name.
	NameRules string
	Raft      raftTimeouts
	// LogFormat is --log-format ("" means text).
	LogFormat string
	// MemoryLimit is --memory-limit as given ("": the default;
	// memlimit.go).
	MemoryLimit string
}

// raftTimeouts are the raft timings a grantor takes from its flags and
// config file (grantor.Config documents each).
type raftTimeouts struct {
	Heartbeat, Election, LeaderLease, Commit time.Duration
}

func defaultGrantorOptions() grantorOptions {
	host, _ := os.Hostname()
	return grantorOptions{
		NodeID:     host,
		DataDir:    defaultGrantorDataDir(),
		RPCAddr:    "127.0.0.1:7401",
		RaftAddr:   "127.0.0.1:7402",
		GossipAddr: "127.0.0.1:7403",
		Timing:     clockwatch.DefaultTiming(),
		Limits:     grantor.DefaultAccountLimits(),
		Raft: raftTimeouts{Heartbeat: grantor.DefaultHeartbeatTimeout, Election: grantor.DefaultElectionTimeout,
			LeaderLease: grantor.DefaultLeaderLeaseTimeout, Commit: grantor.DefaultCommitTimeout},
	}
}

// defaultGrantorDataDir is /var/lib/leaseside for root (the unit's
// StateDirectory), else under $XDG_STATE_HOME (or ~/.local/state).
func defaultGrantorDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/leaseside"
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "leaseside", "grantor")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "leaseside", "grantor")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("leaseside-%d", os.Geteuid()), "grantor")
}

// grantorFileConfig is the grantor's JSON config file
// (packaging/etc/grantor.json). Unknown keys are errors; absent keys keep
// their defaults. Durations are Go duration strings ("100ms").
type grantorFileConfig struct {
	NodeID          string   `json:"node_id"`
	DataDir         string   `json:"data_dir"`
	RPCAddr         string   `json:"rpc_addr"`
	RaftAddr        string   `json:"raft_addr"`
	GossipAddr      string   `json:"gossip_addr"`
	Join            []string `json:"join"`
	BootstrapExpect *int     `json:"bootstrap_expect"`
	GossipKeyFile   string   `json:"gossip_key_file"`
	MetricsAddr     string   `json:"metrics_addr"`
	Rho             *float64 `json:"rho"`
	Epsilon         string   `json:"epsilon"`
	// MaxLeasesPerSidecar is limits.sidecar.leases, as config files
	// written before the limits key said it.
	MaxLeasesPerSidecar *int `json:"max_leases_per_sidecar"`
	// Limits are the accounts' limits per role and identity (limits.go).
	Limits          *limitsFileConfig `json:"limits"`
	TLSCA           string            `json:"tls_ca"`
	TLSCert         string            `json:"tls_cert"`
	TLSKey          string            `json:"tls_key"`
	AuditLog        string            `json:"audit_log"`
	MaxRequestBytes *int              `json:"max_request_bytes"`
	NameRules       string            `json:"name_rules"`

	RaftHeartbeatTimeout   string `json:"raft_heartbeat_timeout"`
	RaftElectionTimeout    string `json:"raft_election_timeout"`
	RaftLeaderLeaseTimeout string `json:"raft_leader_lease_timeout"`
	RaftCommitTimeout      string `json:"raft_commit_timeout"`
	// LogFormat is --log-format's key.
	LogFormat string `json:"log_format"`
	// MemoryLimit is --memory-limit's key.
	MemoryLimit string `json:"memory_limit"`
}

// loadGrantorConfig applies the config file at path to o.
func loadGrantorConfig(path string, o *grantorOptions) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var fc grantorFileConfig
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	for _, s := range []struct {
		v   string
		dst *string
	}{{fc.NodeID, &o.NodeID}, {fc.DataDir, &o.DataDir}, {fc.RPCAddr, &o.RPCAddr}, {fc.RaftAddr, &o.RaftAddr},
		{fc.GossipAddr, &o.GossipAddr}, {fc.GossipKeyFile, &o.GossipKeyFile}, {fc.MetricsAddr, &o.MetricsAddr},
		{fc.TLSCA, &o.TLS.CA}, {fc.TLSCert, &o.TLS.Cert}, {fc.TLSKey, &o.TLS.Key}, {fc.AuditLog, &o.AuditLog}, {fc.NameRules, &o.NameRules}} {
		if s.v != "" {
			*s.dst = s.v
		}
	}
	if fc.Join != nil {
		o.Join = fc.Join
	}
	if fc.BootstrapExpect != nil {
		o.BootstrapExpect = *fc.BootstrapExpect
	}
	if fc.MaxRequestBytes != nil {
		o.MaxRequestBytes = *fc.MaxRequestBytes
	}
	if fc.Rho != nil {
		o.Timing.Rho = *fc.Rho
	}
	if fc.MaxLeasesPerSidecar != nil {
		o.Limits.Sidecar.Leases = *fc.MaxLeasesPerSidecar
	}
	if fc.Limits != nil {
		if err := applyLimitsFile(fc.Limits, &o.Limits); err != nil {
			return fmt.Errorf("config %s: %w", path, err)
		}
	}
	if fc.LogFormat != "" {
		o.LogFormat = fc.LogFormat
	}
	if fc.MemoryLimit != "" {
		o.MemoryLimit = fc.MemoryLimit
	}
	for _, d := range []struct {
		key, v string
		dst    *time.Duration
	}{{"epsilon", fc.Epsilon, &o.Timing.Epsilon}, {"raft_heartbeat_timeout", fc.RaftHeartbeatTimeout, &o.Raft.Heartbeat},
		{"raft_election_timeout", fc.RaftElectionTimeout, &o.Raft.Election},
		{"raft_leader_lease_timeout", fc.RaftLeaderLeaseTimeout, &o.Raft.LeaderLease},
		{"raft_commit_timeout", fc.RaftCommitTimeout, &o.Raft.Commit}} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil {
			return fmt.Errorf("config %s: %s: %w", path, d.key, err)
		}
		*d.dst = v
	}
	return nil
}

// grantorFlagValues are the flags of `leaseside grantor` as given; options
// lays those given on the command line over the defaults and the file.
type grantorFlagValues struct {
	configFile  string
	nodeID      string
	dataDir     string
	rpcAddr     string
	raftAddr    string
	gossipAddr  string
	join        string
	expect      int
	keyFile     string
	metricsAddr string
	rho         float64
	eps         time.Duration
	raft        raftTimeouts
	log         logFlags
	tls         tlsFlags
	auditLog    string
	maxRequest  int
	limits      []string
	nameRules   string
	memoryLimit string
}

func (g *grantorFlagValues) register(fs *pflag.FlagSet) {
	def := defaultGrantorOptions()
	fs.StringVar(&g.configFile, "config", "", "JSON config file with the keys "+jsonKeys(grantorFileConfig{})+
		" (as the flags, with _ for -; documented in packaging/README.md, installed as "+configDocPath+"); flags win over it")
	fs.StringVar(&g.nodeID, "node-id", "", "raft server ID of this grantor: unique in the cluster, stable across restarts (default: the hostname)")
	fs.StringVar(&g.dataDir, "data-dir", "", "where the raft log and snapshots live; never wipe it: it holds the fencing token counter "+
		"(default /var/lib/leaseside as root, else $XDG_STATE_HOME/leaseside/grantor or ~/.local/state/leaseside/grantor)")
	fs.StringVar(&g.rpcAddr, "rpc-addr", def.RPCAddr, "gRPC address for sidecars; a 0.0.0.0 host is advertised with the raft address's host")
	fs.StringVar(&g.raftAddr, "raft-addr", def.RaftAddr, "raft transport address: a concrete IP the other grantors reach")
	fs.StringVar(&g.gossipAddr, "gossip-addr", def.GossipAddr, "gossip address (UDP and TCP); port 0 picks one")
	fs.StringVar(&g.join, "join", "", "comma-separated gossip addresses of cluster members to join (none: start a new gossip cluster)")
	fs.IntVar(&g.expect, "bootstrap-expect", 0, "bootstrap a new cluster once this many grantors see each other (only without raft state)")
	fs.StringVar(&g.keyFile, "gossip-key-file", "", "file with the cluster's base64 gossip encryption key (head -c 32 /dev/urandom | base64)")
	fs.StringVar(&g.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (off when empty)")
	fs.Float64Var(&g.rho, "rho", def.Timing.Rho, "maximum clock drift rate this grantor assumes; stated in every grant, and a sidecar uses the larger of its own and this")
	fs.DurationVar(&g.eps, "epsilon", def.Timing.Epsilon, "safety margin of the timing model; stated in every grant, and a sidecar uses the larger of its own and this")
	fs.DurationVar(&g.raft.Heartbeat, "raft-heartbeat-timeout", def.Raft.Heartbeat,
		"a follower that hears nothing from the leader for this long (to twice it) starts an election; the leader heartbeats 10 times as often. "+
			"Failover takes about twice this; see docs/operations.md, \"Raft timeouts\" and \"Choosing a term\"")
	fs.DurationVar(&g.raft.Election, "raft-election-timeout", def.Raft.Election,
		"how long (to twice it) a candidate waits for votes before it tries again; at least --raft-heartbeat-timeout")
	fs.DurationVar(&g.raft.LeaderLease, "raft-leader-lease-timeout", def.Raft.LeaderLease,
		"a leader that has not heard from a quorum for this long steps down (raft's check-quorum); at most --raft-heartbeat-timeout. "+
			"Raise it on a starved machine (fewer needless leader changes)")
	fs.DurationVar(&g.raft.Commit, "raft-commit-timeout", def.Raft.Commit,
		"how long the leader waits without new entries before it tells followers what is committed")
	g.log.register(fs)
	g.tls.register(fs, true)
	fs.StringVar(&g.auditLog, "audit-log", "", "write the audit trail (grants, releases, revokes, membership changes, refused calls) as JSON lines to this file (default: the log)")
	fs.IntVar(&g.maxRequest, "max-request-bytes", grantor.DefaultMaxRecvMsgSize, "largest gRPC request accepted, in bytes")
	fs.StringArrayVar(&g.limits, "limit", nil, "an account limit, ROLE.KEY=N or ROLE/NAME.KEY=N (0: none), such as sidecar.leases=50000 or "+
		"sidecar/web-7.watch_names=65536; repeatable, over the config file's \"limits\"; keys and defaults in docs/limits.md")
	fs.StringVar(&g.nameRules, "name-rules", "", "file of name rules: which lease names each identity may acquire, watch and check "+
		"(lines IDENTITY-GLOB acquire|read PREFIX...), and which grantors may join the raft configuration (lines grantor/ID-GLOB join); see SECURITY.md; "+
		"re-read on SIGHUP, a bad file keeping the rules in force (default: every identity may use every name, and every grantor certificate may join)")
	fs.StringVar(&g.memoryLimit, "memory-limit", "", "soft memory limit of the Go runtime, such as 512MiB or 2GiB, or none: the collector runs before the grantor's memory passes it "+
		"(default: GOMEMLIMIT, else 90% of the cgroup's memory limit when one is set, else none; docs/limits.md)")
}

// options returns the settings: the defaults, then the config file, then
// the flags given on the command line (fs tells which were).
func (g *grantorFlagValues) options(fs *pflag.FlagSet) (grantorOptions, error) {
	o := defaultGrantorOptions()
	if g.configFile != "" {
		if err := loadGrantorConfig(g.configFile, &o); err != nil {
			return o, err
		}
	}
	fs.Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "node-id":
			o.NodeID = g.nodeID
		case "data-dir":
			o.DataDir = g.dataDir
		case "rpc-addr":
			o.RPCAddr = g.rpcAddr
		case "raft-addr":
			o.RaftAddr = g.raftAddr
		case "gossip-addr":
			o.GossipAddr = g.gossipAddr
		case "join":
			o.Join = splitList(g.join)
		case "bootstrap-expect":
			o.BootstrapExpect = g.expect
		case "gossip-key-file":
			o.GossipKeyFile = g.keyFile
		case "metrics-addr":
			o.MetricsAddr = g.metricsAddr
		case "rho":
			o.Timing.Rho = g.rho
		case "epsilon":
			o.Timing.Epsilon = g.eps
		case "raft-heartbeat-timeout":
			o.Raft.Heartbeat = g.raft.Heartbeat
		case "raft-election-timeout":
			o.Raft.Election = g.raft.Election
		case "raft-leader-lease-timeout":
			o.Raft.LeaderLease = g.raft.LeaderLease
		case "raft-commit-timeout":
			o.Raft.Commit = g.raft.Commit
		case "tls-ca":
			o.TLS.CA = g.tls.files.CA
		case "tls-cert":
			o.TLS.Cert = g.tls.files.Cert
		case "tls-key":
			o.TLS.Key = g.tls.files.Key
		case "insecure":
			o.Insecure = g.tls.insecure
		case "audit-log":
			o.AuditLog = g.auditLog
		case "max-request-bytes":
			o.MaxRequestBytes = g.maxRequest
		case "name-rules":
			o.NameRules = g.nameRules
		case "log-format":
			o.LogFormat = g.log.format
		case "memory-limit":
			o.MemoryLimit = g.memoryLimit
		}
	})
	for _, l := range g.limits {
		if err := applyLimitFlag(l, &o.Limits); err != nil {
			return o, usagef("grantor: %v", err)
		}
	}
	switch {
	case o.NodeID == "":
		return o, usagef("grantor: --node-id is empty (and the hostname unknown)")
	case o.DataDir == "":
		return o, usagef("grantor: --data-dir is empty")
	case o.BootstrapExpect < 0:
		return o, usagef("grantor: --bootstrap-expect must not be negative")
	case o.MaxRequestBytes < 0:
		return o, usagef("grantor: --max-request-bytes must not be negative")
	}
	if o.MemoryLimit != "" {
		if _, err := parseMemoryLimit(o.MemoryLimit); err != nil {
			return o, usagef("grantor: %v", err)
		}
	}
	if err := o.TLS.Validate(); err != nil {
		return o, usageError{err}
	}
	if err := o.config().Validate(); err != nil {
		return o, usagef("%v", err)
	}
	return o, nil
}

func newGrantorCmd(e *env) *cobra.Command {
	var g grantorFlagValues
	cmd := &cobra.Command{
		Use:   "grantor",
		Short: "run one grantor node of the replicated cluster",
		Long: `Runs one grantor node. It logs "leaseside grantor ready" once it serves. On
SIGTERM or SIGINT it stops and stays a voter in the raft configuration, so
that a restart or a package upgrade never shrinks the cluster: it hands
leadership over first if it leads (a second signal skips that) and exits 0.
To take a grantor out of the cluster, run 'leaseside grantor leave' against
it; for a dead one, 'leaseside members remove'. A wrong or missing gossip
key fails the start (exit 1); seeds that do not answer yet are retried in
the background.`,
		Example: `  leaseside grantor --config /etc/leaseside/grantor.json
  leaseside grantor --node-id g1 --raft-addr 192.0.2.10:7402 --rpc-addr 0.0.0.0:7401 \
      --gossip-addr 192.0.2.10:7403 --bootstrap-expect 3 --join 192.0.2.11:7403,192.0.2.12:7403 \
      --tls-ca tls/ca.pem --tls-cert tls/grantor-g1.pem --tls-key tls/grantor-g1-key.pem \
      --gossip-key-file gossip.key`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := g.options(cmd.Flags())
			var u usageError
			if errors.As(err, &u) {
				return err
			}
			if err != nil {
				return fail(e, err)
			}
			return runGrantor(cmd.Context(), e, o, logFlags{verbose: g.log.verbose, format: o.LogFormat})
		},
	}
	g.register(cmd.Flags())
	cmd.AddCommand(newGrantorLeaveCmd(e), newGrantorRecoverCmd(e))
	return cmd
}

// config is the grantor.Config of o, without the gossip key and the
// loggers.
func (o grantorOptions) config() grantor.Config {
	cfg := grantor.DefaultConfig()
	cfg.Gossip = &gossip.Config{Name: o.NodeID, BindAddr: o.GossipAddr, Join: o.Join, Meta: gossip.Meta{Version: Version}}
	cfg.NodeID = o.NodeID
	cfg.DataDir = o.DataDir
	cfg.RPCAddr = o.RPCAddr
	cfg.RaftAddr = o.RaftAddr
	cfg.BootstrapExpect = o.BootstrapExpect
	cfg.Timing = o.Timing
	cfg.Limits = o.Limits
	cfg.MaxRecvMsgSize = o.MaxRequestBytes
	cfg.HeartbeatTimeout = o.Raft.Heartbeat
	cfg.ElectionTimeout = o.Raft.Election
	cfg.LeaderLeaseTimeout = o.Raft.LeaderLease
	cfg.CommitTimeout = o.Raft.Commit
	return cfg
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// runGrantor runs one grantor node until SIGTERM or SIGINT, then stops it
// and keeps it in the cluster (grantor.Node.Stop); a second signal skips
// the leadership handover. After the Leave RPC it exits 0 by itself.
func runGrantor(ctx context.Context, e *env, o grantorOptions, lf logFlags) error {
	exp := []exposed{{"--rpc-addr", o.RPCAddr, false}, {"--raft-addr", o.RaftAddr, false}, {"--gossip-addr", o.GossipAddr, true}}
	for _, j := range o.Join {
		exp = append(exp, exposed{"--join", j, true})
	}
	if err := checkExposure(&tlsFlags{files: o.TLS, insecure: o.Insecure}, o.GossipKeyFile != "", exp...); err != nil {
		return err
	}
	// The audit trail (a line per grant and release, each written before
	// its call is answered) shares stderr with the log by default: both
	// go through one group writer, the log's lines at once and the audit
	// lines of calls answered together in one write (internal/groupwrite).
	journal := isJournal(e.stderr)
	stderr := groupwrite.New(e.stderr)
	log, err := newLoggerOn(stderr.Synced(), journal, lf)
	if err != nil {
		return err
	}
	auditLog, err := newLoggerOn(stderr, journal, lf)
	if err != nil {
		return err
	}
	if err := applyMemoryLimit(o.MemoryLimit, log); err != nil {
		return err
	}
	tuneGrantorGCProcess(log) // grantor_gc.go
	if err := clockwatch.CheckHost(); err != nil {
		log.Error("refusing to start", "err", err)
		return exitCode(ExitError)
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	cfg := o.config()
	cfg.Logger = log
	warnInsecure(&tlsFlags{insecure: o.Insecure}, log)
	if o.TLS.Enabled() {
		c, err := pki.NewConfigurator(o.TLS)
		if err != nil {
			return fail(e, err)
		}
		cfg.TLS = c
	}
	if o.NameRules != "" {
		if cfg.NameRules, err = grantor.LoadNameRules(o.NameRules); err != nil {
			return fail(e, err)
		}
	}
	cfg.Audit, cfg.AuditFlush = auditLog, stderr.Flush
	var audit *logFile
	if o.AuditLog != "" {
		var err error
		if audit, err = openLogFile(o.AuditLog); err != nil {
			return fail(e, fmt.Errorf("audit log: %w", err))
		}
		defer audit.Close()
		w := groupwrite.New(audit)
		cfg.Audit, cfg.AuditFlush = slog.New(slog.NewJSONHandler(w, nil)), w.Flush
	}
	gc := cfg.Gossip
	gc.Logger = log.With("part", "gossip")
	if o.GossipKeyFile != "" {
		keys, err := gossip.LoadKeyFile(o.GossipKeyFile)
		if err != nil {
			return fail(e, err)
		}
		gc.Keys = keys
	}
	node, err := grantor.New(cfg)
	if err != nil {
		return fail(e, err)
	}
	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	runErr := make(chan error, 1)
	go func() { runErr <- node.Run(runCtx) }()
	reloader{tls: cfg.TLS, keyFile: o.GossipKeyFile, setKeys: node.SetGossipKeys, audit: audit,
		nameRules: o.NameRules, setNameRules: node.SetNameRules, log: log}.run(runCtx)

	metricsCtx, stopMetrics := context.WithCancel(ctx)
	defer stopMetrics()
	if o.MetricsAddr != "" {
		if err := serveMetrics(metricsCtx, o.MetricsAddr, log, node.Collector()); err != nil {
			log.Error("metrics", "err", err)
			cancelRun()
			<-runErr
			return exitCode(ExitError)
		}
	}
	if len(o.Join) == 0 && o.BootstrapExpect == 0 {
		log.Warn("no --join and no --bootstrap-expect: this grantor starts a gossip cluster of its own and waits for a leader to add it")
	}
	log.Info("leaseside grantor ready", "id", o.NodeID, "rpc", node.RPCAddr(), "raft", node.RaftAddr(),
		"gossip", node.GossipAddr(), "data_dir", o.DataDir, "bootstrap_expect", o.BootstrapExpect, "tls", cfg.TLS != nil,
		"gossip_encrypted", o.GossipKeyFile != "")
	sddaemon.SdNotify(false, sddaemon.SdNotifyReady)

	select {
	case err := <-runErr:
		if err == nil {
			// Run ends by itself only after the Leave RPC
			// (`leaseside grantor leave`): out of the cluster, done.
			log.Info("leaseside grantor stopped: it left the cluster")
			return nil
		}
		log.Error("grantor stopped", "err", err)
		return exitCode(grantorExit(err))
	case <-ctx.Done():
	case sig := <-sigs:
		log.Info("leaseside grantor stopping; it stays in the cluster (leaseside grantor leave takes it out)", "signal", sig.String())
	}
	sddaemon.SdNotify(false, sddaemon.SdNotifyStopping)
	stopCtx, cancelStop := context.WithCancel(context.Background())
	go func() {
		select {
		case sig := <-sigs:
			log.Warn("second signal: stopping without handing leadership over", "signal", sig.String())
			cancelStop()
		case <-stopCtx.Done():
		}
	}()
	err = node.Stop(stopCtx)
	cancelStop()
	cancelRun()
	if rerr := <-runErr; err == nil {
		err = rerr
	}
	if err != nil {
		log.Error("grantor stopped", "err", err)
		return exitCode(grantorExit(err))
	}
	log.Info("leaseside grantor stopped")
	return nil
}

// grantorExit is the exit code for the error that stopped a grantor:
// ExitHalted for a raft log entry it cannot apply, ExitRetired for a
// grantor the cluster retired, else ExitError.
func grantorExit(err error) int {
	switch {
	case errors.Is(err, grantor.ErrHalted):
		return ExitHalted
	case errors.Is(err, grantor.ErrRetired):
		return ExitRetired
	}
	return ExitError
}
