package cli

import (
	"context"
	"errors"
	"log/slog"
	"os/signal"
	"strings"
	"syscall"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"github.com/spf13/cobra"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/daemon"
	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/ipc"
)

// daemonOptions are the flags of `leaseside daemon`.
type daemonOptions struct {
	sidecar    sidecarFlags
	grantors   string
	join       string
	gossipAddr string
	gossipKey  string
}

func newDaemonCmd(e *env) *cobra.Command {
	var o daemonOptions
	cmd := &cobra.Command{
		Use:   "daemon (--join GOSSIP-ADDR,... | --grantors ADDR,...)",
		Short: "run the sidecar against a grantor cluster",
		Long: `Runs the production sidecar: it serves the local socket and holds this
host's leases at the grantor cluster it is pointed at, found from gossip
(--join) or from a list of gRPC addresses (--grantors, or "grantors" in the
config file). It logs "leaseside daemon ready" once the socket serves, and
tells systemd (Type=notify). SIGTERM or SIGINT stops it.`,
		Example: `  leaseside daemon --config /etc/leaseside/leaseside.json
  leaseside daemon --join 192.0.2.10:7403 --gossip-key-file /etc/leaseside/gossip.key
  leaseside daemon --grantors 192.0.2.10:7401,192.0.2.11:7401 --socket-group leaseside`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDaemon(cmd.Context(), e, &o)
		},
	}
	fs := cmd.Flags()
	o.sidecar.register(fs)
	fs.StringVar(&o.grantors, "grantors", "", "comma-separated gRPC addresses of grantors (any of them; the daemon follows the leader)")
	fs.StringVar(&o.join, "join", "", "comma-separated gossip addresses of cluster members: learn the grantors and their leader from gossip")
	fs.StringVar(&o.gossipAddr, "gossip-addr", "0.0.0.0:0", "address to gossip on when --join is given (port 0: any free port)")
	fs.StringVar(&o.gossipKey, "gossip-key-file", "", "file with the cluster's base64 gossip encryption key")
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
	if len(cfg.Grantors) == 0 && o.join == "" {
		return usagef("give --join (gossip) or --grantors, or grantors in the config file")
	}
	log := newLogger(e, sf.verbose)
	if err := clockwatch.CheckHost(); err != nil {
		log.Error("refusing to start", "err", err)
		return exitCode(ExitError)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg.Logger = log
	if o.join != "" {
		m, err := joinGossip(ctx, o.join, o.gossipAddr, o.gossipKey, log)
		if err != nil {
			log.Error("joining the gossip cluster", "err", err)
			return exitCode(ExitUnavailable)
		}
		defer func() {
			m.Leave(5 * time.Second)
			m.Shutdown()
		}()
		cfg.Gossip = m
	}
	d, err := daemon.New(cfg)
	if err != nil {
		return fail(e, err)
	}
	ln, err := sf.listen()
	if err != nil {
		log.Error("listening", "err", err)
		if errors.Is(err, ipc.ErrDaemonRunning) {
			return exitCode(ExitUnavailable)
		}
		return exitCode(ExitError)
	}
	log.Info("leaseside daemon ready", "socket", sf.socket, "grantors", cfg.Grantors, "session", d.Session())
	if sf.metricsAddr != "" {
		if err := serveMetrics(ctx, sf.metricsAddr, log, d.Collector()); err != nil {
			log.Error("metrics", "err", err)
			return exitCode(ExitError)
		}
	}
	sddaemon.SdNotify(false, sddaemon.SdNotifyReady)
	if err := d.Run(ctx, ln); err != nil {
		log.Error("daemon stopped", "err", err)
		return exitCode(ExitError)
	}
	return nil
}

// joinGossip joins the gossip cluster as a sidecar member.
func joinGossip(ctx context.Context, seeds, bind, keyFile string, log *slog.Logger) (*gossip.Member, error) {
	cfg := gossip.Config{
		BindAddr: bind,
		Join:     strings.Split(seeds, ","),
		Meta:     gossip.Meta{Role: gossip.RoleSidecar, Version: Version},
		Logger:   log.With("part", "gossip"),
	}
	if keyFile != "" {
		key, err := gossip.LoadKeyFile(keyFile)
		if err != nil {
			return nil, err
		}
		cfg.SecretKey = key
	}
	return gossip.Start(ctx, cfg)
}
