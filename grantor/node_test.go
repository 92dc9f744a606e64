package grantor

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// fastConfig is a single-node config with raft timings for loopback tests.
func fastConfig(t testing.TB, dir string) Config {
	cfg := DefaultConfig()
	cfg.NodeID = "n1"
	cfg.DataDir = dir
	cfg.Bootstrap = true
	cfg.HeartbeatTimeout = 50 * time.Millisecond
	cfg.ElectionTimeout = 50 * time.Millisecond
	cfg.LeaderLeaseTimeout = 50 * time.Millisecond
	cfg.CommitTimeout = 5 * time.Millisecond
	return cfg
}

// running is a Node being Run, with a client connected to it.
type running struct {
	*Node
	client grantorpb.GrantorClient
	stop   func()
	exited chan struct{} // closed when Run has returned
	runErr error         // Run's result, once exited is closed
	// runErrOK, when set, says which error of Run's stop does not fail
	// the test (one the test waits for and checks itself).
	runErrOK func(error) bool
}

// start runs a node from cfg; ready says whether to wait until it serves.
func start(t testing.TB, cfg Config, ready bool, beforeRun ...func(*Node)) *running {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range beforeRun {
		f(n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := grpc.NewClient(n.RPCAddr(), grpc.WithTransportCredentials(n.dialCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	r := &running{Node: n, client: grantorpb.NewGrantorClient(conn), exited: make(chan struct{})}
	go func() {
		r.runErr = n.Run(ctx)
		close(r.exited)
	}()
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		conn.Close()
		cancel()
		<-r.exited
		if r.runErr != nil && (r.runErrOK == nil || !r.runErrOK(r.runErr)) {
			t.Errorf("Run: %v", r.runErr)
		}
	}
	t.Cleanup(r.stop)
	if ready {
		wctx, wcancel := context.WithTimeout(context.Background(), waitTimeout)
		defer wcancel()
		if err := n.WaitReady(wctx); err != nil {
			t.Fatalf("WaitReady: %v", err)
		}
	}
	return r
}

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func acqReq(session string, seq uint64, lease string) *grantorpb.AcquireRequest {
	return &grantorpb.AcquireRequest{
		Id:    &grantorpb.RequestID{Session: session, Seq: seq},
		Lease: lease, Owner: "o", TtlNs: int64(10 * time.Second),
	}
}

func mustAcquire(t *testing.T, c grantorpb.GrantorClient, req *grantorpb.AcquireRequest) *grantorpb.AcquireResponse {
	t.Helper()
	resp, err := c.Acquire(tctx(t), req)
	if err != nil {
		t.Fatalf("Acquire %v: %v", req, err)
	}
	return resp
}

func TestNodeServesOverGRPC(t *testing.T) {
	n := start(t, fastConfig(t, t.TempDir()), true)
	c := n.client

	a := mustAcquire(t, c, acqReq("s1", 1, "jobs/render-42"))
	if !a.Granted || a.Token != 1 || a.GrantorTimeNs == 0 {
		t.Fatalf("first acquire: %v", a)
	}
	if retry := mustAcquire(t, c, acqReq("s1", 1, "jobs/render-42")); !retry.Granted || retry.Token != a.Token {
		t.Fatalf("retried acquire: %v, want the same grant", retry)
	}
	other := mustAcquire(t, c, acqReq("s2", 1, "jobs/render-42"))
	if other.Granted || other.Token != a.Token || other.HolderName != InsecureIdentity.Name {
		t.Fatalf("acquire of a held lease: %v", other)
	}

	ka, err := c.KeepAlive(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := ka.Send(&grantorpb.KeepAliveRequest{Session: "s1", Batch: 7, Leases: []*grantorpb.LeaseRef{
		{Lease: "jobs/render-42", Token: a.Token}, {Lease: "jobs/render-42", Token: a.Token + 5}, {Lease: "never/held", Token: 1},
	}}); err != nil {
		t.Fatal(err)
	}
	kr, err := ka.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if kr.Batch != 7 || len(kr.Renewed) != 1 || kr.Renewed[0].Token != a.Token || len(kr.Lost) != 2 || kr.GrantorTimeNs == 0 {
		t.Fatalf("keepalive reply: %v", kr)
	}
	if err := ka.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := ka.Recv(); err != io.EOF {
		t.Fatalf("keepalive after CloseSend: %v, want EOF", err)
	}

	rel, err := c.Release(tctx(t), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: "s1", Seq: 2}, Lease: "jobs/render-42", Owner: "o", Token: a.Token})
	if err != nil || !rel.Released {
		t.Fatalf("release: %v %v", rel, err)
	}
	if b := mustAcquire(t, c, acqReq("s2", 2, "jobs/render-42")); !b.Granted || b.Token != a.Token+1 {
		t.Fatalf("acquire after release: %v, want token %d", b, a.Token+1)
	}
}

func TestNodeRejectsInvalidInput(t *testing.T) {
	n := start(t, fastConfig(t, t.TempDir()), true)
	c := n.client
	acquire := func(mod func(r *grantorpb.AcquireRequest)) error {
		r := acqReq("s", 1, "ok/name")
		mod(r)
		_, err := c.Acquire(tctx(t), r)
		return err
	}
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{name: "empty lease", call: func() error { return acquire(func(r *grantorpb.AcquireRequest) { r.Lease = "" }) }, want: "lease name is empty"},
		{name: "long lease", call: func() error { return acquire(func(r *grantorpb.AcquireRequest) { r.Lease = strings.Repeat("a", 257) }) }, want: "more than 256"},
		{name: "bad byte", call: func() error { return acquire(func(r *grantorpb.AcquireRequest) { r.Lease = "a b" }) }, want: "allowed are"},
		{name: "empty segment", call: func() error { return acquire(func(r *grantorpb.AcquireRequest) { r.Lease = "a//b" }) }, want: "empty segment"},
		{name: "leading slash", call: func() error { return acquire(func(r *grantorpb.AcquireRequest) { r.Lease = "/a" }) }, want: "empty segment"},
		{name: "dotdot", call: func() error { return acquire(func(r *grantorpb.AcquireRequest) { r.Lease = "a/../b" }) }, want: `".." segment`},
		{name: "no id", call: func() error { return acquire(func(r *grantorpb.AcquireRequest) { r.Id = nil }) }, want: "request id is missing"},
		{name: "empty session", call: func() error { return acquire(func(r *grantorpb.AcquireRequest) { r.Id.Session = "" }) }, want: "session is empty"},
		{name: "long session", call: func() error {
			return acquire(func(r *grantorpb.AcquireRequest) { r.Id.Session = strings.Repeat("s", 65) })
		}, want: "more than 64"},
		{name: "seq 0", call: func() error { return acquire(func(r *grantorpb.AcquireRequest) { r.Id.Seq = 0 }) }, want: "seq must be at least 1"},
		{name: "first_unacked above seq", call: func() error { return acquire(func(r *grantorpb.AcquireRequest) { r.Id.FirstUnacked = 2 }) }, want: "above the request's own seq"},
		{name: "ttl too short", call: func() error { return acquire(func(r *grantorpb.AcquireRequest) { r.TtlNs = int64(time.Millisecond) }) }, want: "outside [1s, 24h0m0s]"},
		{name: "ttl too long", call: func() error { return acquire(func(r *grantorpb.AcquireRequest) { r.TtlNs = int64(25 * time.Hour) }) }, want: "outside [1s, 24h0m0s]"},
		{name: "negative wait", call: func() error { return acquire(func(r *grantorpb.AcquireRequest) { r.WaitNs = -1 }) }, want: "wait"},
		{name: "wait over 1h", call: func() error { return acquire(func(r *grantorpb.AcquireRequest) { r.WaitNs = int64(time.Hour + 1) }) }, want: "wait"},
		{name: "long owner", call: func() error { return acquire(func(r *grantorpb.AcquireRequest) { r.Owner = strings.Repeat("o", 257) }) }, want: "owner is 257 bytes"},
		{name: "release token 0", call: func() error {
			_, err := c.Release(tctx(t), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: "s", Seq: 1}, Lease: "a"})
			return err
		}, want: "token must be at least 1"},
		{name: "keepalive bad lease", call: func() error {
			ka, err := c.KeepAlive(tctx(t))
			if err != nil {
				return err
			}
			if err := ka.Send(&grantorpb.KeepAliveRequest{Session: "s", Leases: []*grantorpb.LeaseRef{{Lease: "..", Token: 1}}}); err != nil {
				return err
			}
			_, err = ka.Recv()
			return err
		}, want: `".." segment`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want InvalidArgument containing %q", err, tt.want)
			}
		})
	}
}

