package gossip

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// clusterLabel prefixes every gossip packet and stream (and is
// authenticated data when encrypted), so that a leaseside member and some
// other memberlist or Serf cluster (Consul, Nomad) refuse each other even
// when pointed at each other's port. Changing it splits clusters.
const clusterLabel = "leaseside"

// Member is this process's membership in the gossip cluster. Its methods
// are safe for concurrent use.
type Member struct {
	cfg    Config
	log    *slog.Logger
	ml     *memberlist.Memberlist
	roster *roster
	addr   string
	// keyring is memberlist's, nil when gossip is not encrypted. Its
	// methods lock it.
	keyring *memberlist.Keyring
	logw    *logWriter // memberlist's log, which counts refused packets
	done    chan struct{}
	merges  *mergeWatch // memberlist's MergeDelegate (leaving.go)

	metaMu  sync.Mutex // guards meta and leaving; NodeMeta reads them
	meta    Meta
	leaving bool

	// opMu serialises SetMeta, Leave and Shutdown, so that memberlist is
	// never asked to update or leave after it has shut down (its Leave
	// panics then).
	opMu     sync.Mutex
	left     bool
	shutdown bool
}

// Start creates a member bound to cfg.BindAddr and, when cfg.Join is not
// empty, joins the cluster through those seeds. If none of them can be
// joined it shuts the member down and returns a *JoinError, which wraps
// ErrGossipKey when the reason is a gossip key that is wrong or missing on
// either side. ctx bounds the join only.
func Start(ctx context.Context, cfg Config) (*Member, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	host, port, _ := splitBindAddr(cfg.BindAddr) // validated above
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m := &Member{
		cfg:    cfg,
		log:    logger,
		roster: newRoster(cfg.ForgetAfter),
		done:   make(chan struct{}),
		meta:   cfg.Meta,
		merges: &mergeWatch{},
	}
	m.meta.Instance = 0
	for m.meta.Instance == 0 {
		m.meta.Instance = rand.Uint64()
	}

	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Name
	mc.BindAddr, mc.BindPort, mc.AdvertisePort = host, port, port
	if len(cfg.Keys) > 0 {
		kr, err := memberlist.NewKeyring(cloneKeys(cfg.Keys), slices.Clone(cfg.Keys[0]))
		if err != nil {
			return nil, fmt.Errorf("gossip: keyring: %w", err)
		}
		mc.Keyring = kr
		m.keyring = kr
	}
	mc.Label = clusterLabel
	t := cfg.Timing
	mc.ProbeInterval, mc.ProbeTimeout, mc.SuspicionMult = t.ProbeInterval, t.ProbeTimeout, t.SuspicionMult
	mc.GossipInterval, mc.PushPullInterval, mc.TCPTimeout = t.GossipInterval, t.PushPullInterval, t.TCPTimeout
	mc.GossipToTheDeadTime, mc.DeadNodeReclaimTime = t.GossipToTheDeadTime, t.DeadNodeReclaimTime
	mc.Delegate = delegate{m}
	mc.Events = events{m.roster}
	mc.Merge = m.merges
	m.logw = newLogWriter(logger.With("component", "memberlist"))
	mc.Logger = log.New(m.logw, "", 0)
	tr, err := newLimitedTransport(host, port, cfg.MaxStreamBytes, cfg.Prove, logger, mc.Logger)
	if err != nil {
		return nil, fmt.Errorf("gossip: starting memberlist on %s: could not set up network transport: %w", cfg.BindAddr, err)
	}
	mc.Transport = tr
	if port == 0 {
		mc.BindPort = tr.GetAutoBindPort()
		mc.AdvertisePort = mc.BindPort
	}

	ml, err := memberlist.Create(mc)
	if err != nil {
		_ = tr.Shutdown()
		return nil, fmt.Errorf("gossip: starting memberlist on %s: %w", cfg.BindAddr, err)
	}
	m.ml = ml
	// memberlist reported this member to the roster while creating it.
	for _, e := range m.roster.snapshot(time.Now()) {
		if e.info.Name == cfg.Name {
			m.addr = e.info.Addr
		}
	}
	if len(cfg.Join) > 0 {
		if _, err := m.Join(ctx, cfg.Join); err != nil {
			_ = m.Shutdown()
			return nil, err
		}
	}
	return m, nil
}

