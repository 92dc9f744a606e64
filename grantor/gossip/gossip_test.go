package gossip

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := findLeaks(30 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// findLeaks is goleak.VerifyTestMain with a longer patience. memberlist's
// Shutdown returns before all of its goroutines have: a probe in flight
// waits out its ack timer (ProbeInterval, stretched up to 8 times on a
// loaded machine) and a stream handler its TCPTimeout, and memberlist
// gives no way to wait for them. goleak.Find retries for well under a
// second, so ask again until a goroutine has outlived every such timer.
func findLeaks(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		err := goleak.Find()
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

// waitLimit bounds every wait on a cluster event: generous, for a loaded
// two-core machine under -race.
const waitLimit = 60 * time.Second

func start(t *testing.T, cfg Config) *Member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	m, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start(%s): %v", cfg.Name, err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

// waitFor waits, on m's change events, until cond holds.
func waitFor(t *testing.T, m *Member, what string, cond func() bool) {
	t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	for {
		ch := m.Changes()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("%s: timed out waiting for %s; it sees %+v", m.Name(), what, m.Members())
		}
	}
}

func stateOf(m *Member, name string) string {
	for _, in := range m.Members() {
		if in.Name == name {
			return in.State
		}
	}
	return ""
}

func aliveCount(m *Member) int {
	n := 0
	for _, in := range m.Members() {
		if in.State == StateAlive {
			n++
		}
	}
	return n
}

// testCluster is three grantors (g1 leads; g2 and g3 say so) and a sidecar
// that joined through g2.
type testCluster struct {
	g    [3]*Member
	side *Member
}

func (c *testCluster) all() []*Member { return append(c.g[:], c.side) }

func newCluster(t *testing.T, key []byte) *testCluster {
	t.Helper()
	var c testCluster
	c.g[0] = start(t, testConfig("g1", grantorMeta(1, "g1"), key))
	c.g[1] = start(t, testConfig("g2", grantorMeta(2, "g1"), key, c.g[0].Addr()))
	c.g[2] = start(t, testConfig("g3", grantorMeta(3, "g1"), key, c.g[0].Addr()))
	c.side = start(t, testConfig("side", sidecarMeta(), key, c.g[1].Addr()))
	for _, m := range c.all() {
		waitFor(t, m, "4 alive members", func() bool { return aliveCount(m) == 4 })
	}
	return &c
}

func allRPC() []string { return []string{"127.0.0.1:17001", "127.0.0.1:17002", "127.0.0.1:17003"} }

func TestDiscovery(t *testing.T) {
	c := newCluster(t, keyA)
	for _, m := range c.all() {
		t.Run(m.Name(), func(t *testing.T) {
			// A busy machine can make memberlist call a member dead for
			// a moment (it comes back alive with a change): wait for the
			// view, rather than read it once.
			waitFor(t, m, "g1 as leader and every grantor's address", func() bool {
				addrs, l := m.Grantors()
				return l == "127.0.0.1:17001" && slices.Equal(addrs, allRPC())
			})
			ms := m.Members()
			var names, roles []string
			for _, in := range ms {
				names = append(names, in.Name)
				roles = append(roles, in.Meta.Role)
				if in.MetaErr != nil || in.Addr == "" {
					t.Errorf("member %+v: want decoded meta and an address", in)
				}
			}
			if want := []string{"g1", "g2", "g3", "side"}; !slices.Equal(names, want) {
				t.Errorf("names %v, want %v", names, want)
			}
			if want := []string{RoleGrantor, RoleGrantor, RoleGrantor, RoleSidecar}; !slices.Equal(roles, want) {
				t.Errorf("roles %v, want %v", roles, want)
			}
			got := ms[1].Meta
			got.Instance = 0 // drawn by Start
			if got != grantorMeta(2, "g1") || ms[1].Meta.Instance == 0 {
				t.Errorf("g2's meta as seen: %+v", ms[1].Meta)
			}
		})
	}
}

func TestLeaderChangePropagates(t *testing.T) {
	c := newCluster(t, nil)
	changed := c.side.Changes()
	// raft elected g2: g1 first forgets its leadership, then g2 and g3
	// learn the new leader.
	steps := []struct {
		m        *Member
		i        int
		leaderID string
	}{
		{c.g[0], 1, ""},
		{c.g[1], 2, "g2"},
		{c.g[2], 3, "g2"},
		{c.g[0], 1, "g2"},
	}
	for _, s := range steps {
		if err := s.m.SetMeta(grantorMeta(s.i, s.leaderID)); err != nil {
			t.Fatalf("SetMeta(g%d): %v", s.i, err)
		}
	}
	select {
	case <-changed:
	case <-time.After(waitLimit):
		t.Fatal("the sidecar's Changes() did not fire")
	}
	for _, m := range c.all() {
		waitFor(t, m, "g2 as leader, g1 claiming it", func() bool {
			_, l := m.Grantors()
			for _, in := range m.Members() {
				if in.Name == "g1" && in.Meta.LeaderID != "g2" {
					return false
				}
			}
			return l == "127.0.0.1:17002"
		})
	}
}

func TestGoneGrantorsAreDropped(t *testing.T) {
	tests := []struct {
		name      string
		stop      func(*Member) error
		wantState string
	}{
		{"leave", func(m *Member) error { return m.Leave(30 * time.Second) }, StateLeft},
		{"shutdown", func(m *Member) error { return m.Shutdown() }, StateDead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, keyA)
			if err := tt.stop(c.g[2]); err != nil {
				t.Fatal(err)
			}
			want := allRPC()[:2]
			for _, m := range []*Member{c.g[0], c.g[1], c.side} {
				waitFor(t, m, "g3 "+tt.wantState, func() bool { return stateOf(m, "g3") == tt.wantState })
				if addrs, leader := m.Grantors(); !slices.Equal(addrs, want) || leader != "127.0.0.1:17001" {
					t.Errorf("%s: Grantors() = %v, %q; want %v, g1's", m.Name(), addrs, leader, want)
				}
			}
		})
	}
}

