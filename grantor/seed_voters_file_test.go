package grantor

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Issue 21 item 3: TestJoiningGrantorElectsWithTheVotersItsDeadSeedShowed
// with a restart of the joining grantor after its only seed died. g3
// learned the voters from g1, g1 dies, g3 restarts (no seed answers now,
// so it proves none), and g2 comes back: g2 and g3 must elect, which
// they can only if g3 kept the voters across the restart. Before, they
// were in memory only: g3 refused g2's votes and no leader was elected
// (the wait times out). Once g3 has the configuration, the file is gone.
func TestJoiningGrantorKeepsTheVotersItsSeedShowedAcrossARestart(t *testing.T) {
	_, cfgs := stoppedSeedCluster(t)

	g1, g3, g3cfg, logs := startSilentSeedAndJoiner(t, cfgs)
	logs.wait(t, "a --join seed showed the voters of its raft configuration")
	file := filepath.Join(g3cfg.DataDir, seedVotersFile)
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the voters g1 showed are not kept in the data dir: %v", err)
	}
	g1.stop()
	g3.stop()

	logs = newLineLog()
	g3cfg.Logger = logs.logger()
	g3 = start(t, g3cfg, false)
	logs.wait(t, "kept the voters --join seeds showed before a restart", "g1", "g2", "g3")
	up, _ := g2AndG3Elect(t, cfgs, g3)
	waitRaft(t, "g3 forgets the voters g1 showed", func() bool {
		_, err := os.Stat(file)
		return errors.Is(err, os.ErrNotExist) && len(g3.seedVoters.all()) == 0
	}, up...)
}

// The file's rules: written whole and read back; a symbolic link in its
// place, or content that is not a list of server IDs per seed, refused.
func TestSeedVotersFileRules(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, seedVotersFile)
	var s seedVoters
	if err := s.load(path); err != nil || len(s.all()) != 0 {
		t.Fatalf("no file: %v, %v", err, s.all())
	}
	if changed, err := s.set("g1", []string{"g1", "g2", "g3"}); !changed || err != nil {
		t.Fatalf("set: %v, %v", changed, err)
	}
	var again seedVoters
	if err := again.load(path); err != nil || !slices.Equal(again.all(), []string{"g1", "g2", "g3"}) {
		t.Fatalf("read back: %v, %v", err, again.all())
	}
	if err := again.forget(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("forget left the file: %v", err)
	}

	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte(`{"by":{"g1":["g9"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.NodeID, cfg.DataDir, cfg.Bootstrap = "g1", dir, true
	if _, err := New(cfg); !errors.Is(err, ErrUnsafeDataDir) || !strings.Contains(err.Error(), seedVotersFile) {
		t.Fatalf("New with the file a symbolic link: %v, want ErrUnsafeDataDir naming it", err)
	}
	os.Remove(path)
	for _, bad := range []string{`{"by":{"g1":[""]}}`, `{"by":{"g1":[]}}`, `not json`} {
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		var s seedVoters
		if err := s.load(path); err == nil {
			t.Errorf("%s: loaded %v", bad, s.all())
		}
	}
}
