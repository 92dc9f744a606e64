package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/leaseside/leaseside/fence"
	"github.com/leaseside/leaseside/ipc"
)

// fenceProxyOptions are the flags of `leaseside fence-proxy`.
type fenceProxyOptions struct {
	listen         string
	backend        string
	state          string
	methods        []string
	prefixes       []string
	backendTimeout time.Duration
	checkToken     bool
	socket         string
	checkTimeout   time.Duration
	maxLeases      int
	log            logFlags
}

func newFenceProxyCmd(e *env) *cobra.Command {
	var o fenceProxyOptions
	def := fence.DefaultProxyConfig()
	cmd := &cobra.Command{
		Use:   "fence-proxy --listen ADDR --backend URL --state FILE",
		Short: "a reverse proxy that refuses requests with a stale fencing token (409)",
		Long: `Runs a reverse proxy in front of an HTTP service (an object store's API, a
REST service) that fences its writes: a request whose method is one of
--fence-methods and whose path starts with one of --fence-path-prefix
must carry the headers Leaseside-Lease (the lease name) and
Leaseside-Token (its token), and is forwarded only if that token is not
lower than the highest the proxy has seen for that lease. Otherwise the
proxy answers 409 with a JSON body {"error":"stale_token","lease",
"token","highest","message"} and the header Leaseside-Highest-Token; a
fenced request without the headers gets 428 (fence_required). Other
requests are forwarded as they are.

For each lease, checking, recording and forwarding are one step: the next
request of the lease is forwarded only after the backend answered the one
before (even if its client went away, up to --backend-timeout), so a
stale request cannot overtake a newer one. The highest tokens are kept in
--state, synced before a request with a new highest token is forwarded,
so a restart of the proxy never lets an older token through. The state
file is locked: one proxy per file. With --check-token, a token higher
than any seen for its lease is first checked with the grantors (as
'leaseside check-token' does, through the daemon at --socket) and refused
(409, token_not_live) unless it is a live grant.

A write through it, inside 'leaseside run':

  curl -fsS -X PUT -H "Leaseside-Lease: $LEASESIDE_LEASE" \
    -H "Leaseside-Token: $LEASESIDE_TOKEN" --data-binary @f http://127.0.0.1:8081/bucket/f

Only requests through the proxy are fenced: the backend must not be
reachable around it by the writers. It logs "leaseside fence-proxy ready"
once it serves.`,
		Example: `  leaseside fence-proxy --listen 127.0.0.1:8081 --backend http://127.0.0.1:9000 --state /var/lib/leaseside/minio.fence
  leaseside fence-proxy --listen :8081 --backend http://10.0.0.5:8080 --state api.fence --fence-path-prefix /orders/ --check-token`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runFenceProxy(cmd.Context(), e, &o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.listen, "listen", "", "address to serve on (host:port; port 0 picks one, logged in the ready line)")
	fs.StringVar(&o.backend, "backend", "", "URL of the service to forward to (http:// or https://)")
	fs.StringVar(&o.state, "state", "", "file keeping the highest token per lease (created if missing; locked while the proxy runs)")
	fs.StringSliceVar(&o.methods, "fence-methods", def.Methods, "HTTP methods that must carry a lease and token")
	fs.StringSliceVar(&o.prefixes, "fence-path-prefix", def.PathPrefixes, "paths (prefixes) that must carry a lease and token, for the fenced methods")
	fs.DurationVar(&o.backendTimeout, "backend-timeout", def.BackendTimeout, "longest wait for the backend's answer to a request")
	fs.BoolVar(&o.checkToken, "check-token", false, "check a token higher than any seen for its lease with the grantors before accepting it")
	fs.StringVar(&o.socket, "socket", "", "daemon socket for --check-token (default $"+ipc.SocketEnv+", else the system's or your own daemon's)")
	fs.DurationVar(&o.checkTimeout, "check-timeout", 10*time.Second, "give up on a --check-token call after this long (the request gets 503)")
	fs.IntVar(&o.maxLeases, "max-leases", def.MaxLeases, "most leases whose tokens the proxy keeps; a request of another lease gets 507")
	o.log.register(fs)
	return cmd
}

// proxyConfig turns the flags into a fence.ProxyConfig (without its
// record), or a usage error naming the flag.
func (o *fenceProxyOptions) proxyConfig() (fence.ProxyConfig, error) {
	cfg := fence.DefaultProxyConfig()
	switch {
	case o.listen == "":
		return cfg, usagef("missing --listen ADDR")
	case o.backend == "":
		return cfg, usagef("missing --backend URL")
	case o.state == "":
		return cfg, usagef("missing --state FILE")
	case o.backendTimeout <= 0:
		return cfg, usagef("--backend-timeout %s: must be more than 0s", fmtDuration(o.backendTimeout))
	case o.checkTimeout <= 0:
		return cfg, usagef("--check-timeout %s: must be more than 0s", fmtDuration(o.checkTimeout))
	case o.maxLeases <= 0:
		return cfg, usagef("--max-leases %d: must be at least 1", o.maxLeases)
	}
	u, err := url.Parse(o.backend)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return cfg, usagef("--backend %q: give an http:// or https:// URL with a host", o.backend)
	}
	cfg.Backend, cfg.BackendTimeout, cfg.MaxLeases = u, o.backendTimeout, o.maxLeases
	cfg.Methods = nil
	for _, m := range o.methods {
		m = strings.ToUpper(strings.TrimSpace(m))
		if m == "" || strings.ContainsAny(m, " \t") {
			return cfg, usagef("--fence-methods %q: give HTTP methods separated by commas", strings.Join(o.methods, ","))
		}
		cfg.Methods = append(cfg.Methods, m)
	}
	cfg.PathPrefixes = o.prefixes
	for _, p := range o.prefixes {
		if !strings.HasPrefix(p, "/") {
			return cfg, usagef("--fence-path-prefix %q: a path prefix starts with /", p)
		}
	}
	if len(cfg.Methods) == 0 || len(cfg.PathPrefixes) == 0 {
		return cfg, usagef("--fence-methods and --fence-path-prefix need at least one value each")
	}
	return cfg, nil
}

