package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/user"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/leaseside/leaseside/daemon"
	"github.com/leaseside/leaseside/grantor/pki"
	"github.com/leaseside/leaseside/ipc"
)

// sidecarFlags are the flags of the subcommands that run a sidecar (dev
// and daemon), and the config file they may read.
type sidecarFlags struct {
	socket      string
	socketGroup string
	configFile  string
	metricsAddr string
	logFlags
	// fileTLS are the config file's tls_ca, tls_cert and tls_key, and
	// fileGossip its join, gossip_addr and gossip_key_file: the daemon's
	// flags win over them; dev has no use for them.
	fileTLS    pki.Files
	fileGossip fileGossip
	// fileStateDir is the config file's state_dir (the daemon's
	// --state-dir).
	fileStateDir string
}

// fileGossip is the gossip part of the sidecar's config file.
type fileGossip struct {
	Join         []string
	Addr         string
	KeyFile      string
	GrantorNames []string
}

func (s *sidecarFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&s.socket, "socket", "", "socket to listen on (default $"+ipc.SocketEnv+", else "+ipc.SystemSocketPath+
		" as root, else $XDG_RUNTIME_DIR/leaseside/leaseside.sock or /tmp/leaseside-UID/leaseside.sock)")
	fs.StringVar(&s.socketGroup, "socket-group", "", "group (name or gid) that may use the socket (mode 0660, directory 0750)")
	fs.StringVar(&s.configFile, "config", "", "JSON config file with the keys "+jsonKeys(fileConfig{})+
		" (documented in packaging/README.md, installed as "+configDocPath+"); flags win over it")
	fs.StringVar(&s.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (off when empty)")
	s.logFlags.register(fs)
}

// configDocPath is where the packages install packaging/README.md, which
// documents the config files' keys.
const configDocPath = "/usr/share/doc/leaseside/packaging.md"

// jsonKeys lists the JSON keys of a config file struct, for the help.
func jsonKeys(v any) string {
	t := reflect.TypeOf(v)
	var keys []string
	for i := range t.NumField() {
		if k, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); k != "" && k != "-" {
			keys = append(keys, k)
		}
	}
	return strings.Join(keys, ", ")
}

// fileConfig is the sidecar's config file. Durations are strings Go's
// time.ParseDuration reads ("15s"). Unknown keys are errors.
type fileConfig struct {
	Socket      string     `json:"socket"`
	SocketGroup string     `json:"socket_group"`
	Grantors    []string   `json:"grantors"`
	MinTTL      string     `json:"min_ttl"`
	MaxTTL      string     `json:"max_ttl"`
	Rho         *float64   `json:"rho"`
	Epsilon     string     `json:"epsilon"`
	ACL         daemon.ACL `json:"acl"`
	// OwnerStoppedLimit: an owner process stopped longer than this is
	// treated as ended ("0s" turns the check off).
	OwnerStoppedLimit string `json:"owner_stopped_limit"`
	// LeaderConfirmTimeout: how long a request may wait at a grantor
	// before it must confirm that it leads ("0s": never asked).
	LeaderConfirmTimeout string `json:"leader_confirm_timeout"`
	TLSCA                string `json:"tls_ca"`
	TLSCert              string `json:"tls_cert"`
	TLSKey               string `json:"tls_key"`
	// Join, GossipAddr and GossipKeyFile are the daemon's --join,
	// --gossip-addr and --gossip-key-file.
	Join          []string `json:"join"`
	GossipAddr    string   `json:"gossip_addr"`
	GossipKeyFile string   `json:"gossip_key_file"`
	// GrantorNames is the daemon's --grantor-names.
	GrantorNames []string `json:"grantor_names"`
	// LogFormat is --log-format's key.
	LogFormat string `json:"log_format"`
	// MetricsAddr is --metrics-addr's key.
	MetricsAddr string `json:"metrics_addr"`
	// Per-uid limits (0 or absent: the default) and the socket's
	// per-connection bounds.
	MaxConnectionsPerUID int    `json:"max_connections_per_uid"`
	MaxRequestsPerUID    int    `json:"max_requests_per_uid"`
	MaxLeasesPerUID      int    `json:"max_leases_per_uid"`
	SocketQueueBytes     int    `json:"socket_queue_bytes"`
	SocketQueueBytesUID  int    `json:"socket_queue_bytes_per_uid"`
	SocketStallTimeout   string `json:"socket_stall_timeout"`
	// StateDir is the daemon's --state-dir.
	StateDir string `json:"state_dir"`
}

