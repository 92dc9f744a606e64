package grantor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// testFSM applies commands to an fsm with increasing log indexes.
type testFSM struct {
	*fsm
	index uint64
}

func newTestFSM() *testFSM { return &testFSM{fsm: newFSM()} }

func (f *testFSM) apply(t cmdType, body any) any {
	f.index++
	return f.Apply(&raft.Log{Index: f.index, Term: 1, Type: raft.LogCommand, Data: encodeCmd(t, body)})
}

func (f *testFSM) acquire(t *testing.T, session string, seq uint64, lease, owner string) *acquireResult {
	t.Helper()
	res := f.apply(cmdAcquire, acquireCmd{ID: requestID{Session: session, Seq: seq}, Lease: lease, Owner: owner, TTL: 10 * time.Second})
	r, ok := res.(*acquireResult)
	if !ok {
		t.Fatalf("acquire %s/%d %s: got %v", session, seq, lease, res)
	}
	return r
}

func (f *testFSM) release(t *testing.T, session string, seq uint64, lease, owner string, token uint64) bool {
	t.Helper()
	res := f.apply(cmdRelease, releaseCmd{ID: requestID{Session: session, Seq: seq}, Lease: lease, Owner: owner, Token: token})
	r, ok := res.(*releaseResult)
	if !ok {
		t.Fatalf("release %s/%d %s: got %v", session, seq, lease, res)
	}
	return r.Released
}

func (f *testFSM) revoke(t *testing.T, lease string, token uint64) bool {
	t.Helper()
	return f.apply(cmdRevoke, revokeCmd{Lease: lease, Token: token}).(*revokeResult).Revoked
}

func TestFSMTokensOnlyGrowAcrossLeasesAndOwners(t *testing.T) {
	f := newTestFSM()
	var last uint64
	grant := func(session string, seq uint64, lease string) uint64 {
		t.Helper()
		r := f.acquire(t, session, seq, lease, "o")
		if !r.Granted || r.Token <= last {
			t.Fatalf("%s by %s: granted=%v token=%d, want a grant above %d", lease, session, r.Granted, r.Token, last)
		}
		last = r.Token
		return r.Token
	}
	a := grant("s1", 1, "a")
	grant("s2", 1, "b")
	if !f.release(t, "s1", 2, "a", "o", a) {
		t.Fatal("release of a by its holder failed")
	}
	a2 := grant("s3", 1, "a") // a new owner of a freed lease takes the next token
	if !f.revoke(t, "a", a2) {
		t.Fatal("revoke with the holder's token failed")
	}
	grant("s1", 3, "a")
	if got := f.lastToken(); got != last {
		t.Fatalf("lastToken = %d, want %d", got, last)
	}
}

func TestFSMHolderReacquireKeepsToken(t *testing.T) {
	f := newTestFSM()
	first := f.acquire(t, "s1", 1, "a", "o")
	again := f.apply(cmdAcquire, acquireCmd{ID: requestID{Session: "s1", Seq: 2}, Lease: "a", Owner: "o", TTL: 20 * time.Second}).(*acquireResult)
	if !again.Granted || again.Token != first.Token {
		t.Fatalf("re-acquire by holder: %+v, want granted with token %d", again, first.Token)
	}
	if rec, _ := f.lease("a"); rec.TTL != 20*time.Second {
		t.Fatalf("ttl after re-acquire = %v, want the new 20s", rec.TTL)
	}
	if f.lastToken() != first.Token {
		t.Fatalf("counter moved to %d on a re-acquire", f.lastToken())
	}
	// Same session, other owner: that is somebody else.
	other := f.acquire(t, "s1", 3, "a", "o2")
	if other.Granted || other.Token != first.Token {
		t.Fatalf("acquire by another owner: %+v, want not granted naming token %d", other, first.Token)
	}
}

func TestFSMRetriedAcquireGrantsOnce(t *testing.T) {
	f := newTestFSM()
	first := f.acquire(t, "s1", 1, "a", "o")
	retry := f.acquire(t, "s1", 1, "a", "o")
	if *retry != *first || f.lastToken() != 1 {
		t.Fatalf("retry = %+v (counter %d), want %+v and counter 1", retry, f.lastToken(), first)
	}
	// After the grant ends, a late retry of the same request must not
	// grant again, nor claim the ended grant is live.
	if !f.release(t, "s1", 2, "a", "o", first.Token) {
		t.Fatal("release failed")
	}
	late := f.acquire(t, "s1", 1, "a", "o")
	if late.Granted || !late.Ended || late.Token != first.Token || f.lastToken() != 1 {
		t.Fatalf("late retry after release = %+v (counter %d), want ended with token %d and counter 1", late, f.lastToken(), first.Token)
	}
}

