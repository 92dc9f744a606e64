package grantor

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// holdingTransport is an in-memory raft transport whose answers from the
// servers in hold are held back: each AppendEntries to one of them is
// delivered and answered, but the answer reaches raft only once the test
// lets it go (let, for the first held answer) or the test ends.
type holdingTransport struct {
	*raft.InmemTransport
	stop chan struct{} // closed at the end: every held answer goes

	mu   sync.Mutex
	hold map[raft.ServerID]*holdRule
}

// holdRule holds back the answers of one server.
type holdRule struct {
	held   chan struct{} // closed once the first answer is held
	let    chan struct{} // closing it lets the first held answer go
	n      int
	onSend func() // called before each request to the server is sent
}

func (h *holdingTransport) rule(id raft.ServerID) *holdRule {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hold[id]
}

func (h *holdingTransport) holdAnswers(id raft.ServerID, onSend func()) *holdRule {
	r := &holdRule{held: make(chan struct{}), let: make(chan struct{}), onSend: onSend}
	h.mu.Lock()
	h.hold[id] = r
	h.mu.Unlock()
	return r
}

func (h *holdingTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	r := h.rule(id)
	if r != nil && r.onSend != nil {
		r.onSend()
	}
	err := h.InmemTransport.AppendEntries(id, target, args, resp)
	if r == nil || err != nil {
		return err
	}
	h.mu.Lock()
	r.n++
	first := r.n == 1
	h.mu.Unlock()
	let := (<-chan struct{})(nil)
	if first {
		close(r.held)
		let = r.let
	}
	select {
	case <-let:
	case <-h.stop:
	}
	return err
}

// verifyCluster is three raft servers in memory; the leader's transport
// holds answers back on demand.
type verifyCluster struct {
	rafts []*raft.Raft
	hold  *holdingTransport
	trans *contactTransport
}

func startVerifyCluster(t *testing.T) *verifyCluster {
	t.Helper()
	ids := []raft.ServerID{"a", "b", "c"}
	var inm []*raft.InmemTransport
	for _, id := range ids {
		_, tr := raft.NewInmemTransport(raft.ServerAddress(id))
		inm = append(inm, tr)
	}
	for i := range inm {
		for j := range inm {
			if i != j {
				inm[i].Connect(inm[j].LocalAddr(), inm[j])
			}
		}
	}
	c := &verifyCluster{hold: &holdingTransport{InmemTransport: inm[0], stop: make(chan struct{}), hold: map[raft.ServerID]*holdRule{}}}
	c.trans = newContactTransport(c.hold)
	for i, id := range ids {
		cfg := raft.DefaultConfig()
		cfg.LocalID = id
		cfg.Logger = hclog.NewNullLogger()
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
		var tr raft.Transport = inm[i]
		if i == 0 {
			tr = c.trans
		}
		store := raft.NewInmemStore()
		r, err := raft.NewRaft(cfg, &fsmNop{}, store, store, raft.NewInmemSnapshotStore(), tr)
		if err != nil {
			t.Fatal(err)
		}
		c.rafts = append(c.rafts, r)
	}
	t.Cleanup(func() {
		close(c.hold.stop)
		for _, r := range c.rafts {
			_ = r.Shutdown().Error()
		}
	})
	a := c.rafts[0]
	if err := a.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "a", Address: "a"}}}).Error(); err != nil {
		t.Fatal(err)
	}
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for a.State() != raft.Leader {
		select {
		case <-a.LeaderCh():
		case <-deadline.C:
			t.Fatal("a did not become leader")
		}
	}
	for _, id := range ids[1:] {
		if err := a.AddVoter(id, raft.ServerAddress(id), 0, waitTimeout).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Barrier(waitTimeout).Error(); err != nil {
		t.Fatal(err)
	}
	return c
}

// fsmNop is a raft FSM that keeps nothing.
type fsmNop struct{}

func (fsmNop) Apply(*raft.Log) any                 { return nil }
func (fsmNop) Snapshot() (raft.FSMSnapshot, error) { return nopSnapshot{}, nil }
func (fsmNop) Restore(rc io.ReadCloser) error      { return rc.Close() }

