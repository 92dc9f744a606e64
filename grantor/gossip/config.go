package gossip

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// Defaults used where a Config leaves a field zero.
const (
	// DefaultPort is the gossip port (UDP and TCP) when BindAddr is empty.
	DefaultPort = 7946
	// DefaultBroadcastTimeout bounds how long SetMeta waits for its update
	// to be gossiped.
	DefaultBroadcastTimeout = 5 * time.Second
	// DefaultForgetAfter is how long Members keeps listing a member that
	// left or died.
	DefaultForgetAfter = 24 * time.Hour
)

// Config configures a Member. The zero value plus a Meta is usable: it
// binds 0.0.0.0:DefaultPort, starts a new cluster and uses LAN timings.
type Config struct {
	// Name is the member's name, unique in the cluster. Default: Meta.NodeID
	// when set, else the hostname and a random suffix.
	Name string
	// BindAddr is the ip:port to gossip on (UDP and TCP). Port 0 picks a
	// free port, which is then also the advertised one. On 0.0.0.0
	// memberlist advertises the host's first private address.
	// Default: 0.0.0.0:DefaultPort.
	BindAddr string
	// Join lists seed addresses (host:port) of members already in the
	// cluster; Start fails when none can be joined. Empty starts a new
	// cluster.
	Join []string
	// Keys is the gossip keyring (see LoadKeyFile): each key 16, 24 or 32
	// bytes (AES-128, -192 or -256). The first encrypts what this member
	// sends; every one of them decrypts what it receives, so a key can be
	// rotated without a split (add it everywhere, make it first everywhere,
	// remove the old one: Member.SetKeys). Empty gossips in clear text.
	Keys [][]byte
	// Meta is what this member gossips about itself; see SetMeta.
	Meta Meta
	// Logger receives memberlist's logs; nil discards them.
	Logger *slog.Logger
	// Timing tunes failure detection and gossip; zero fields take
	// LANTiming's value.
	Timing Timing
	// BroadcastTimeout bounds how long SetMeta waits for its update to be
	// gossiped. Default: DefaultBroadcastTimeout.
	BroadcastTimeout time.Duration
	// ForgetAfter is how long Members keeps listing a member after it left
	// or died. Default: DefaultForgetAfter.
	ForgetAfter time.Duration
	// MaxStreamBytes bounds what one inbound gossip stream (a join or
	// state sync) may send, read before it can be decrypted. Default:
	// DefaultMaxStreamBytes.
	MaxStreamBytes int64
	// Prove, when set, serves every inbound stream on the gossip port
	// whose first byte opens a TLS handshake (TLSHandshakeByte), which a
	// memberlist stream never starts with: a grantor proves there, with
	// its certificate, that it is the process at its gossip address
	// (grantor/seed_proof.go). Prove owns the connection and closes it;
	// it is called on a goroutine of its own, for streams the bounds of
	// transport.go admitted. Nil hands such a stream to memberlist, which
	// refuses it.
	Prove func(net.Conn)
}

// TLSHandshakeByte is the first byte of a TLS connection (a handshake
// record). memberlist's streams start with a message type below it, or
// with its label header (244).
const TLSHandshakeByte = 0x16

// Timing holds memberlist's failure-detection and gossip knobs; see
// memberlist.Config for each. A zero field takes LANTiming's value.
type Timing struct {
	// ProbeInterval is how often a member probes a random other one.
	ProbeInterval time.Duration
	// ProbeTimeout is how long a probe waits for its ack; shorter than
	// ProbeInterval.
	ProbeTimeout time.Duration
	// SuspicionMult scales how long a suspect member has to refute before
	// it is declared dead (SuspicionMult * log10(members) * ProbeInterval).
	SuspicionMult int
	// GossipInterval is how often queued updates are gossiped.
	GossipInterval time.Duration
	// PushPullInterval is how often a member syncs its full state with a
	// random other one.
	PushPullInterval time.Duration
	// TCPTimeout bounds a join or a state sync with one member.
	TCPTimeout time.Duration
	// GossipToTheDeadTime is how long a dead member is still gossiped to,
	// so it can refute.
	GossipToTheDeadTime time.Duration
	// DeadNodeReclaimTime is how long after a member died its name may be
	// taken by a member at another address (a restart on a new port).
	DeadNodeReclaimTime time.Duration
}

// LANTiming is memberlist.DefaultLANConfig's timing, with dead names
// reclaimable after 30s: the production default.
func LANTiming() Timing {
	c := memberlist.DefaultLANConfig()
	return Timing{
		ProbeInterval:       c.ProbeInterval,
		ProbeTimeout:        c.ProbeTimeout,
		SuspicionMult:       c.SuspicionMult,
		GossipInterval:      c.GossipInterval,
		PushPullInterval:    c.PushPullInterval,
		TCPTimeout:          c.TCPTimeout,
		GossipToTheDeadTime: c.GossipToTheDeadTime,
		DeadNodeReclaimTime: 30 * time.Second,
	}
}

// LoopbackTiming is a fast profile for members on one host (tests, demos):
// a stopped member is declared dead within about a second or two.
func LoopbackTiming() Timing {
	return Timing{
		ProbeInterval:       200 * time.Millisecond,
		ProbeTimeout:        100 * time.Millisecond,
		SuspicionMult:       4,
		GossipInterval:      50 * time.Millisecond,
		PushPullInterval:    2 * time.Second,
		TCPTimeout:          5 * time.Second,
		GossipToTheDeadTime: 5 * time.Second,
		DeadNodeReclaimTime: 2 * time.Second,
	}
}