// TestFSMRetryOfEndedGrantIsNoRefusal is chaos finding F4: an Acquire is
// granted while its reply is lost, the grant ends, another session takes
// the lease, and then the Acquire is retried. The retry must say that its
// grant was made and has ended, not refuse it naming the new holder as if
// the Acquire had not taken effect.
func TestFSMRetryOfEndedGrantIsNoRefusal(t *testing.T) {
	for _, end := range []string{"revoke", "expire-session", "release"} {
		t.Run(end, func(t *testing.T) {
			f := newTestFSM()
			x := f.acquire(t, "sx", 7, "a", "o")
			if !x.Granted {
				t.Fatalf("first acquire not granted: %+v", x)
			}
			switch end {
			case "revoke":
				f.revoke(t, "a", x.Token)
			case "expire-session":
				f.apply(cmdExpireSession2, expireSessionCmd{Session: "sx", Term: 1, Leases: []grantRef{{Lease: "a", Token: x.Token}}})
			case "release":
				f.release(t, "sx", 8, "a", "o", x.Token)
			}
			other := f.acquire(t, "sy", 1, "a", "o")
			if !other.Granted {
				t.Fatalf("acquire by another session after the end: %+v", other)
			}
			retry := f.acquire(t, "sx", 7, "a", "o")
			if retry.Granted || !retry.Ended || retry.Token != x.Token || retry.HolderName != "" {
				t.Fatalf("retry = %+v, want ended naming its own token %d (not a refusal naming %d)", retry, x.Token, other.Token)
			}
			if f.lastToken() != other.Token {
				t.Fatalf("counter %d after the retry, want %d", f.lastToken(), other.Token)
			}
			if cur, _ := f.lease("a"); cur.Token != other.Token || cur.Session != "sy" {
				t.Fatalf("lease after the retry: %+v, want sy's grant %d", cur, other.Token)
			}
		})
	}
}

func TestFSMOutOfOrderSeqsInOneSession(t *testing.T) {
	f := newTestFSM()
	// Three concurrent requests of one session reach the log out of order.
	r3 := f.acquire(t, "s", 3, "c", "o")
	r1 := f.acquire(t, "s", 1, "a", "o")
	r2 := f.acquire(t, "s", 2, "b", "o")
	for _, r := range []*acquireResult{r1, r2, r3} {
		if !r.Granted {
			t.Fatalf("not granted: %+v", r)
		}
	}
	// Retries of each still answer their own outcome.
	if got := f.acquire(t, "s", 1, "a", "o"); *got != *r1 {
		t.Fatalf("retry of 1 = %+v, want %+v", got, r1)
	}
	if f.lastToken() != 3 {
		t.Fatalf("counter %d, want 3", f.lastToken())
	}
}

func TestFSMStaleRequestBelowFloor(t *testing.T) {
	f := newTestFSM()
	f.acquire(t, "s", 1, "a", "o")
	f.acquire(t, "s", 2, "b", "o")
	// Seq 5 says the session has every reply below 3.
	f.apply(cmdAcquire, acquireCmd{ID: requestID{Session: "s", Seq: 5, FirstUnacked: 3}, Lease: "c", Owner: "o", TTL: time.Second})
	res := f.apply(cmdAcquire, acquireCmd{ID: requestID{Session: "s", Seq: 2}, Lease: "b", Owner: "o", TTL: time.Second})
	var stale *StaleRequestError
	if err, _ := res.(error); !errors.As(err, &stale) || !errors.Is(err, ErrStaleRequest) || stale.Floor != 3 {
		t.Fatalf("retry below floor = %v, want StaleRequestError with floor 3", res)
	}
	if n := len(f.st.Sessions["s"].Outcomes); n != 1 {
		t.Fatalf("%d outcomes kept, want only seq 5's", n)
	}
	// At the floor is fine.
	if r := f.acquire(t, "s", 3, "d", "o"); !r.Granted {
		t.Fatalf("seq 3 at the floor: %+v", r)
	}
}

func TestFSMSeqReusedForOtherRequest(t *testing.T) {
	f := newTestFSM()
	f.acquire(t, "s", 1, "a", "o")
	res := f.apply(cmdAcquire, acquireCmd{ID: requestID{Session: "s", Seq: 1}, Lease: "b", Owner: "o", TTL: time.Second})
	if err, _ := res.(error); !errors.Is(err, ErrSeqReused) {
		t.Fatalf("got %v, want ErrSeqReused", res)
	}
}