type nopSnapshot struct{}

func (nopSnapshot) Persist(s raft.SnapshotSink) error { return s.Close() }
func (nopSnapshot) Release()                          {}

// calledVerifier is a raftVerifier that notes when VerifyLeader has been
// called (its future is in raft's queue).
type calledVerifier struct {
	*raft.Raft
	called atomic.Bool
}

func (v *calledVerifier) VerifyLeader() raft.Future {
	f := v.Raft.VerifyLeader()
	v.called.Store(true)
	return f
}

func (c *verifyCluster) verifier(r raftVerifier) freshVerifier {
	return freshVerifier{r: r, trans: c.trans, self: "a", await: func(f raft.Future) error { return f.Error() }}
}

// A healthy cluster confirms its leader.
func TestVerifyConfirmsAHealthyLeader(t *testing.T) {
	c := startVerifyCluster(t)
	for i := range 3 {
		if err := c.verifier(c.rafts[0]).verify(); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
}

// Issue 22 item 4: a verify round counts only answers to messages sent
// after it began. Follower b's answer to a heartbeat sent before the round
// is held back and reaches the leader only once the round has begun (as
// from the socket buffer of a leader process that was paused); follower
// c's answers, and every later answer of b, never come. hashicorp/raft's
// VerifyLeader counts b's old answer, which with the leader's own vote is
// a quorum of three: the round must refuse all the same.
func TestVerifyRefusesAnAnswerToAHeartbeatSentBeforeTheRound(t *testing.T) {
	c := startVerifyCluster(t)
	b := c.hold.holdAnswers("b", nil)
	select {
	case <-b.held:
	case <-time.After(waitTimeout):
		t.Fatal("no heartbeat to b")
	}
	v := &calledVerifier{Raft: c.rafts[0]}
	var once sync.Once
	// The first request to c after VerifyLeader was called is its
	// heartbeat: the round has begun, and b's old answer goes now.
	c.hold.holdAnswers("c", func() {
		if v.called.Load() {
			once.Do(func() { close(b.let) })
		}
	})
	done := make(chan error, 1)
	go func() { done <- c.verifier(v).verify() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the round was confirmed by an answer to a heartbeat sent before it began")
		}
		t.Logf("refused: %v", err)
	case <-time.After(waitTimeout):
		t.Fatal("the verify round hung")
	}
}

// freshQuorum counts voters only, this server among them.
func TestFreshQuorum(t *testing.T) {
	servers := func(voters, nonvoters int) raft.Configuration {
		var cfg raft.Configuration
		for i := range voters {
			cfg.Servers = append(cfg.Servers, raft.Server{ID: raft.ServerID(fmt.Sprint("v", i)), Suffrage: raft.Voter})
		}
		for i := range nonvoters {
			cfg.Servers = append(cfg.Servers, raft.Server{ID: raft.ServerID(fmt.Sprint("n", i)), Suffrage: raft.Nonvoter})
		}
		return cfg
	}
	tests := []struct {
		name  string
		cfg   raft.Configuration
		fresh map[raft.ServerID]bool
		want  bool
	}{
		{name: "alone", cfg: servers(1, 0), want: true},
		{name: "three, none answered", cfg: servers(3, 0), want: false},
		{name: "three, one answered", cfg: servers(3, 0), fresh: map[raft.ServerID]bool{"v1": true}, want: true},
		{name: "three, nonvoters answered", cfg: servers(3, 2), fresh: map[raft.ServerID]bool{"n0": true, "n1": true}, want: false},
		{name: "five, one answered", cfg: servers(5, 0), fresh: map[raft.ServerID]bool{"v1": true}, want: false},
		{name: "five, two answered", cfg: servers(5, 0), fresh: map[raft.ServerID]bool{"v1": true, "v4": true}, want: true},
		{name: "four, one answered", cfg: servers(4, 0), fresh: map[raft.ServerID]bool{"v1": true}, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := freshQuorum(tc.cfg, "v0", func(id raft.ServerID) bool { return tc.fresh[id] }); got != tc.want {
				t.Fatalf("freshQuorum = %v, want %v", got, tc.want)
			}
		})
	}
}