// Join joins the cluster through the seeds (host:port) and returns how many
// of them it reached. When it reaches none it returns a *JoinError (see
// Start). If ctx ends first, Join returns ctx's error; the attempt goes on
// in the background for at most Timing.TCPTimeout per seed and may still
// succeed.
func (m *Member) Join(ctx context.Context, seeds []string) (int, error) {
	if len(seeds) == 0 {
		return 0, &JoinError{Err: fmt.Errorf("no seeds given")}
	}
	select {
	case <-m.done:
		return 0, ErrShutdown
	default:
	}
	type result struct {
		n   int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		n, err := m.ml.Join(seeds)
		ch <- result{n, err}
	}()
	select {
	case r := <-ch:
		if r.n > 0 {
			return r.n, nil
		}
		if r.err == nil {
			r.err = fmt.Errorf("no address found")
		}
		return 0, &JoinError{Seeds: slices.Clone(seeds), KeyProblem: classifyKeyError(r.err.Error()), Err: r.err}
	case <-ctx.Done():
		return 0, fmt.Errorf("gossip: joining %s: %w", strings.Join(seeds, ", "), ctx.Err())
	}
}

// JoinError says why no seed could be joined. It wraps ErrNoSeed, the
// error memberlist returned, and ErrGossipKey when KeyProblem is set.
type JoinError struct {
	// Seeds are the addresses tried.
	Seeds []string
	// KeyProblem explains a gossip key mismatch, "" when there was none.
	KeyProblem string
	// Err is memberlist's error.
	Err error
}

// Error says which seeds were tried and, for a key mismatch, what to fix.
func (e *JoinError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gossip: could not join any of the seeds [%s]", strings.Join(e.Seeds, ", "))
	if e.KeyProblem != "" {
		fmt.Fprintf(&b, ": the gossip key is wrong or missing: %s (use the same key on every member)", e.KeyProblem)
	}
	fmt.Fprintf(&b, ": %s", flatten(e.Err))
	return b.String()
}

// Unwrap gives ErrNoSeed, ErrGossipKey when the key is the reason, and
// memberlist's error.
func (e *JoinError) Unwrap() []error {
	errs := []error{ErrNoSeed}
	if e.KeyProblem != "" {
		errs = append(errs, ErrGossipKey)
	}
	return append(errs, e.Err)
}

// flatten puts memberlist's multi-line multierror on one line.
func flatten(err error) string {
	if w, ok := err.(interface{ WrappedErrors() []error }); ok {
		var parts []string
		for _, e := range w.WrappedErrors() {
			parts = append(parts, e.Error())
		}
		return strings.Join(parts, "; ")
	}
	return err.Error()
}

// Refused counts the packets and streams from others that memberlist
// refused (discarded or failed to read): a wrong or missing key, another
// cluster's label, garbage. Each is also a log line, within limits.
func (m *Member) Refused() uint64 { return m.logw.refused.Load() }

// Addr returns the address (host:port) this member gossips on as the
// others see it: the one to give them as a seed.
func (m *Member) Addr() string { return m.addr }

// Name returns this member's gossip name.
func (m *Member) Name() string { return m.cfg.Name }

// Meta returns what this member currently gossips about itself.
func (m *Member) Meta() Meta {
	m.metaMu.Lock()
	defer m.metaMu.Unlock()
	return m.meta
}

// SetMeta replaces this member's metadata and gossips it. It returns once
// the update has been gossiped or Config.BroadcastTimeout has passed (the
// update then still spreads, by retransmits and push/pull syncs). It fails
// for a Meta that Validate refuses (the old one stays) and after Leave or
// Shutdown. The member's Instance stays whatever meta says.
func (m *Member) SetMeta(meta Meta) error {
	if err := meta.Validate(); err != nil {
		return err
	}
	m.opMu.Lock()
	defer m.opMu.Unlock()
	if err := m.usableLocked(); err != nil {
		return err
	}
	m.metaMu.Lock()
	meta.Instance = m.meta.Instance
	m.meta = meta
	m.metaMu.Unlock()
	m.pushMeta(m.cfg.BroadcastTimeout)
	return nil
}

// pushMeta re-advertises this member's metadata.
func (m *Member) pushMeta(timeout time.Duration) {
	if err := m.ml.UpdateNode(timeout); err != nil {
		m.log.Debug("gossip: metadata update not yet gossiped to every member", "err", err)
	}
}