func TestNodeRestartKeepsTokenCounter(t *testing.T) {
	dir := t.TempDir()
	n := start(t, fastConfig(t, dir), true)
	var last uint64
	grant := func(n *running, session, lease string) {
		t.Helper()
		r := mustAcquire(t, n.client, acqReq(session, 1, lease))
		if !r.Granted || r.Token <= last {
			t.Fatalf("%s: %v, want a grant above %d", lease, r, last)
		}
		last = r.Token
	}
	grant(n, "s1", "a")
	grant(n, "s2", "b")
	n.stop()

	n = start(t, fastConfig(t, dir), true)
	grant(n, "s3", "c")
	// The lease granted before the restart is still held.
	if r := mustAcquire(t, n.client, acqReq("s4", 1, "a")); r.Granted || r.Token != 1 {
		t.Fatalf("a after restart: %v", r)
	}
	if err := n.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	grant(n, "s5", "d")
	n.stop()

	n = start(t, fastConfig(t, dir), true)
	if snaps, err := n.snaps.List(); err != nil || len(snaps) == 0 {
		t.Fatalf("no snapshot to restore from: %v %v", snaps, err)
	}
	grant(n, "s6", "e")
	if got := n.fsm.lastToken(); got != last {
		t.Fatalf("counter %d, want %d", got, last)
	}
}

