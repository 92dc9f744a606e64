package cli

import (
	"context"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/leaseside/leaseside/grantor"
	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/pki"
	"github.com/leaseside/leaseside/internal/safefs"
)

// The cluster's TLS and exposure settings on the command line: the
// --tls-* flags (and the tls_ca, tls_cert, tls_key config keys) of the
// commands that talk to grantors, the refusal to run in clear text off
// loopback without --insecure, and the SIGHUP reload.

// tlsFlags are --tls-ca, --tls-cert and --tls-key, and on the commands
// that listen or gossip, --insecure.
type tlsFlags struct {
	files    pki.Files
	insecure bool
}

func (t *tlsFlags) register(fs *pflag.FlagSet, listens bool) {
	fs.StringVar(&t.files.CA, "tls-ca", "", "the cluster CA's certificate (PEM); with --tls-cert and --tls-key, every link to grantors is mutual TLS")
	fs.StringVar(&t.files.Cert, "tls-cert", "", "this node's certificate (PEM), signed by the CA (leaseside tls cert create)")
	fs.StringVar(&t.files.Key, "tls-key", "", "the certificate's private key (PEM, mode 0600)")
	if listens {
		fs.BoolVar(&t.insecure, "insecure", false, "run without TLS or a gossip key even on addresses other hosts reach (logged as a warning at every start)")
	}
}

// fromFile takes the config file's TLS files for the flags not given on
// the command line.
func (t *tlsFlags) fromFile(fs *pflag.FlagSet, ca, cert, key string) {
	for _, f := range []struct {
		flag, v string
		dst     *string
	}{{"tls-ca", ca, &t.files.CA}, {"tls-cert", cert, &t.files.Cert}, {"tls-key", key, &t.files.Key}} {
		if f.v != "" && !fs.Changed(f.flag) {
			*f.dst = f.v
		}
	}
}

// configurator loads the TLS files; nil, nil when none is given.
func (t *tlsFlags) configurator() (*pki.Configurator, error) {
	if !t.files.Enabled() {
		return nil, nil
	}
	if err := t.files.Validate(); err != nil {
		return nil, usageError{err}
	}
	return pki.NewConfigurator(t.files)
}

// credentials are the gRPC credentials of a client of the grantors: an
// operator's or sidecar's certificate with TLS, plain text without.
func (t *tlsFlags) credentials() (credentials.TransportCredentials, error) {
	c, err := t.configurator()
	if err != nil || c == nil {
		return insecure.NewCredentials(), err
	}
	return c.ClientCredentials(), nil
}

// exposed is an address a command listens on, advertises or dials, named
// by its flag; gossip says it carries gossip rather than gRPC or raft.
type exposed struct {
	flag   string
	addr   string
	gossip bool
}

// checkExposure refuses (a usage error, exit 2) to run in clear text on
// an address that is not loopback: gRPC and raft need TLS, gossip needs
// a key, unless --insecure. The message names the address and the flags.
func checkExposure(t *tlsFlags, gossipKey bool, addrs ...exposed) error {
	if t.insecure {
		return nil
	}
	for _, a := range addrs {
		if a.addr == "" || isLoopback(a.addr) {
			continue
		}
		switch {
		case a.gossip && !gossipKey:
			return usagef("%s %s is not a loopback address and gossip is not encrypted: give --gossip-key-file "+
				"(leaseside tls gossip-key makes a key), or --insecure to gossip in clear text anyway", a.flag, a.addr)
		case !a.gossip && t.files.CA == "":
			return usagef("%s %s is not a loopback address and TLS is off: give --tls-ca, --tls-cert and --tls-key "+
				"(leaseside tls ca create, leaseside tls cert create), or --insecure to run in clear text anyway", a.flag, a.addr)
		}
	}
	return nil
}

// warnInsecure logs, at every start, that --insecure is on.
func warnInsecure(t *tlsFlags, log *slog.Logger) {
	if t.insecure {
		log.Warn("running with --insecure: links to other hosts may be in clear text and unauthenticated; anyone who reaches a port can take leases and join the cluster (SECURITY.md)")
	}
}

