package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/signal"
	"strings"
	"syscall"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/daemon"
	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/ipc"
)

// runDaemon runs the production sidecar: no embedded grantor; it talks to
// the grantor cluster it is pointed at.
func runDaemon(ctx context.Context, e *env) int {
	fs := newFlags(e, "daemon", "(--join GOSSIP-ADDR,... | --grantors ADDR,...) [--socket PATH] [--config FILE]")
	var sf sidecarFlags
	sf.register(fs)
	grantors := fs.String("grantors", "", "comma-separated gRPC addresses of grantors (any of them; the daemon follows the leader)")
	join := fs.String("join", "", "comma-separated gossip addresses of cluster members: learn the grantors and their leader from gossip")
	gossipAddr := fs.String("gossip-addr", "0.0.0.0:0", "address to gossip on when --join is given (port 0: any free port)")
	gossipKey := fs.String("gossip-key-file", "", "file with the cluster's base64 gossip encryption key")
	_, code := parseArgs(fs, e.args, 0)
	if code >= 0 {
		return code
	}
	cfg, err := sf.config()
	if err != nil {
		return fail(e, err)
	}
	if *grantors != "" {
		cfg.Grantors = strings.Split(*grantors, ",")
	}
	if len(cfg.Grantors) == 0 && *join == "" {
		fmt.Fprintln(e.stderr, "leaseside: give --join (gossip) or --grantors, or grantors in the config file")
		fs.Usage()
		return ExitUsage
	}
	log := newLogger(e, sf.verbose)
	if err := clockwatch.CheckHost(); err != nil {
		log.Error("refusing to start", "err", err)
		return ExitError
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg.Logger = log
	if *join != "" {
		m, err := joinGossip(ctx, *join, *gossipAddr, *gossipKey, log)
		if err != nil {
			log.Error("joining the gossip cluster", "err", err)
			return ExitUnavailable
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
			return ExitUnavailable
		}
		return ExitError
	}
	log.Info("leaseside daemon ready", "socket", sf.socket, "grantors", cfg.Grantors, "session", d.Session())
	if sf.metricsAddr != "" {
		if err := serveMetrics(ctx, sf.metricsAddr, log, d.Collector()); err != nil {
			log.Error("metrics", "err", err)
			return ExitError
		}
	}
	sddaemon.SdNotify(false, sddaemon.SdNotifyReady)
	if err := d.Run(ctx, ln); err != nil {
		log.Error("daemon stopped", "err", err)
		return ExitError
	}
	return ExitOK
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