func TestNodeFollowerAnswersNotLeader(t *testing.T) {
	cfg := fastConfig(t, t.TempDir())
	cfg.Bootstrap = false // no cluster: never leader
	n := start(t, cfg, false)
	check := func(what string, err error) {
		t.Helper()
		st := status.Convert(err)
		if st.Code() != codes.FailedPrecondition {
			t.Fatalf("%s on a follower: %v, want FailedPrecondition", what, err)
		}
		var found bool
		for _, d := range st.Details() {
			if _, ok := d.(*grantorpb.NotLeader); ok {
				found = true
			}
		}
		if !found {
			t.Fatalf("%s: no NotLeader detail in %v", what, st.Details())
		}
	}
	_, err := n.client.Acquire(tctx(t), acqReq("s", 1, "a"))
	check("Acquire", err)
	_, err = n.client.Release(tctx(t), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: "s", Seq: 1}, Lease: "a", Token: 1})
	check("Release", err)
	ka, err := n.client.KeepAlive(tctx(t))
	if err == nil {
		_, err = ka.Recv()
	}
	check("KeepAlive", err)
}

// The timing rules end to end: real raft and gRPC, fake clock.
func TestNodeExpiryWithFakeClock(t *testing.T) {
	clock := clockwatch.NewFake(clockwatch.Instant(time.Hour))
	cfg := fastConfig(t, t.TempDir())
	cfg.Clock = clock
	events := newEventLog()
	n := start(t, cfg, true, func(n *Node) { n.lessor.hook = events.add })
	c := n.client

	const ttl = 2 * time.Second
	tG := clock.Now()
	a := mustAcquire(t, c, &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: "s1", Seq: 1}, Lease: "a", TtlNs: int64(ttl)})
	if !a.Granted {
		t.Fatal(a)
	}
	exp := cfg.Timing.GrantorExpiry(tG, ttl)

	m := events.mark()
	waiter := make(chan *grantorpb.AcquireResponse, 1)
	go func() {
		r, err := c.Acquire(tctx(t), &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: "s2", Seq: 1}, Lease: "a", TtlNs: int64(ttl), WaitNs: int64(time.Hour)})
		if err != nil {
			t.Error(err)
		}
		waiter <- r
	}()
	events.wait(t, m, "waiter queued", func(e testEvent) bool { return e.what == "queued" })

	advance := func(to clockwatch.Instant) { advanceTo(t, n.lessor, clock, events, to) }
	advance(exp - 1)
	if rec, _ := n.fsm.lease("a"); rec.Token != a.Token {
		t.Fatalf("lease freed before tG + d(1+rho) + eps: %+v", rec)
	}
	select {
	case r := <-waiter:
		t.Fatalf("waiter answered early: %v", r)
	default:
	}
	advance(exp)
	select {
	case r := <-waiter:
		if r == nil || !r.Granted || r.Token != a.Token+1 {
			t.Fatalf("waiter after expiry: %v, want token %d", r, a.Token+1)
		}
	case <-time.After(waitTimeout):
		t.Fatal("waiter not granted after expiry")
	}
}

