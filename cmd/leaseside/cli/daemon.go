package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path"
	"strings"
	"syscall"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/daemon"
	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/pki"
	"github.com/leaseside/leaseside/ipc"
)

// daemonOptions are the flags of `leaseside daemon`.
type daemonOptions struct {
	sidecar    sidecarFlags
	grantors   string
	join       string
	gossipAddr string
	gossipKey  string
	stateDir   string
	// grantorNames are the globs a grantor's certificate name must match
	// (--grantor-names); none: any.
	grantorNames []string
	// gossipAddrSet: the config file gave gossip_addr.
	gossipAddrSet bool
	tls           tlsFlags
	flags         *pflag.FlagSet
}

func newDaemonCmd(e *env) *cobra.Command {
	var o daemonOptions
	cmd := &cobra.Command{
		Use:   "daemon (--join GOSSIP-ADDR,... | --grantors ADDR,...)",
		Short: "run the sidecar against a grantor cluster",
		Long: `Runs the production sidecar: it serves the local socket and holds this
host's leases at the grantor cluster it is pointed at, found from gossip
(--join) or from a list of gRPC addresses (--grantors, or "grantors" in the
config file). It serves the socket at once, whether or not a grantor
answers yet: it retries its gossip seeds in the background, answers
acquires with "unavailable" while no leader is reachable, and logs when it
first reaches one; 'leaseside status' says whether a leader is reachable.
It logs "leaseside daemon ready" once the socket serves, and tells systemd
(Type=notify). SIGTERM or SIGINT stops it; it logs why it stopped.`,
		Example: `  leaseside daemon --config /etc/leaseside/leaseside.json
  leaseside daemon --join 192.0.2.10:7403 --gossip-key-file /etc/leaseside/gossip.key
  leaseside daemon --grantors 192.0.2.10:7401,192.0.2.11:7401 --socket-group leaseside`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.flags = cmd.Flags()
			return runDaemon(cmd.Context(), e, &o)
		},
	}
	fs := cmd.Flags()
	o.sidecar.register(fs)
	fs.StringVar(&o.grantors, "grantors", "", "comma-separated gRPC addresses of grantors (any of them; the daemon follows the leader)")
	fs.StringVar(&o.join, "join", "", "comma-separated gossip addresses of cluster members: learn the grantors and their leader from gossip")
	fs.StringVar(&o.gossipAddr, "gossip-addr", "0.0.0.0:0", "address to gossip on when --join is given (port 0: any free port; "+
		"when not given and every --join seed is loopback, 127.0.0.1:0)")
	fs.StringVar(&o.stateDir, "state-dir", "", "directory (only this user's) where the daemon keeps what a restart resumes: its sessions and leases "+
		"(default: SOCKET.state beside the socket; off: keep nothing, a restart drops every lease)")
	fs.StringVar(&o.gossipKey, "gossip-key-file", "", "file with the cluster's gossip keyring (base64 keys, one per line, the first encrypts; leaseside tls gossip-key)")
	fs.StringSliceVar(&o.grantorNames, "grantor-names", nil, "comma-separated globs of the grantor certificate names this sidecar takes as its cluster's grantors, "+
		"such as g[1-5] (with TLS; default: any grantor certificate of the CA, a name in no raft configuration too: see SECURITY.md)")
	o.tls.register(fs, true)
	return cmd
}