func TestGossipKey(t *testing.T) {
	tests := []struct {
		name       string
		clusterKey []byte
		joinerKey  []byte
		wantErr    string // "" = the join succeeds
	}{
		{name: "same key", clusterKey: keyA, joinerKey: keyA},
		{name: "no keys", clusterKey: nil, joinerKey: nil},
		{name: "wrong key", clusterKey: keyA, joinerKey: keyB, wantErr: "gossip key does not match"},
		{name: "joiner has no key", clusterKey: keyA, joinerKey: nil, wantErr: "this member has none"},
		{name: "seed has no key", clusterKey: nil, joinerKey: keyA, wantErr: "the seed uses none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seed := start(t, testConfig("seed", grantorMeta(1, "g1"), tt.clusterKey))
			m, err := Start(context.Background(), testConfig("joiner", sidecarMeta(), tt.joinerKey, seed.Addr()))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Start: %v", err)
				}
				defer m.Shutdown()
				waitFor(t, seed, "the joiner", func() bool { return stateOf(seed, "joiner") == StateAlive })
				return
			}
			if err == nil {
				_ = m.Shutdown()
				t.Fatal("Start joined; want a gossip key error")
			}
			if !errors.Is(err, ErrGossipKey) || !errors.Is(err, ErrNoSeed) {
				t.Errorf("error %v: want it to wrap ErrGossipKey and ErrNoSeed", err)
			}
			var je *JoinError
			if !errors.As(err, &je) || !slices.Equal(je.Seeds, []string{seed.Addr()}) {
				t.Errorf("error %v: want a *JoinError for the seed", err)
			}
			for _, s := range []string{"gossip key is wrong or missing", tt.wantErr, seed.Addr()} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if got := seed.Members(); len(got) != 1 {
				t.Errorf("the seed lists %+v; want only itself", got)
			}
		})
	}
}

func TestJoinUnreachableSeed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	_, err = Start(context.Background(), testConfig("lonely", sidecarMeta(), nil, addr))
	if !errors.Is(err, ErrNoSeed) || errors.Is(err, ErrGossipKey) {
		t.Fatalf("Start: %v; want ErrNoSeed and not ErrGossipKey", err)
	}
	if !strings.Contains(err.Error(), addr) {
		t.Errorf("error %q does not name the seed", err)
	}
}

// A memberlist cluster that is not leaseside's (no label, as Consul's
// Serf pools or a bare memberlist) cannot be joined by mistake.
func TestForeignClusterRefused(t *testing.T) {
	mc := memberlist.DefaultLocalConfig()
	mc.Name, mc.BindAddr, mc.BindPort = "foreign", "127.0.0.1", 0
	mc.LogOutput = io.Discard
	foreign, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	defer foreign.Shutdown()
	seed := net.JoinHostPort("127.0.0.1", strconv.Itoa(mc.BindPort))
	_, err = Start(context.Background(), testConfig("stray", sidecarMeta(), nil, seed))
	if !errors.Is(err, ErrNoSeed) {
		t.Fatalf("Start joining a foreign cluster: %v; want ErrNoSeed", err)
	}
	if n := foreign.NumMembers(); n != 1 {
		t.Errorf("the foreign cluster has %d members", n)
	}
}

// A seed that accepts and never answers: cancelling ctx ends Start.
func TestJoinCancelled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		m, err := Start(ctx, testConfig("patient", sidecarMeta(), nil, ln.Addr().String()))
		if err == nil {
			_ = m.Shutdown()
		}
		done <- err
	}()
	var conn net.Conn
	select {
	case conn = <-accepted:
	case <-time.After(waitLimit):
		t.Fatal("the join never connected")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Start: %v; want context.Canceled", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Start did not return after cancel")
	}
	// Let memberlist's join attempt end now rather than at its timeout.
	conn.Close()
	ln.Close()
}