func TestNodeShutdownTwiceAndRunAfter(t *testing.T) {
	n, err := New(fastConfig(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	if err := n.Run(context.Background()); !errors.Is(err, ErrShutdown) {
		t.Fatalf("Run after Shutdown: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	base := fastConfig(t, "/tmp/x")
	tests := []struct {
		name string
		mod  func(*Config)
	}{
		{name: "no node id", mod: func(c *Config) { c.NodeID = "" }},
		{name: "no data dir", mod: func(c *Config) { c.DataDir = "" }},
		{name: "zero epsilon", mod: func(c *Config) { c.Timing.Epsilon = 0 }},
		{name: "election below heartbeat", mod: func(c *Config) { c.ElectionTimeout = c.HeartbeatTimeout / 2 }},
		{name: "min ttl below epsilon", mod: func(c *Config) { c.MinTTL = c.Timing.Epsilon }},
		{name: "max below min", mod: func(c *Config) { c.MaxTTL = c.MinTTL / 2 }},
		{name: "zero snapshot threshold", mod: func(c *Config) { c.SnapshotThreshold = 0 }},
		{name: "bootstrap-expect without gossip", mod: func(c *Config) { c.Bootstrap = false; c.BootstrapExpect = 3 }},
		{name: "bootstrap and bootstrap-expect", mod: func(c *Config) { c.Gossip = &gossip.Config{}; c.BootstrapExpect = 3 }},
		{name: "negative bootstrap-expect", mod: func(c *Config) { c.BootstrapExpect = -1 }},
		{name: "negative reconcile interval", mod: func(c *Config) { c.ReconcileInterval = -time.Second }},
		{name: "bad watcher", mod: func(c *Config) { c.Watch.PauseThreshold = -time.Second }},
	}
	if err := base.Validate(); err != nil {
		t.Fatalf("base config: %v", err)
	}
	for _, tt := range tests {
		c := base
		tt.mod(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate = %v, want ErrInvalidConfig", tt.name, err)
		}
	}
	if _, err := New(Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New(Config{}) = %v", err)
	}
}

func TestAdvertiseRPC(t *testing.T) {
	tests := []struct {
		name, explicit, bound, raft, want string
		wantErr                           bool
	}{
		{name: "bound concrete", bound: "127.0.0.1:7401", raft: "10.0.0.1:7402", want: "127.0.0.1:7401"},
		{name: "unspecified v4", bound: "0.0.0.0:7401", raft: "10.0.0.1:7402", want: "10.0.0.1:7401"},
		{name: "unspecified v6", bound: "[::]:7401", raft: "[fd00::1]:7402", want: "[fd00::1]:7401"},
		{name: "explicit", explicit: "grantor1.example:7401", bound: "0.0.0.0:7401", raft: "10.0.0.1:7402", want: "grantor1.example:7401"},
		{name: "explicit without port", explicit: "grantor1.example", bound: "0.0.0.0:7401", raft: "10.0.0.1:7402", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := advertiseRPC(tt.explicit, tt.bound, tt.raft)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("advertiseRPC = %q, %v; want %q (error: %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