// runDaemon runs the production sidecar: no embedded grantor; it talks to
// the grantor cluster it is pointed at.
func runDaemon(ctx context.Context, e *env, o *daemonOptions) error {
	sf := &o.sidecar
	cfg, err := sf.config()
	if err != nil {
		return fail(e, err)
	}
	if o.grantors != "" {
		cfg.Grantors = strings.Split(o.grantors, ",")
	}
	o.gossipFromFile()
	if len(cfg.Grantors) == 0 && o.join == "" {
		return usagef("give --join (gossip) or --grantors, or grantors in the config file")
	}
	if err := o.checkSecurity(&cfg); err != nil {
		return err
	}
	if err := o.checkGrantorNames(); err != nil {
		return err
	}
	log, err := newLogger(e, sf.logFlags)
	if err != nil {
		return err
	}
	warnInsecure(&o.tls, log)
	if err := clockwatch.CheckHost(); err != nil {
		log.Error("refusing to start", "err", err)
		return exitCode(ExitError)
	}
	tuneSidecarGCProcess() // daemon_gc.go
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case s := <-sigs:
			cancel(fmt.Errorf("signal %v", s))
		case <-ctx.Done():
		}
	}()
	cfg.Logger = log
	tlsConf, err := o.tls.configurator()
	if err != nil {
		return fail(e, err)
	}
	if tlsConf != nil {
		logTLS(tlsConf, log)
		cfg.Credentials = tlsConf.GrantorCredentials(o.grantorNames)
		if len(o.grantorNames) == 0 {
			log.Warn("grantor names: none given (--grantor-names): this sidecar takes any grantor certificate of the cluster CA as a grantor, one of a name in no raft configuration too (SECURITY.md)")
		} else {
			log.Info("grantor names: this sidecar takes only grantor certificates named", "grantor_names", o.grantorNames)
		}
	}
	reload := reloader{tls: tlsConf, log: log}
	if o.join != "" {
		m, err := joinGossip(ctx, o.join, o.gossipAddr, o.gossipKey, gossipName(tlsConf), log)
		if err != nil {
			log.Error("joining the gossip cluster", "err", err)
			return exitCode(ExitError)
		}
		defer func() {
			m.Leave(5 * time.Second)
			m.Shutdown()
		}()
		cfg.Gossip = m
		cfg.GossipJoin = strings.Split(o.join, ",")
		reload.keyFile, reload.setKeys = o.gossipKey, m.SetKeys
	}
	reload.run(ctx)
	// The socket first: a daemon already serving it owns the state too.
	ln, err := sf.listen()
	if err != nil {
		log.Error("listening", "err", err)
		if errors.Is(err, ipc.ErrDaemonRunning) {
			return exitCode(ExitUnavailable)
		}
		return exitCode(ExitError)
	}
	cfg.StateDir = o.stateDirFor(sf.socket)
	d, err := daemon.New(cfg)
	if err != nil {
		ln.Close()
		return fail(e, err)
	}
	if cfg.Gossip != nil {
		log.Info("leaseside daemon ready", "socket", sf.socket, "join", cfg.GossipJoin, "gossip", cfg.Gossip.Addr(), "session", d.Session(),
			"tls", tlsConf != nil, "gossip_encrypted", o.gossipKey != "")
	} else {
		log.Info("leaseside daemon ready", "socket", sf.socket, "grantors", cfg.Grantors, "session", d.Session(), "tls", tlsConf != nil)
	}
	if sf.metricsAddr != "" {
		cs := []prometheus.Collector{d.Collector()}
		if tlsConf != nil {
			cs = append(cs, tlsConf.Collector("leaseside_sidecar"))
		}
		if err := serveMetrics(ctx, sf.metricsAddr, log, cs...); err != nil {
			log.Error("metrics", "err", err)
			return exitCode(ExitError)
		}
	}
	sddaemon.SdNotify(false, sddaemon.SdNotifyReady)
	if err := d.Run(ctx, ln); err != nil {
		log.Error("leaseside daemon stopped", "why", err)
		return exitCode(ExitError)
	}
	log.Info("leaseside daemon stopped", "why", context.Cause(ctx))
	return nil
}

// stateDirFor is the state directory: --state-dir (or the config file's
// state_dir), "" for off, else SOCKET.state beside the socket.
func (o *daemonOptions) stateDirFor(socket string) string {
	dir := o.stateDir
	if dir == "" {
		dir = o.sidecar.fileStateDir
	}
	switch dir {
	case "off":
		return ""
	case "":
		return socket + ".state"
	}
	return dir
}