func TestFSMTooManyOutstanding(t *testing.T) {
	f := newTestFSM()
	for seq := uint64(1); seq <= maxOutstanding; seq++ {
		f.release(t, "s", seq, "a", "o", 1)
	}
	res := f.apply(cmdRelease, releaseCmd{ID: requestID{Session: "s", Seq: maxOutstanding + 1}, Lease: "a", Owner: "o", Token: 1})
	if err, _ := res.(error); !errors.Is(err, ErrTooManyOutstanding) {
		t.Fatalf("got %v, want ErrTooManyOutstanding", res)
	}
	// Acknowledging lets it go on.
	res = f.apply(cmdRelease, releaseCmd{ID: requestID{Session: "s", Seq: maxOutstanding + 1, FirstUnacked: maxOutstanding + 1}, Lease: "a", Owner: "o", Token: 1})
	if _, ok := res.(*releaseResult); !ok {
		t.Fatalf("after ack: %v", res)
	}
}

func TestFSMReleaseAndRevokeNeedMatchingToken(t *testing.T) {
	f := newTestFSM()
	r := f.acquire(t, "s", 1, "a", "o")
	tests := []struct {
		name string
		do   func() bool
	}{
		{name: "release wrong token", do: func() bool { return f.release(t, "s", 2, "a", "o", r.Token+1) }},
		{name: "release wrong owner", do: func() bool { return f.release(t, "s", 3, "a", "x", r.Token) }},
		{name: "release wrong session", do: func() bool { return f.release(t, "s2", 1, "a", "o", r.Token) }},
		{name: "revoke wrong token", do: func() bool { return f.revoke(t, "a", r.Token+1) }},
		{name: "revoke free lease", do: func() bool { return f.revoke(t, "nothing", r.Token) }},
	}
	for _, tt := range tests {
		if tt.do() {
			t.Errorf("%s: freed the lease", tt.name)
		}
		if rec, ok := f.lease("a"); !ok || rec.Token != r.Token {
			t.Fatalf("%s: lease is now %+v, %v", tt.name, rec, ok)
		}
	}
	// A retried release answers its first outcome, even after the lease
	// was re-granted.
	if !f.release(t, "s", 10, "a", "o", r.Token) || !f.release(t, "s", 10, "a", "o", r.Token) {
		t.Fatal("release or its retry said not released")
	}
}

func TestFSMCloseSessionForgetsRecords(t *testing.T) {
	f := newTestFSM()
	f.acquire(t, "s", 1, "a", "o")
	f.apply(cmdCloseSession, closeSessionCmd{Session: "s"})
	if f.hasSession("s") {
		t.Fatal("session records kept")
	}
	if _, ok := f.lease("a"); !ok {
		t.Fatal("closing a session must not free its leases")
	}
}

func persist(t *testing.T, f *fsm) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	return sink.Bytes()
}

func TestFSMSnapshotRestoreKeepsCounterLeasesSessions(t *testing.T) {
	f := newTestFSM()
	a := f.acquire(t, "s1", 1, "a", "o")
	f.acquire(t, "s2", 1, "b", "o")
	f.release(t, "s2", 2, "b", "o", 2)
	f.apply(cmdRegisterNode, registerNodeCmd{NodeID: "n1", RPCAddr: "127.0.0.1:1"})
	data := persist(t, f.fsm)

	g := &testFSM{fsm: newFSM()}
	var restored bool
	g.observe = func(ev fsmEvent) { restored = restored || ev.Kind == evRestored }
	if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if !restored {
		t.Fatal("no evRestored event")
	}
	if g.lastToken() != 2 {
		t.Fatalf("restored counter %d, want 2", g.lastToken())
	}
	if rec, ok := g.lease("a"); !ok || rec.Token != a.Token || rec.Session != "s1" {
		t.Fatalf("restored lease a = %+v, %v", rec, ok)
	}
	if g.nodeAddr("n1") != "127.0.0.1:1" || !g.holdsLeases("s1") || g.holdsLeases("s2") {
		t.Fatal("nodes or held-by index not restored")
	}
	// Retries are still recognised, and new grants continue the counter.
	if r := g.acquire(t, "s1", 1, "a", "o"); *r != *a {
		t.Fatalf("retry after restore = %+v", r)
	}
	if r := g.acquire(t, "s3", 1, "b", "o"); r.Token != 3 {
		t.Fatalf("next grant after restore has token %d, want 3", r.Token)
	}
	// Restoring an older snapshot over a newer state is refused.
	if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err == nil {
		t.Fatal("restore moved the counter back")
	}
}