func (m *Member) usableLocked() error {
	switch {
	case m.shutdown:
		return ErrShutdown
	case m.left:
		return ErrLeft
	}
	return nil
}

// Members lists every member this one knows, itself included, sorted by
// name. Members that left or died stay listed for Config.ForgetAfter.
func (m *Member) Members() []MemberInfo {
	es := m.roster.snapshot(time.Now())
	out := make([]MemberInfo, len(es))
	for i, e := range es {
		out[i] = e.info
	}
	return out
}

// Grantors returns the RPC addresses of the alive grantors, sorted, and the
// RPC address of the one their LeaderID claims point at ("" when they name
// none that is alive). A grantor that claims to lead wins over claims for
// others; more claims win over fewer, a more recent claim over an older
// one. It is a hint for where to dial: the grantor that answers decides.
func (m *Member) Grantors() (rpcAddrs []string, leaderRPC string) {
	return m.roster.grantors(time.Now())
}

// WaitVoters waits until at least n alive grantors that are voters (this
// member included, if it is one) see each other, and returns them sorted
// by NodeID: the peers for a bootstrap-expect style raft bootstrap. It
// returns ctx's error when ctx ends first and ErrShutdown on Shutdown.
func (m *Member) WaitVoters(ctx context.Context, n int) ([]MemberInfo, error) {
	for {
		changed := m.roster.changes()
		var vs []MemberInfo
		for _, e := range m.roster.snapshot(time.Now()) {
			if isAliveGrantor(e.info) && e.info.Meta.Voter {
				vs = append(vs, e.info)
			}
		}
		if len(vs) >= n {
			slices.SortFunc(vs, func(a, b MemberInfo) int { return strings.Compare(a.Meta.NodeID, b.Meta.NodeID) })
			return vs, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-m.done:
			return nil, ErrShutdown
		}
	}
}

// Changes returns a channel that is closed at the next change of
// membership or of any member's metadata after the call. It never blocks
// memberlist and coalesces bursts. To wait for a condition, take the
// channel first, then check, then wait:
//
//	for {
//		ch := m.Changes()
//		if cond(m.Members()) {
//			break
//		}
//		<-ch // and select on ctx.Done() and m.Done()
//	}
func (m *Member) Changes() <-chan struct{} { return m.roster.changes() }

// Done returns a channel that is closed when Shutdown is called.
func (m *Member) Done() <-chan struct{} { return m.done }

// Leave announces that this member is leaving, so the others list it as
// left rather than dead and stop taking it for a grantor at once, and
// waits up to timeout (0 means Config.BroadcastTimeout) for the notice to
// be gossiped. The member keeps answering gossip until Shutdown. Calling it
// again does nothing; after Shutdown it returns ErrShutdown.
func (m *Member) Leave(timeout time.Duration) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	if m.shutdown {
		return ErrShutdown
	}
	if m.left {
		return nil
	}
	m.left = true
	if timeout <= 0 {
		timeout = m.cfg.BroadcastTimeout
	}
	deadline := time.Now().Add(timeout)
	// First the leaving flag, so that members tell "left" from "dead":
	// memberlist's own leave notice does not say which to its delegates.
	m.announceLeavingLocked(timeout / 2)
	if err := m.ml.Leave(max(time.Until(deadline), time.Millisecond)); err != nil {
		return fmt.Errorf("gossip: leaving: %w (some members may list this one as dead rather than left)", err)
	}
	return nil
}

// AnnounceLeaving gossips that this member is about to leave, without
// leaving yet: the others list it as leaving and stop taking it for a
// grantor at once, and list it as left rather than dead once it goes,
// even if it is killed before Leave. It waits up to timeout (0 means
// Config.BroadcastTimeout) for the notice to be gossiped. A grantor calls
// it before it takes itself out of raft, so that no leader adds it back
// meanwhile. Calling it again, or Leave after it, does not announce twice;
// after Leave or Shutdown it returns ErrLeft or ErrShutdown.
func (m *Member) AnnounceLeaving(timeout time.Duration) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	if err := m.usableLocked(); err != nil {
		return err
	}
	if timeout <= 0 {
		timeout = m.cfg.BroadcastTimeout
	}
	m.announceLeavingLocked(timeout)
	return nil
}