// config returns the daemon config from the defaults, the config file and
// the flags, in that order of precedence (flags win).
func (s *sidecarFlags) config() (daemon.Config, error) {
	cfg := daemon.DefaultConfig()
	cfg.Version = Version
	if s.configFile != "" {
		b, err := os.ReadFile(s.configFile)
		if err != nil {
			return cfg, err
		}
		var fc fileConfig
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&fc); err != nil {
			return cfg, fmt.Errorf("config %s: %w", s.configFile, err)
		}
		if fc.Socket != "" && s.socket == "" {
			s.socket = fc.Socket
		}
		if fc.SocketGroup != "" && s.socketGroup == "" {
			s.socketGroup = fc.SocketGroup
		}
		if fc.LogFormat != "" && s.format == "" {
			s.format = fc.LogFormat
		}
		if fc.MetricsAddr != "" && s.metricsAddr == "" {
			s.metricsAddr = fc.MetricsAddr
		}
		cfg.Grantors = fc.Grantors
		cfg.ACL = fc.ACL
		s.fileTLS = pki.Files{CA: fc.TLSCA, Cert: fc.TLSCert, Key: fc.TLSKey}
		s.fileGossip = fileGossip{Join: fc.Join, Addr: fc.GossipAddr, KeyFile: fc.GossipKeyFile, GrantorNames: fc.GrantorNames}
		s.fileStateDir = fc.StateDir
		cfg.Limits.ConnsPerUID, cfg.Limits.InFlightPerUID, cfg.Limits.QueueBytes = fc.MaxConnectionsPerUID, fc.MaxRequestsPerUID, fc.SocketQueueBytes
		cfg.Limits.QueueBytesPerUID = fc.SocketQueueBytesUID
		if fc.MaxLeasesPerUID != 0 {
			cfg.MaxLeasesPerUID = fc.MaxLeasesPerUID
		}
		for _, d := range []struct {
			text string
			dst  *time.Duration
			name string
		}{{fc.MinTTL, &cfg.MinTTL, "min_ttl"}, {fc.MaxTTL, &cfg.MaxTTL, "max_ttl"}, {fc.Epsilon, &cfg.Timing.Epsilon, "epsilon"},
			{fc.OwnerStoppedLimit, &cfg.OwnerStoppedLimit, "owner_stopped_limit"},
			{fc.LeaderConfirmTimeout, &cfg.LeaderConfirmTimeout, "leader_confirm_timeout"},
			{fc.SocketStallTimeout, &cfg.Limits.StallTimeout, "socket_stall_timeout"}} {
			if d.text == "" {
				continue
			}
			v, err := time.ParseDuration(d.text)
			if err != nil {
				return cfg, fmt.Errorf("config %s: %s: %w", s.configFile, d.name, err)
			}
			*d.dst = v
		}
		if fc.Rho != nil {
			cfg.Timing.Rho = *fc.Rho
		}
	}
	if s.socket == "" {
		s.socket = ipc.DefaultSocketPath()
	}
	return cfg, nil
}

// listen returns the socket systemd passed (socket activation), or else
// opens the socket and hands it to the configured group. An activated
// socket is used as systemd set it up: --socket and --socket-group (and
// their config keys) then do not apply, and s.socket becomes its path.
func (s *sidecarFlags) listen() (*net.UnixListener, error) {
	ln, activated, err := activatedListener()
	if err != nil {
		return nil, err
	}
	if activated {
		s.socket = ln.Addr().String()
		return ln, nil
	}
	gid := -1
	if s.socketGroup != "" {
		if gid, err = lookupGroup(s.socketGroup); err != nil {
			return nil, err
		}
	}
	return ipc.ListenGroup(s.socket, gid)
}

func lookupGroup(g string) (int, error) {
	if gid, err := strconv.Atoi(g); err == nil {
		return gid, nil
	}
	grp, err := user.LookupGroup(g)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(grp.Gid)
}
