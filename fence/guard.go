package fence

import (
	"errors"
	"fmt"
	"sync"
)

// ErrStaleToken is matched (errors.Is) by a *StaleTokenError.
var ErrStaleToken = errors.New("fence: stale token")

// StaleTokenError says a write carried a token lower than one the
// resource had already seen for that lease.
type StaleTokenError struct {
	Lease   string
	Token   uint64
	Highest uint64
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("fence: token %d for %q is below %d, already seen: the writer lost the lease", e.Token, e.Lease, e.Highest)
}

// Is makes errors.Is(err, ErrStaleToken) true.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }

// Guard keeps the highest token seen per lease and refuses lower ones.
// Equal tokens pass: one holder makes many writes under one token. The
// zero value is ready to use; it is safe for concurrent use.
//
// Admit must be called under the same lock, or in the same transaction,
// as the write it guards; otherwise a newer writer can slip in between the
// check and the write. Guard.Do does that for writes in this process.
type Guard struct {
	mu      sync.Mutex
	highest map[string]uint64
}

// Admit records token for lease and returns nil, or returns a
// *StaleTokenError if a higher token was seen.
func (g *Guard) Admit(lease string, token uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.admitLocked(lease, token)
}

func (g *Guard) admitLocked(lease string, token uint64) error {
	if g.highest == nil {
		g.highest = map[string]uint64{}
	}
	if h := g.highest[lease]; token < h {
		return &StaleTokenError{Lease: lease, Token: token, Highest: h}
	}
	g.highest[lease] = token
	return nil
}

// Do runs write if token is admitted, holding the guard's lock so that no
// other write of the guard interleaves between the check and the write.
func (g *Guard) Do(lease string, token uint64, write func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.admitLocked(lease, token); err != nil {
		return err
	}
	return write()
}

// Highest returns the highest token seen for lease (0 if none).
func (g *Guard) Highest(lease string) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.highest[lease]
}