func TestFSMIsDeterministic(t *testing.T) {
	log := []struct {
		t    cmdType
		body any
	}{
		{cmdAcquire, acquireCmd{ID: requestID{Session: "s1", Seq: 1}, Lease: "a", Owner: "o", TTL: time.Second}},
		{cmdAcquire, acquireCmd{ID: requestID{Session: "s2", Seq: 1}, Lease: "a", Owner: "o", TTL: time.Second}},
		{cmdAcquire, acquireCmd{ID: requestID{Session: "s2", Seq: 2}, Lease: "b", Owner: "o", TTL: time.Second}},
		{cmdRevoke, revokeCmd{Lease: "a", Token: 1}},
		{cmdAcquire, acquireCmd{ID: requestID{Session: "s2", Seq: 3, FirstUnacked: 2}, Lease: "a", Owner: "o", TTL: time.Second}},
		{cmdRelease, releaseCmd{ID: requestID{Session: "s2", Seq: 4}, Lease: "b", Owner: "o", Token: 2}},
		{cmdAcquire2, acquireCmd{ID: requestID{Session: "s2", Seq: 6, FirstUnacked: 2, AlsoReceived: []uint64{4, 3}}, Lease: "c", Owner: "o", TTL: time.Second}},
		{cmdRelease2, releaseCmd{ID: requestID{Session: "s2", Seq: 8, FirstUnacked: 2, AlsoReceived: []uint64{6}}, Lease: "c", Owner: "o", Token: 3}},
		{cmdCloseSession, closeSessionCmd{Session: "s1"}},
	}
	var snaps [][]byte
	for range 2 {
		f := newTestFSM()
		for _, e := range log {
			f.apply(e.t, e.body)
		}
		snaps = append(snaps, persist(t, f.fsm))
	}
	if !bytes.Equal(snaps[0], snaps[1]) {
		t.Fatalf("same log, different states:\n%s\n%s", snaps[0], snaps[1])
	}
}