func runFenceProxy(ctx context.Context, e *env, o *fenceProxyOptions) error {
	cfg, err := o.proxyConfig()
	if err != nil {
		return err
	}
	log, err := newLogger(e, o.log)
	if err != nil {
		return err
	}
	rec, err := fence.OpenRecord(o.state, false)
	if err != nil {
		if errors.Is(err, fence.ErrRecordInUse) {
			return fail(e, fmt.Errorf("--state %s is in use by another process (another fence-proxy?): one proxy per state file", o.state))
		}
		return fail(e, fmt.Errorf("--state: %w", err))
	}
	cfg.Record, cfg.Logger = rec, log
	if o.checkToken {
		c := &ipc.Client{Socket: o.socket}
		defer c.Close()
		cfg.CheckToken = func(ctx context.Context, lease string, token uint64) (bool, error) {
			ctx, cancel := context.WithTimeout(ctx, o.checkTimeout)
			defer cancel()
			live, _, err := c.CheckToken(ctx, lease, strconv.FormatUint(token, 10))
			return live, err
		}
	}
	p, err := fence.NewProxy(cfg)
	if err != nil {
		rec.Close()
		return fail(e, err)
	}
	defer p.Close()
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fail(e, fmt.Errorf("--listen: %w", err))
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("leaseside fence-proxy ready", "listen", ln.Addr().String(), "backend", cfg.Backend.String(), "state", o.state,
		"fence_methods", strings.Join(cfg.Methods, ","), "fence_path_prefix", strings.Join(cfg.PathPrefixes, ","), "check_token", o.checkToken)
	select {
	case err := <-served:
		return fail(e, err)
	case <-ctx.Done():
	}
	// Requests in flight finish (their turns end), then the state closes.
	sctx, cancel := context.WithTimeout(context.Background(), cfg.BackendTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("requests still in flight at shutdown", "err", err)
	}
	log.Info("leaseside fence-proxy stopped")
	return nil
}
