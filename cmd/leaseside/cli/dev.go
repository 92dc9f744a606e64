package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/daemon"
	"github.com/leaseside/leaseside/grantor"
	"github.com/leaseside/leaseside/ipc"
)

// runDev runs the embedded default: a sidecar and a single-node grantor in
// one process, talking over real gRPC on loopback as they would across
// hosts.
func runDev(ctx context.Context, e *env) int {
	fs := newFlags(e, "dev", "[--socket PATH] [--data-dir DIR] [--config FILE]")
	var sf sidecarFlags
	sf.register(fs)
	dataDir := fs.String("data-dir", defaultDataDir(), "where the grantor keeps its raft log and snapshots")
	rpcAddr := fs.String("rpc-addr", "127.0.0.1:0", "the embedded grantor's gRPC address")
	_, code := parseArgs(fs, e.args, 0)
	if code >= 0 {
		return code
	}
	dcfg, err := sf.config()
	if err != nil {
		return fail(e, err)
	}
	log := newLogger(e, sf.verbose)
	if err := clockwatch.CheckHost(); err != nil {
		log.Error("refusing to start", "err", err)
		return ExitError
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	gcfg := grantor.DefaultConfig()
	gcfg.NodeID = "dev"
	gcfg.DataDir = filepath.Join(*dataDir, "grantor")
	gcfg.RaftAddr = "127.0.0.1:0"
	gcfg.RPCAddr = *rpcAddr
	gcfg.Bootstrap = true
	gcfg.Timing = dcfg.Timing
	gcfg.Logger = log.With("part", "grantor")
	node, err := grantor.New(gcfg)
	if err != nil {
		log.Error("starting grantor", "err", err)
		return ExitError
	}
	gctx, gcancel := context.WithCancel(context.Background())
	gdone := make(chan error, 1)
	go func() { gdone <- node.Run(gctx) }()
	defer func() {
		gcancel()
		<-gdone
	}()
	if err := node.WaitReady(ctx); err != nil {
		log.Error("grantor did not become ready", "err", err)
		return ExitError
	}

	dcfg.Grantors = []string{node.RPCAddr()}
	dcfg.Logger = log.With("part", "sidecar")
	d, err := daemon.New(dcfg)
	if err != nil {
		log.Error("starting sidecar", "err", err)
		return ExitError
	}
	ln, err := sf.listen()
	if err != nil {
		log.Error("listening", "err", err)
		if errors.Is(err, ipc.ErrDaemonRunning) {
			return ExitUnavailable
		}
		return ExitError
	}
	log.Info("leaseside dev ready", "socket", sf.socket, "data_dir", *dataDir, "grantor_rpc", node.RPCAddr(), "session", d.Session())
	if sf.metricsAddr != "" {
		if err := serveMetrics(ctx, sf.metricsAddr, log, d.Collector(), node.Collector()); err != nil {
			log.Error("metrics", "err", err)
			return ExitError
		}
	}
	sddaemon.SdNotify(false, sddaemon.SdNotifyReady)
	if err := d.Run(ctx, ln); err != nil {
		log.Error("sidecar stopped", "err", err)
		return ExitError
	}
	log.Info("leaseside dev stopped")
	return ExitOK
}

// defaultDataDir is /var/lib/leaseside/dev for root, else under
// $XDG_STATE_HOME (or ~/.local/state).
func defaultDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/leaseside/dev"
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "leaseside", "dev")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "leaseside", "dev")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("leaseside-%d", os.Geteuid()), "dev")
}

func newLogger(e *env, verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
}
