package gossip

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
)

// A key rotation on a running cluster, in the documented three steps
// (add the new key everywhere, make it first everywhere, drop the old
// one), splits nothing: every member stays alive and metadata keeps
// spreading after each step. Afterwards a member with only the old key
// is refused and one with only the new key joins.
func TestKeyRotation(t *testing.T) {
	var ms []*Member
	for i := range 3 {
		var join []string
		if i > 0 {
			join = []string{ms[0].Addr()}
		}
		ms = append(ms, start(t, testConfig(fmt.Sprintf("g%d", i+1), grantorMeta(i+1, ""), keyA, join...)))
	}
	for _, m := range ms {
		waitFor(t, m, "three alive", func() bool { return aliveCount(m) == 3 })
	}
	steps := []struct {
		name string
		keys [][]byte
	}{
		{"add the new key", [][]byte{keyA, keyB}},
		{"make it primary", [][]byte{keyB, keyA}},
		{"drop the old key", [][]byte{keyB}},
	}
	for i, st := range steps {
		for _, m := range ms {
			if err := m.SetKeys(st.keys); err != nil {
				t.Fatalf("%s: %s: SetKeys: %v", st.name, m.Name(), err)
			}
			if got := m.Keys(); len(got) != len(st.keys) || !bytes.Equal(got[0], st.keys[0]) {
				t.Fatalf("%s: %s: keyring %q, want %q first of %d", st.name, m.Name(), got, st.keys[0], len(st.keys))
			}
		}
		// Gossip still flows: a metadata change reaches everyone.
		leader := fmt.Sprintf("after-step-%d", i)
		if err := ms[0].SetMeta(grantorMeta(1, leader)); err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			waitFor(t, m, st.name+": g1's new meta", func() bool {
				for _, in := range m.Members() {
					if in.Name == "g1" && in.Meta.LeaderID == leader {
						return true
					}
				}
				return false
			})
			if n := aliveCount(m); n != 3 {
				t.Fatalf("%s: %s sees %d alive, want 3", st.name, m.Name(), n)
			}
		}
	}
	if m, err := Start(context.Background(), testConfig("old-key", sidecarMeta(), keyA, ms[1].Addr())); !errors.Is(err, ErrGossipKey) {
		if m != nil {
			m.Shutdown()
		}
		t.Fatalf("a member with the old key only: %v, want ErrGossipKey", err)
	}
	start(t, testConfig("new-key", sidecarMeta(), keyB, ms[1].Addr()))
	waitFor(t, ms[0], "the member with the new key", func() bool { return stateOf(ms[0], "new-key") == StateAlive })
}

func TestSetKeysRefuses(t *testing.T) {
	clear := start(t, testConfig("clear", sidecarMeta(), nil))
	if err := clear.SetKeys([][]byte{keyA}); !errors.Is(err, ErrGossipKey) {
		t.Errorf("SetKeys on a member without encryption: %v, want ErrGossipKey", err)
	}
	if err := clear.SetKeys(nil); err != nil {
		t.Errorf("SetKeys(nil) on a member without encryption: %v", err)
	}
	enc := start(t, testConfig("enc", sidecarMeta(), keyA))
	for _, keys := range [][][]byte{nil, {keyA[:10]}} {
		if err := enc.SetKeys(keys); !errors.Is(err, ErrGossipKey) {
			t.Errorf("SetKeys(%q): %v, want ErrGossipKey", keys, err)
		}
	}
	if got := enc.Keys(); len(got) != 1 || !bytes.Equal(got[0], keyA) {
		t.Errorf("keyring after refused SetKeys: %q", got)
	}
}
