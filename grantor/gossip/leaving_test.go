package gossip

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"
)

// A member that announces it is leaving returns only once every alive
// grantor lists it as leaving: they list it at once, without waiting for
// gossip. Without confirmLeaving the announcement returned once its
// broadcast was sent (3 runs of 30 failed here beside two CPU hogs), and
// a grantor could get the leave notice first and list the member dead for
// good (TestGoneGrantorsAreDropped/leave failed so, 2 runs in 23).
func TestLeavingIsConfirmedByTheGrantors(t *testing.T) {
	c := newCluster(t, keyA)
	if err := c.g[2].AnnounceLeaving(0); err != nil {
		t.Fatal(err)
	}
	for _, m := range c.g[:2] {
		if s := stateOf(m, "g3"); s != StateLeaving {
			t.Errorf("%s lists g3 %q right after its AnnounceLeaving returned; want %q", m.Name(), s, StateLeaving)
		}
	}
}

// A member that lists as dead one that left (it missed the leaving flag)
// learns "left" from the state syncs of the members that saw the flag.
func TestLeftIsLearnedFromStateSyncs(t *testing.T) {
	c := newCluster(t, keyA)
	if err := c.g[2].Leave(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Member{c.g[0], c.g[1], c.side} {
		waitFor(t, m, "g3 left", func() bool { return stateOf(m, "g3") == StateLeft })
	}
	// The sidecar missed the flag, as a loaded one may.
	r := c.side.roster
	r.mu.Lock()
	e := r.byName["g3"]
	e.info.State, e.leaving = StateDead, false
	r.bumpLocked()
	r.mu.Unlock()
	if s := stateOf(c.side, "g3"); s != StateDead {
		t.Fatalf("g3 is %q at the sidecar", s)
	}
	waitFor(t, c.side, "g3 left again", func() bool { return stateOf(c.side, "g3") == StateLeft })
}

func TestLeftClaimsEncoding(t *testing.T) {
	cs := []leftClaim{{"g3", 7}, {"side-with-a-longer-name", 1<<63 + 5}}
	got, err := decodeLeft(encodeLeft(cs))
	if err != nil || !slices.Equal(got, cs) {
		t.Fatalf("round trip: %v, %v; want %v", got, err, cs)
	}
	if encodeLeft(nil) != nil {
		t.Error("no claims encode to something")
	}
	many := make([]leftClaim, maxLeftClaims+10)
	for i := range many {
		many[i] = leftClaim{"m", uint64(i + 1)}
	}
	if got, err := decodeLeft(encodeLeft(many)); err != nil || len(got) != maxLeftClaims {
		t.Errorf("%d claims: decoded %d, %v; want the first %d", len(many), len(got), err, maxLeftClaims)
	}
	good := encodeLeft(cs)
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"unknown version", append([]byte{2}, good[1:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing bytes", append(bytes.Clone(good), 0)},
		{"too many", []byte{leftVersion1, 0x81, 0x08}}, // 1,025
		{"name too long", append([]byte{leftVersion1, 1, 0x81, 0x04}, make([]byte, 513+1)...)},
	} {
		if _, err := decodeLeft(tc.b); !errors.Is(err, errLeftMalformed) {
			t.Errorf("%s: %v, want errLeftMalformed", tc.name, err)
		}
	}
}

// A claim changes only a member listed dead with the same run.
func TestLearnLeft(t *testing.T) {
	r := newRoster(time.Hour)
	now := time.Now()
	for i, name := range []string{"dead", "other-run", "alive"} {
		meta := grantorMeta(i+1, "")
		meta.Instance = 7
		r.alive(name, "127.0.0.1:1", encodeMeta(meta, false))
	}
	r.gone("dead", now)
	r.gone("other-run", now)
	r.learnLeft([]leftClaim{{"dead", 7}, {"other-run", 8}, {"alive", 7}, {"unknown", 7}})
	want := map[string]string{"dead": StateLeft, "other-run": StateDead, "alive": StateAlive}
	for _, e := range r.snapshot(now) {
		if e.info.State != want[e.info.Name] {
			t.Errorf("%s: %q, want %q", e.info.Name, e.info.State, want[e.info.Name])
		}
	}
	if cs := r.leftClaims(now); !slices.Equal(cs, []leftClaim{{"dead", 7}}) {
		t.Errorf("leftClaims = %v", cs)
	}
}