func TestWaitVoters(t *testing.T) {
	g1 := start(t, testConfig("g1", grantorMeta(1, ""), nil))
	learner := grantorMeta(9, "")
	learner.Voter = false
	start(t, testConfig("g9", learner, nil, g1.Addr()))
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()

	results := make(chan []MemberInfo, 1)
	errs := make(chan error, 1)
	go func() {
		vs, err := g1.WaitVoters(ctx, 3)
		results <- vs
		errs <- err
	}()
	start(t, testConfig("g2", grantorMeta(2, ""), nil, g1.Addr()))
	start(t, testConfig("g3", grantorMeta(3, ""), nil, g1.Addr()))
	vs := <-results
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	var raft []string
	for _, v := range vs {
		raft = append(raft, v.Meta.RaftAddr)
	}
	if want := []string{"127.0.0.1:18001", "127.0.0.1:18002", "127.0.0.1:18003"}; !slices.Equal(raft, want) {
		t.Errorf("voters' raft addresses %v, want %v", raft, want)
	}

	short, cancelShort := context.WithCancel(context.Background())
	cancelShort()
	if _, err := g1.WaitVoters(short, 5); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitVoters(cancelled) = %v", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := g1.WaitVoters(ctx, 5); !errors.Is(err, ErrShutdown) {
			t.Errorf("WaitVoters after Shutdown = %v, want ErrShutdown", err)
		}
	}()
	_ = g1.Shutdown()
	wg.Wait()
}

func TestLifecycle(t *testing.T) {
	m := start(t, testConfig("solo", grantorMeta(1, "g1"), nil))
	if !strings.HasPrefix(m.Addr(), "127.0.0.1:") || strings.HasSuffix(m.Addr(), ":0") {
		t.Errorf("Addr() = %q, want the bound loopback port", m.Addr())
	}
	big := grantorMeta(1, "g1")
	big.Version = strings.Repeat("v", 600)
	if err := m.SetMeta(big); !errors.Is(err, ErrMetaTooLarge) {
		t.Errorf("SetMeta(600-byte version) = %v, want ErrMetaTooLarge", err)
	}
	instance := m.Meta().Instance
	if instance == 0 {
		t.Error("Start drew no Instance")
	}
	if other := start(t, testConfig("other", grantorMeta(2, "g1"), nil)); other.Meta().Instance == instance {
		t.Errorf("two runs drew the same Instance %d", instance)
	}
	want := grantorMeta(1, "g1")
	want.Instance = instance
	if m.Meta() != want {
		t.Errorf("a refused SetMeta changed the meta to %+v", m.Meta())
	}
	if err := m.SetMeta(grantorMeta(1, "")); err != nil || m.Meta().Instance != instance {
		t.Fatalf("SetMeta: %v; Instance %d, want %d kept", err, m.Meta().Instance, instance)
	}
	if err := m.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	if err := m.Leave(time.Second); err != nil {
		t.Errorf("second Leave: %v", err)
	}
	if err := m.SetMeta(grantorMeta(1, "")); !errors.Is(err, ErrLeft) {
		t.Errorf("SetMeta after Leave = %v, want ErrLeft", err)
	}
	for i := range 2 {
		if err := m.Shutdown(); err != nil {
			t.Errorf("Shutdown #%d: %v", i+1, err)
		}
	}
	if err := m.Leave(time.Second); !errors.Is(err, ErrShutdown) {
		t.Errorf("Leave after Shutdown = %v, want ErrShutdown", err)
	}
	if _, err := m.Join(context.Background(), []string{m.Addr()}); !errors.Is(err, ErrShutdown) {
		t.Errorf("Join after Shutdown = %v, want ErrShutdown", err)
	}
	select {
	case <-m.Done():
	default:
		t.Error("Done() not closed after Shutdown")
	}
}

// A grantor that announces it is leaving is no longer taken for a grantor,
// and is listed as left, not dead, even when it then stops without Leave.
func TestAnnounceLeaving(t *testing.T) {
	c := newCluster(t, keyA)
	if err := c.g[2].AnnounceLeaving(0); err != nil {
		t.Fatal(err)
	}
	if err := c.g[2].AnnounceLeaving(0); err != nil {
		t.Errorf("second AnnounceLeaving: %v", err)
	}
	// It still gossips metadata changes while it leaves.
	if err := c.g[2].SetMeta(grantorMeta(3, "")); err != nil {
		t.Fatalf("SetMeta while leaving: %v", err)
	}
	want := allRPC()[:2]
	for _, m := range []*Member{c.g[0], c.g[1], c.side} {
		waitFor(t, m, "g3 leaving", func() bool { return stateOf(m, "g3") == StateLeaving })
		if addrs, _ := m.Grantors(); !slices.Equal(addrs, want) {
			t.Errorf("%s: Grantors() = %v, want %v", m.Name(), addrs, want)
		}
	}
	if err := c.g[2].Shutdown(); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Member{c.g[0], c.g[1], c.side} {
		waitFor(t, m, "g3 left", func() bool { return stateOf(m, "g3") == StateLeft })
	}
	if err := c.g[2].AnnounceLeaving(0); !errors.Is(err, ErrShutdown) {
		t.Errorf("AnnounceLeaving after Shutdown = %v, want ErrShutdown", err)
	}
}