// isLoopback reports whether addr (host:port, a bare host, or unix:PATH)
// stays on this host. An empty or unspecified host (all interfaces) and a
// name other than localhost do not.
func isLoopback(addr string) bool {
	if strings.HasPrefix(addr, "unix:") {
		return true
	}
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// reloader re-reads the TLS files and the gossip key file on SIGHUP (and
// `systemctl reload`). What fails to load is logged and the old material
// kept; connections already up are not touched, so no lease is dropped.
type reloader struct {
	tls     *pki.Configurator // nil without TLS
	keyFile string            // "" without a gossip key
	setKeys func([][]byte) error
	audit   *logFile // reopened (after logrotate moved it); nil without --audit-log
	// nameRules is the name rules file ("" without --name-rules), read
	// again and handed to setNameRules.
	nameRules    string
	setNameRules func(*grantor.NameRules)
	log          *slog.Logger
}

// run reloads on every SIGHUP until ctx ends. It starts catching SIGHUP
// before it returns.
func (r reloader) run(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-hup:
				r.reload()
			case <-ctx.Done():
				return
			}
		}
	}()
}

func (r reloader) reload() {
	ok := true
	if r.tls != nil {
		if err := r.tls.Reload(); err != nil {
			ok = false
			r.log.Error("reload: TLS files not reloaded; keeping the ones loaded before", "err", err)
		} else {
			r.log.Info("reload: TLS files reloaded", "identity", r.tls.Identity().String())
			r.tls.LogExpiries(r.log, time.Now())
		}
	}
	if r.keyFile != "" && r.setKeys != nil {
		keys, err := gossip.LoadKeyFile(r.keyFile)
		if err == nil {
			err = r.setKeys(keys)
		}
		if err != nil {
			ok = false
			r.log.Error("reload: gossip keys not reloaded; keeping the ones loaded before", "file", r.keyFile, "err", err)
		} else {
			r.log.Info("reload: gossip keys reloaded", "file", r.keyFile, "keys", len(keys))
		}
	}
	if r.nameRules != "" {
		rules, err := grantor.LoadNameRules(r.nameRules)
		if err != nil {
			ok = false
			r.log.Error("reload: name rules not reloaded; keeping the ones in force", "file", r.nameRules, "err", err)
		} else {
			r.setNameRules(rules)
		}
	}
	if r.audit != nil {
		if err := r.audit.Reopen(); err != nil {
			ok = false
			r.log.Error("reload: audit log not reopened; writing to the file open before", "err", err)
		}
	}
	if ok {
		r.log.Info("reload done")
	}
}

// logFile is a log file, appended to, that Reopen opens again by its
// name: a log rotated away is followed by a new file on SIGHUP.
type logFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

// openLogFile opens the log file at path, refusing a directory another
// user controls (safefs.CheckDir: they could swap it, or a link above it,
// for one where root's file of that name is), a symbolic link, a file of
// another user's or one with other names (safefs.OpenFile): the grantor,
// often root, would otherwise append to whatever file another user
// pointed it at.
func openLogFile(path string) (*logFile, error) {
	f, err := openLog(path)
	if err != nil {
		return nil, err
	}
	return &logFile{path: path, f: f}, nil
}

// openLog opens path for openLogFile and Reopen.
func openLog(path string) (*os.File, error) {
	if err := safefs.CheckDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	return safefs.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
}

// Write implements io.Writer.
func (l *logFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Write(p)
}

// Reopen opens the file by its name again; on an error the old one stays.
func (l *logFile) Reopen() error {
	f, err := openLog(l.path)
	if err != nil {
		return err
	}
	l.mu.Lock()
	old := l.f
	l.f = f
	l.mu.Unlock()
	return old.Close()
}

// Close closes the file.
func (l *logFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

// logTLS logs the identity TLS runs under and the certificates close to
// expiry; a sidecar calls it at every start (a grantor's New does).
func logTLS(c *pki.Configurator, log *slog.Logger) {
	if c == nil {
		return
	}
	log.Info("TLS on", "identity", c.Identity().String(), "ca", c.Files().CA)
	c.LogExpiries(log, time.Now())
}
