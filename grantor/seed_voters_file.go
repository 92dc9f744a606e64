package grantor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/leaseside/leaseside/internal/safefs"
)

// seedVotersFile is the file of the data dir that keeps the voters proven
// seeds showed a grantor that has no raft configuration yet
// (seed_voters.go), so that a restart keeps them: its only seed may have
// died meanwhile. It is written whole (a new file renamed over the old),
// opened without following a symbolic link (internal/safefs), and removed
// once a committed configuration lists the grantor.
const seedVotersFile = "seed-voters.json"

// maxSeeds bounds the seeds whose voters are kept; maxSeedVotersFile the
// file's size (maxSeeds seeds of maxSeedVoters names each is far less).
const (
	maxSeeds          = 64
	maxSeedVotersFile = 1 << 20
)

// seedVotersDoc is the file's content.
type seedVotersDoc struct {
	// By maps a seed's node ID to the voters it showed.
	By map[string][]string `json:"by"`
}

// save writes s to its file; called with s.mu held.
func (s *seedVoters) save() error {
	if s.path == "" {
		return nil
	}
	b, err := json.Marshal(seedVotersDoc{By: s.by})
	if err != nil {
		return err
	}
	tmp := s.path + ".new"
	f, err := safefs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if err = f.Truncate(0); err == nil {
		if _, err = f.Write(b); err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.path)
	}
	if err != nil {
		return fmt.Errorf("grantor: writing %s: %w", s.path, err)
	}
	return nil
}

// load reads the voters kept at path, which s keeps them in from then on;
// a missing file keeps none. A file that is a symbolic link, another
// user's or has other names is refused (safefs.ErrUnsafe); one that does
// not decode is an error.
func (s *seedVoters) load(path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.path = path
	f, err := safefs.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSeedVotersFile+1))
	if err != nil {
		return fmt.Errorf("grantor: reading %s: %w", path, err)
	}
	var doc seedVotersDoc
	switch err := json.Unmarshal(b, &doc); {
	case len(b) > maxSeedVotersFile:
		return fmt.Errorf("grantor: %s is larger than %d bytes", path, maxSeedVotersFile)
	case err != nil:
		return fmt.Errorf("grantor: %s: %w", path, err)
	case len(doc.By) > maxSeeds:
		return fmt.Errorf("grantor: %s keeps the voters of %d seeds, more than %d", path, len(doc.By), maxSeeds)
	}
	for seed, voters := range doc.By {
		if seed == "" || len(voters) == 0 || len(voters) > maxSeedVoters || !validIDs(voters) {
			return fmt.Errorf("grantor: %s: the voters of seed %q are not a list of 1 to %d server IDs", path, seed, maxSeedVoters)
		}
	}
	s.by = doc.By
	return nil
}

// validIDs reports whether every id is a server ID (not empty).
func validIDs(ids []string) bool {
	for _, id := range ids {
		if id == "" {
			return false
		}
	}
	return true
}

// forget drops the voters kept, and their file: the node has a raft
// configuration of its own.
func (s *seedVoters) forget() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		return nil
	}
	s.by = nil
	if s.path == "" {
		return nil
	}
	if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("grantor: removing %s: %w", s.path, err)
	}
	return nil
}

// loadSeedVoters reads the voters kept in the data dir dir, for New.
func (n *Node) loadSeedVoters(dir string) error {
	err := n.seedVoters.load(filepath.Join(dir, seedVotersFile))
	if errors.Is(err, safefs.ErrUnsafe) {
		return fmt.Errorf("%w: %w: remove it", ErrUnsafeDataDir, err)
	}
	if err != nil {
		return fmt.Errorf("%w (it keeps only the voters --join seeds showed this grantor: remove it)", err)
	}
	if vs := n.seedVoters.all(); len(vs) > 0 {
		n.log.Info("grantor: kept the voters --join seeds showed before a restart; until this grantor has a configuration of its own, they may speak raft to it",
			"voters", vs)
	}
	return nil
}