// announceLeavingLocked sets the leaving flag, gossips it and confirms
// it with the grantors (confirmLeaving), once, within timeout.
func (m *Member) announceLeavingLocked(timeout time.Duration) {
	m.metaMu.Lock()
	was := m.leaving
	m.leaving = true
	m.metaMu.Unlock()
	if !was {
		deadline := time.Now().Add(timeout)
		m.pushMeta(timeout)
		if missed := m.confirmLeaving(deadline); len(missed) > 0 {
			m.log.Warn("gossip: these grantors did not confirm in time that they list this member as leaving; they may list it as dead once it goes",
				"grantors", missed, "timeout", timeout)
		}
	}
}

// SetKeys replaces the gossip keyring: keys[0] encrypts from now on,
// every key in keys decrypts, and keys not in it are dropped. A member
// that started without keys gossips in clear text and cannot start
// encrypting (restart it with keys); one that encrypts cannot stop.
// Rotating a key across a cluster takes three SetKeys on every member,
// each done everywhere before the next: add the new key (second), make
// it first, drop the old one.
func (m *Member) SetKeys(keys [][]byte) error {
	if err := checkKeys(keys); err != nil {
		return err
	}
	kr := m.keyring
	switch {
	case kr == nil && len(keys) == 0:
		return nil
	case kr == nil:
		return fmt.Errorf("gossip: this member started without a gossip key and gossips in clear text; restart it with the key file: %w", ErrGossipKey)
	case len(keys) == 0:
		return fmt.Errorf("gossip: the gossip key file holds no key; an encrypting member cannot stop encrypting: %w", ErrGossipKey)
	}
	for _, k := range keys {
		if err := kr.AddKey(slices.Clone(k)); err != nil {
			return fmt.Errorf("gossip: adding a key: %w", err)
		}
	}
	if err := kr.UseKey(keys[0]); err != nil {
		return fmt.Errorf("gossip: making the first key primary: %w", err)
	}
	// GetKeys returns the keyring's own slice, which RemoveKey rewrites.
	for _, old := range cloneKeys(kr.GetKeys()) {
		if !slices.ContainsFunc(keys, func(k []byte) bool { return bytes.Equal(k, old) }) {
			if err := kr.RemoveKey(old); err != nil {
				return fmt.Errorf("gossip: dropping a key: %w", err)
			}
		}
	}
	return nil
}

// Keys returns the keyring: the primary key first; nil without
// encryption.
func (m *Member) Keys() [][]byte {
	kr := m.keyring
	if kr == nil {
		return nil
	}
	primary := slices.Clone(kr.GetPrimaryKey())
	out := [][]byte{primary}
	for _, k := range cloneKeys(kr.GetKeys()) {
		if !bytes.Equal(k, primary) {
			out = append(out, k)
		}
	}
	return out
}

func cloneKeys(keys [][]byte) [][]byte {
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = slices.Clone(k)
	}
	return out
}

// Shutdown stops gossiping at once, without announcing it: the others see
// this member die. Call Leave first for a graceful exit. It waits for a
// SetMeta or Leave in progress; calling it again does nothing.
func (m *Member) Shutdown() error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	if m.shutdown {
		return nil
	}
	m.shutdown = true
	close(m.done)
	return m.ml.Shutdown()
}

// delegate gives memberlist this member's metadata and, with every state
// sync, the members it lists as left (leaving.go). memberlist's contract:
// thread-safe, never blocking. It carries no user messages.
type delegate struct{ m *Member }

var _ memberlist.Delegate = delegate{}

func (d delegate) NodeMeta(limit int) []byte {
	d.m.metaMu.Lock()
	defer d.m.metaMu.Unlock()
	b := encodeMeta(d.m.meta, d.m.leaving)
	if len(b) > limit {
		// Unreachable: Validate bounds the size with the leaving flag
		// set. memberlist would panic on it, so gossip none instead.
		d.m.log.Error("gossip: metadata over the limit, not gossiped", "size", len(b), "limit", limit)
		return nil
	}
	return b
}

func (delegate) NotifyMsg([]byte)                           {}
func (delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

func (d delegate) LocalState(join bool) []byte {
	return encodeLeft(d.m.roster.leftClaims(time.Now()))
}

func (d delegate) MergeRemoteState(buf []byte, join bool) {
	if len(buf) == 0 {
		return // a build that sends none, or none left
	}
	cs, err := decodeLeft(buf)
	if err != nil {
		d.m.log.Debug("gossip: ignoring the left claims of a state sync", "err", err)
		return
	}
	d.m.roster.learnLeft(cs)
}
