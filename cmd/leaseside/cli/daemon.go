package cli

import (
	"context"
	"errors"
	"os/signal"
	"strings"
	"syscall"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/daemon"
	"github.com/leaseside/leaseside/ipc"
)

// runDaemon runs the production sidecar: no embedded grantor; it talks to
// the grantor cluster it is pointed at.
func runDaemon(ctx context.Context, e *env) int {
	fs := newFlags(e, "daemon", "--grantors ADDR,... [--socket PATH] [--config FILE]")
	var sf sidecarFlags
	sf.register(fs)
	grantors := fs.String("grantors", "", "comma-separated gRPC addresses of grantors (any of them; the daemon follows the leader)")
	pos, _, err := parse(fs, e.args)
	if err != nil {
		return parseExit(err)
	}
	if len(pos) != 0 {
		fs.Usage()
		return ExitUsage
	}
	cfg, err := sf.config()
	if err != nil {
		return fail(e, err)
	}
	if *grantors != "" {
		cfg.Grantors = strings.Split(*grantors, ",")
	}
	if len(cfg.Grantors) == 0 {
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