// gossipFromFile takes the config file's gossip keys for the flags not
// given on the command line.
func (o *daemonOptions) gossipFromFile() {
	fg := o.sidecar.fileGossip
	if len(fg.Join) > 0 && !o.flags.Changed("join") {
		o.join = strings.Join(fg.Join, ",")
	}
	if fg.Addr != "" && !o.flags.Changed("gossip-addr") {
		o.gossipAddr = fg.Addr
		o.gossipAddrSet = true
	}
	if fg.KeyFile != "" && !o.flags.Changed("gossip-key-file") {
		o.gossipKey = fg.KeyFile
	}
	if len(fg.GrantorNames) > 0 && !o.flags.Changed("grantor-names") {
		o.grantorNames = fg.GrantorNames
	}
}

// checkSecurity settles the TLS files (flags over the config file) and
// the gossip address, and refuses to run in clear text off loopback
// without --insecure.
func (o *daemonOptions) checkSecurity(cfg *daemon.Config) error {
	o.tls.fromFile(o.flags, o.sidecar.fileTLS.CA, o.sidecar.fileTLS.Cert, o.sidecar.fileTLS.Key)
	seeds := splitList(o.join)
	if !o.flags.Changed("gossip-addr") && !o.gossipAddrSet && len(seeds) > 0 && allLoopback(seeds) {
		o.gossipAddr = "127.0.0.1:0"
	}
	var exp []exposed
	for _, g := range cfg.Grantors {
		exp = append(exp, exposed{"--grantors", g, false})
	}
	if len(seeds) > 0 {
		exp = append(exp, exposed{"--gossip-addr", o.gossipAddr, true})
		for _, s := range seeds {
			exp = append(exp, exposed{"--join", s, true})
		}
	}
	return checkExposure(&o.tls, o.gossipKey != "", exp...)
}

func allLoopback(addrs []string) bool {
	for _, a := range addrs {
		if !isLoopback(a) {
			return false
		}
	}
	return true
}

// gossipName is this sidecar's gossip member name: with TLS, its
// certificate's identity name and a random suffix (web-1-3fa2), so that
// `members` names the host as the grantors' refusals and audit lines do,
// and two sidecars sharing a certificate still gossip under distinct
// names; without TLS, "" (the host name and a suffix, gossip's default).
func gossipName(tlsConf *pki.Configurator) string {
	if tlsConf == nil {
		return ""
	}
	var b [2]byte
	_, _ = rand.Read(b[:])
	return tlsConf.Identity().Name + "-" + hex.EncodeToString(b[:])
}

// joinGossip starts this sidecar's gossip member and tries its seeds once,
// briefly: a wrong gossip key is an error; seeds that do not answer yet
// are the daemon's to retry (Config.GossipJoin), while it serves.
func joinGossip(ctx context.Context, seeds, bind, keyFile, name string, log *slog.Logger) (*gossip.Member, error) {
	cfg := gossip.Config{
		Name:     name,
		BindAddr: bind,
		Join:     strings.Split(seeds, ","),
		Meta:     gossip.Meta{Role: gossip.RoleSidecar, Version: Version},
		Logger:   log.With("part", "gossip"),
	}
	if keyFile != "" {
		keys, err := gossip.LoadKeyFile(keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Keys = keys
	}
	join := cfg.Join
	cfg.Join = nil
	m, err := gossip.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	jctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := m.Join(jctx, join); errors.Is(err, gossip.ErrGossipKey) {
		m.Shutdown()
		return nil, err
	} else if err != nil {
		log.Warn("no gossip seed answers yet; serving, and retrying the join in the background", "seeds", join, "err", err)
	}
	return m, nil
}

// checkGrantorNames refuses --grantor-names without TLS (no certificate
// then names a grantor) and a glob path.Match cannot read.
func (o *daemonOptions) checkGrantorNames() error {
	if len(o.grantorNames) > 0 && !o.tls.files.Enabled() {
		return usagef("--grantor-names needs TLS (--tls-ca, --tls-cert, --tls-key): without it no certificate names a grantor")
	}
	for _, g := range o.grantorNames {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			return usagef("--grantor-names: %q is not a glob of grantor names (path.Match: * ? [...])", g)
		}
	}
	return nil
}
