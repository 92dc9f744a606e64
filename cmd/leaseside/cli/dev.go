package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"github.com/spf13/cobra"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/daemon"
	"github.com/leaseside/leaseside/grantor"
	"github.com/leaseside/leaseside/internal/safefs"
	"github.com/leaseside/leaseside/ipc"
)

// devOptions are the flags of `leaseside dev`.
type devOptions struct {
	sidecar sidecarFlags
	dataDir string
	rpcAddr string
	tls     tlsFlags // --insecure only: dev has no certificates
}

func newDevCmd(e *env) *cobra.Command {
	var o devOptions
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "run a sidecar and a single-node grantor in one process",
		Long: `Runs a sidecar and a single-node grantor in one process, talking over real
gRPC as they would across hosts: leases on one machine, with nothing else to
set up. It opens no TCP or UDP port unless asked (--rpc-addr,
--metrics-addr): the grantor serves gRPC on a Unix socket in its data
directory that only this user can open (0600 in a 0700 directory), and its
raft runs in memory. It logs "leaseside dev ready" once the socket serves.
The grantor's raft log lives in --data-dir and keeps the fencing token
counter across restarts.

As root the socket is /run/leaseside/leaseside.sock; for other users it is
$XDG_RUNTIME_DIR/leaseside/leaseside.sock, or /tmp/leaseside-UID/leaseside.sock
without XDG_RUNTIME_DIR. Clients find it there too (or set $LEASESIDE_SOCKET),
but only in a directory of the user's that nobody else may write to, with a
daemon of the user's or root's on it; otherwise they warn and use root's.`,
		Example: `  leaseside dev
  sudo leaseside dev --socket-group leaseside
  leaseside dev --socket "$XDG_RUNTIME_DIR/demo.sock" --data-dir ~/.local/state/leaseside/demo --config dev.json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDev(cmd.Context(), e, &o)
		},
	}
	fs := cmd.Flags()
	o.sidecar.register(fs)
	fs.StringVar(&o.dataDir, "data-dir", "", "where the grantor keeps its raft log and snapshots "+
		"(default /var/lib/leaseside/dev as root, else $XDG_STATE_HOME/leaseside/dev or ~/.local/state/leaseside/dev)")
	fs.StringVar(&o.rpcAddr, "rpc-addr", "", "serve the embedded grantor's gRPC on this TCP address instead, without TLS, "+
		"so that every local user (and every host that reaches it) can call it; needs --insecure "+
		"(default: only a Unix socket in the data directory that only this user can open)")
	fs.BoolVar(&o.tls.insecure, "insecure", false, "allow --rpc-addr (in clear text and unauthenticated: logged as a warning at every start)")
	return cmd
}

// runDev runs the embedded default: a sidecar and a single-node grantor in
// one process, talking over real gRPC on loopback as they would across
// hosts.
func runDev(ctx context.Context, e *env, o *devOptions) error {
	sf := &o.sidecar
	if o.dataDir == "" {
		o.dataDir = defaultDataDir()
	}
	dcfg, err := sf.config()
	if err != nil {
		return fail(e, err)
	}
	if o.rpcAddr != "" && !strings.HasPrefix(o.rpcAddr, "unix:") && !o.tls.insecure {
		// Without TLS every caller of the grantor is an operator: a TCP
		// port, even on loopback, hands that to every local user, past
		// the socket's mode and ACL.
		return usagef("--rpc-addr %s serves the grantor without TLS to every local user (and to every host that reaches it), "+
			"past the socket's mode and ACL: give --insecure to do it anyway, or leave --rpc-addr out", o.rpcAddr)
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

	// The data dir, as the grantor's own in it, must be nobody else's:
	// its owner could swap the raft log, or the lock file for a link.
	if err := safefs.MkdirAll(o.dataDir, 0o700); err != nil {
		log.Error("refusing to start: --data-dir", "err", err)
		return exitCode(ExitError)
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	// The grantor's collection policy: its allocation is the most of
	// this process's.
	tuneGrantorGCProcess(log) // grantor_gc.go
	gcfg := grantor.DefaultConfig()
	gcfg.NodeID = "dev"
	gcfg.DataDir = filepath.Join(o.dataDir, "grantor")
	gcfg.InMemoryRaft = true
	gcfg.RPCAddr = "unix:" + filepath.Join(gcfg.DataDir, "grpc.sock")
	if o.rpcAddr != "" {
		gcfg.RPCAddr = o.rpcAddr
	}
	gcfg.Bootstrap = true
	gcfg.Timing = dcfg.Timing
	gcfg.Logger = log.With("part", "grantor")
	node, err := grantor.New(gcfg)
	if err != nil {
		log.Error("starting grantor", "err", err)
		return exitCode(ExitError)
	}
	// The sidecar serves only while its grantor runs: when the grantor
	// stops on its own (it halted, or left through the Leave RPC), dev
	// stops too, with the grantor's exit status.
	gctx, gcancel := context.WithCancel(context.Background())
	gended := make(chan struct{})
	var gerr error
	sigCtx := ctx
	ctx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	go func() {
		gerr = node.Run(gctx)
		close(gended)
		stopRun(errGrantorStopped)
	}()
	defer func() {
		gcancel()
		<-gended
	}()
	grantorStopped := func() (int, bool) {
		select {
		case <-gended:
		default:
			return 0, false
		}
		log.Error("the embedded grantor stopped; stopping", "err", gerr)
		if errors.Is(gerr, grantor.ErrHalted) {
			return ExitHalted, true
		}
		return ExitError, true
	}
	if err := node.WaitReady(ctx); err != nil {
		select { // a grantor that failed to become ready returns from Run
		case <-gended:
		case <-sigCtx.Done():
		}
		if code, ok := grantorStopped(); ok {
			return exitCode(code)
		}
		log.Error("grantor did not become ready", "err", err)
		return exitCode(ExitError)
	}

	dcfg.Grantors = []string{node.RPCAddr()}
	dcfg.Logger = log.With("part", "sidecar")
	d, err := daemon.New(dcfg)
	if err != nil {
		log.Error("starting sidecar", "err", err)
		return exitCode(ExitError)
	}
	ln, err := sf.listen()
	if err != nil {
		log.Error("listening", "err", err)
		if errors.Is(err, ipc.ErrDaemonRunning) {
			return exitCode(ExitUnavailable)
		}
		return exitCode(ExitError)
	}
	log.Info("leaseside dev ready", "socket", sf.socket, "data_dir", o.dataDir, "grantor_rpc", node.RPCAddr(), "session", d.Session())
	if sf.metricsAddr != "" {
		if err := serveMetrics(ctx, sf.metricsAddr, log, d.Collector(), node.Collector()); err != nil {
			log.Error("metrics", "err", err)
			return exitCode(ExitError)
		}
	}
	sddaemon.SdNotify(false, sddaemon.SdNotifyReady)
	err = d.Run(ctx, ln)
	if code, ok := grantorStopped(); ok {
		return exitCode(code)
	}
	if err != nil {
		log.Error("sidecar stopped", "err", err)
		return exitCode(ExitError)
	}
	log.Info("leaseside dev stopped", "why", context.Cause(ctx).Error())
	return nil
}

// errGrantorStopped is why dev stops when its embedded grantor ended.
var errGrantorStopped = errors.New("the embedded grantor stopped")

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