func (t Timing) withDefaults() Timing {
	d := LANTiming()
	set := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	set(&t.ProbeInterval, d.ProbeInterval)
	set(&t.ProbeTimeout, d.ProbeTimeout)
	set(&t.GossipInterval, d.GossipInterval)
	set(&t.PushPullInterval, d.PushPullInterval)
	set(&t.TCPTimeout, d.TCPTimeout)
	set(&t.GossipToTheDeadTime, d.GossipToTheDeadTime)
	set(&t.DeadNodeReclaimTime, d.DeadNodeReclaimTime)
	if t.SuspicionMult == 0 {
		t.SuspicionMult = d.SuspicionMult
	}
	return t
}

func (t Timing) validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"ProbeInterval", t.ProbeInterval}, {"ProbeTimeout", t.ProbeTimeout},
		{"GossipInterval", t.GossipInterval}, {"PushPullInterval", t.PushPullInterval},
		{"TCPTimeout", t.TCPTimeout}, {"GossipToTheDeadTime", t.GossipToTheDeadTime},
		{"DeadNodeReclaimTime", t.DeadNodeReclaimTime},
	} {
		if d.v < 0 {
			return fmt.Errorf("gossip: Timing.%s %v is negative", d.name, d.v)
		}
	}
	if t.ProbeTimeout >= t.ProbeInterval {
		return fmt.Errorf("gossip: Timing.ProbeTimeout %v must be shorter than ProbeInterval %v", t.ProbeTimeout, t.ProbeInterval)
	}
	if t.SuspicionMult < 1 {
		return fmt.Errorf("gossip: Timing.SuspicionMult %d must be at least 1", t.SuspicionMult)
	}
	return nil
}

// withDefaults fills in the zero fields. The default Name is random, so
// call it once per Member.
func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = c.Meta.NodeID
	}
	if c.Name == "" {
		host, _ := os.Hostname()
		if host == "" {
			host = "leaseside"
		}
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.Name = host + "-" + hex.EncodeToString(b[:])
	}
	if c.BindAddr == "" {
		c.BindAddr = net.JoinHostPort("0.0.0.0", strconv.Itoa(DefaultPort))
	}
	if c.BroadcastTimeout == 0 {
		c.BroadcastTimeout = DefaultBroadcastTimeout
	}
	if c.ForgetAfter == 0 {
		c.ForgetAfter = DefaultForgetAfter
	}
	if c.MaxStreamBytes == 0 {
		c.MaxStreamBytes = DefaultMaxStreamBytes
	}
	c.Timing = c.Timing.withDefaults()
	return c
}

// Validate reports whether c (with defaults filled in) can start a Member.
func (c Config) Validate() error {
	return c.withDefaults().validate()
}

func (c Config) validate() error {
	if _, _, err := splitBindAddr(c.BindAddr); err != nil {
		return err
	}
	if err := checkKeys(c.Keys); err != nil {
		return err
	}
	for _, s := range c.Join {
		if s == "" {
			return errors.New("gossip: an empty address in Join")
		}
	}
	if c.BroadcastTimeout < 0 || c.ForgetAfter < 0 || c.MaxStreamBytes < 0 {
		return errors.New("gossip: BroadcastTimeout, ForgetAfter and MaxStreamBytes must not be negative")
	}
	if err := c.Timing.validate(); err != nil {
		return err
	}
	return c.Meta.Validate()
}

// splitBindAddr parses an ip:port bind address.
func splitBindAddr(addr string) (ip string, port int, err error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("gossip: BindAddr %q: %w", addr, err)
	}
	if net.ParseIP(host) == nil {
		return "", 0, fmt.Errorf("gossip: BindAddr %q: the host must be an IP address", addr)
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("gossip: BindAddr %q: bad port", addr)
	}
	return host, port, nil
}

func checkKey(key []byte) error {
	switch len(key) {
	case 16, 24, 32:
		return nil
	}
	return fmt.Errorf("gossip: a gossip key is %d bytes; it must be 16, 24 or 32 (AES-128, -192 or -256): %w",
		len(key), ErrGossipKey)
}

func checkKeys(keys [][]byte) error {
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return err
		}
	}
	return nil
}

// NewKey returns a new random 32-byte gossip key, base64-encoded as a
// line of a key file.
func NewKey() (string, error) {
	var k [32]byte
	if _, err := rand.Read(k[:]); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(k[:]), nil
}

// LoadKeyFile reads a gossip keyring from path: one key per line, each
// the key's standard base64 encoding (as Consul's encrypt key), the first
// the one that encrypts. Blank lines, surrounding white space and lines
// starting with # are ignored; a key given twice counts once. Generate a
// key with `leaseside tls gossip-key` (or head -c 32 /dev/urandom | base64).
func LoadKeyFile(path string) ([][]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gossip: reading the gossip key file: %w", err)
	}
	var keys [][]byte
	for i, line := range bytes.Split(raw, []byte("\n")) {
		text := bytes.TrimSpace(line)
		if len(text) == 0 || text[0] == '#' {
			continue
		}
		key := make([]byte, base64.StdEncoding.DecodedLen(len(text)))
		n, err := base64.StdEncoding.Decode(key, text)
		if err != nil {
			return nil, fmt.Errorf("gossip: gossip key file %s, line %d: not standard base64 (%v): %w", path, i+1, err, ErrGossipKey)
		}
		key = key[:n]
		if err := checkKey(key); err != nil {
			return nil, fmt.Errorf("gossip key file %s, line %d: %w", path, i+1, err)
		}
		if !slices.ContainsFunc(keys, func(k []byte) bool { return bytes.Equal(k, key) }) {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("gossip: gossip key file %s holds no key: %w", path, ErrGossipKey)
	}
	return keys, nil
}