func TestCommandEncodingIsStable(t *testing.T) {
	// The log format outlives binaries: these bytes must never change.
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{name: "acquire", got: encodeCmd(cmdAcquire, acquireCmd{ID: requestID{Session: "s", Seq: 2, FirstUnacked: 1}, Lease: "a/b", Owner: "o", TTL: time.Second}),
			want: "\x01" + `{"id":{"session":"s","seq":2,"first_unacked":1},"lease":"a/b","owner":"o","ttl_ns":1000000000}`},
		{name: "release", got: encodeCmd(cmdRelease, releaseCmd{ID: requestID{Session: "s", Seq: 3}, Lease: "a", Owner: "o", Token: 7}),
			want: "\x02" + `{"id":{"session":"s","seq":3},"lease":"a","owner":"o","token":7}`},
		{name: "revoke", got: encodeCmd(cmdRevoke, revokeCmd{Lease: "a", Token: 7}), want: "\x03" + `{"lease":"a","token":7}`},
		{name: "close session", got: encodeCmd(cmdCloseSession, closeSessionCmd{Session: "s"}), want: "\x04" + `{"session":"s"}`},
		{name: "register node", got: encodeCmd(cmdRegisterNode, registerNodeCmd{NodeID: "n", RPCAddr: "h:1"}), want: "\x05" + `{"node_id":"n","rpc_addr":"h:1"}`},
		{name: "register node with its newest command", got: encodeCmd(cmdRegisterNode, registerNodeCmd{NodeID: "n", RPCAddr: "h:1", MaxCmd: 8}),
			want: "\x05" + `{"node_id":"n","rpc_addr":"h:1","max_cmd":8}`},
		{name: "acquire2", got: acquireEntry(acquireCmd{ID: requestID{Session: "s", Seq: 4, FirstUnacked: 1, AlsoReceived: []uint64{3, 2}}, Lease: "a", Owner: "o", TTL: time.Second}, cmdRelease2),
			want: "\x06" + `{"id":{"session":"s","seq":4,"first_unacked":1,"also_received":[3,2]},"lease":"a","owner":"o","ttl_ns":1000000000}`},
		{name: "release2", got: releaseEntry(releaseCmd{ID: requestID{Session: "s", Seq: 5, AlsoReceived: []uint64{4}}, Lease: "a", Owner: "o", Token: 7}, cmdRelease2),
			want: "\x07" + `{"id":{"session":"s","seq":5,"also_received":[4]},"lease":"a","owner":"o","token":7}`},
		{name: "acquire3", got: acquireEntry(acquireCmd{ID: requestID{Session: "s", Seq: 4, FirstUnacked: 1, AlsoReceived: []uint64{3}}, Lease: "a", Owner: "o", TTL: time.Second}, cmdAcquire3),
			want: "\x08" + `{"id":{"session":"s","seq":4,"first_unacked":1,"also_received":[3]},"lease":"a","owner":"o","ttl_ns":1000000000}`},
	}
	for _, tt := range tests {
		if string(tt.got) != tt.want {
			t.Errorf("%s: encoded %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

// Issue 8 item 4: an entry the FSM cannot decode halts it: neither that
// entry nor any later one is applied, and no snapshot is taken or restored
// from the halted state. Issue 21 item 1: the message names the entry's
// index, term and the leader that wrote it when known, and says "upgrade"
// only for a type a server of the cluster registered applying (the
// version marker a newer leaseside leaves); any other unknown type, or a
// corrupt body of a known one, is called forged or corrupt and points at
// `leaseside grantor recover`.
func TestFSMHaltsAtAnEntryItCannotDecode(t *testing.T) {
	for _, tt := range []struct {
		name       string
		data       []byte
		registered cmdType // registered by server g9 before the entry, if not 0
		unknown    bool
		want       string
	}{
		{name: "unknown type a newer grantor registered", data: []byte{0xEE}, registered: 0xEE, unknown: true,
			want: "raft log entry 3 (term 7, written by leader g2): command type 238 is unknown to this grantor (it applies types up to " + fmt.Sprint(uint8(newestCmd)) + "), and grantor g9 registered applying it: written by a newer leaseside: upgrade this grantor"},
		{name: "unknown type nobody registered", data: []byte{0xEE}, registered: 0xED, unknown: true,
			want: "raft log entry 3 (term 7, written by leader g2): command type 238 is unknown, and no grantor of this cluster registered applying it, so no leaseside wrote it: the entry is forged or corrupt"},
		{name: "unknown type, no registration", data: []byte{0xFF}, unknown: true,
			want: "grantor recover --data-dir DIR --skip-index 2` on each"},
		{name: "corrupt acquire", data: []byte{byte(cmdAcquire), '{', 'x'}, want: "raft log entry 2 (term 7, written by leader g2): command type 1 (acquire) cannot be decoded"},
		{name: "empty entry", data: nil, want: "raft log entry 2 (term 7, written by leader g2): command type 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestFSM()
			var halts []*HaltError
			f.onHalt = func(h *HaltError) { halts = append(halts, h) }
			f.leaderOf = func(term uint64) string {
				if term == 7 {
					return "g2"
				}
				return ""
			}
			if tt.registered != 0 {
				f.apply(cmdRegisterNode, registerNodeCmd{NodeID: "g9", RPCAddr: "127.0.0.1:1", MaxCmd: tt.registered})
			}
			a := f.acquire(t, "s1", 1, "a", "o")
			f.index++
			bad := f.index
			res := f.Apply(&raft.Log{Index: f.index, Term: 7, Data: tt.data})
			h, ok := res.(*HaltError)
			if !ok || h.Index != bad || h.Term != 7 || h.Unknown != tt.unknown || !errors.Is(h, ErrHalted) {
				t.Fatalf("Apply of the bad entry: %#v", res)
			}
			if !strings.Contains(h.Error(), tt.want) {
				t.Fatalf("halt message %q does not say %q", h.Error(), tt.want)
			}
			if len(halts) != 1 || halts[0] != h {
				t.Fatalf("onHalt called %d times", len(halts))
			}
			// Nothing after it is applied.
			if r := f.apply(cmdAcquire, acquireCmd{ID: requestID{Session: "s1", Seq: 2}, Lease: "b", Owner: "o", TTL: time.Second}); r != h {
				t.Fatalf("an entry after the halt: %v, want the halt error", r)
			}
			if _, held := f.lease("b"); held || f.lastToken() != a.Token {
				t.Fatalf("an entry after the halt was applied: b held %v, last token %d", held, f.lastToken())
			}
			if len(halts) != 1 {
				t.Fatalf("onHalt called again: %d", len(halts))
			}
			if _, err := f.Snapshot(); !errors.Is(err, ErrHalted) {
				t.Fatalf("Snapshot of a halted FSM: %v", err)
			}
			good := newTestFSM()
			good.acquire(t, "s9", 1, "z", "o")
			if err := f.Restore(io.NopCloser(bytes.NewReader(persist(t, good.fsm)))); !errors.Is(err, ErrHalted) {
				t.Fatalf("Restore into a halted FSM: %v", err)
			}
			if _, held := f.lease("z"); held {
				t.Fatal("a halted FSM restored a snapshot")
			}
		})
	}
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	canceled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { return nil }
func (s *memSink) Cancel() error { s.canceled = true; return nil }
