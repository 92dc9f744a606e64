package daemon

import (
	"fmt"
	"sort"
	"sync"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// interval is what one owner believed about one grant: from the moment
// it read the grant until it stopped believing (released it, ended, or
// saw it end), never past the grant's deadline as the owner knew it
// then. All instants are on the one CLOCK_BOOTTIME of this host.
type interval struct {
	name, owner, token string
	start              clockwatch.Instant
	lease              *ipc.Lease

	mu  sync.Mutex
	end clockwatch.Instant // 0 while believed
}

// finish ends the belief at at, or at the lease's deadline if that came
// first (the deadline is the latest the owner may believe: a later
// observation of the end was only late). Later calls change nothing.
func (iv *interval) finish(at clockwatch.Instant) {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	if iv.end == 0 {
		iv.end = min(at, clockwatch.Instant(iv.lease.Deadline()))
	}
}

func (iv *interval) ended() clockwatch.Instant {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	return iv.end
}

func (iv *interval) String() string {
	return fmt.Sprintf("%s token %s held by %s from %v to %v", iv.name, iv.token, iv.owner, iv.start, iv.ended())
}

// checker collects believed intervals and finds two owners believing in
// one name at once.
type checker struct {
	mu  sync.Mutex
	ivs []*interval
}

// begin records that owner read grant l of name now.
func (c *checker) begin(name, owner string, l *ipc.Lease) *interval {
	iv := &interval{name: name, owner: owner, token: l.Token, start: clockwatch.System.Now(), lease: l}
	c.mu.Lock()
	c.ivs = append(c.ivs, iv)
	c.mu.Unlock()
	return iv
}

// overlaps finishes every open interval at end and returns every pair of
// intervals of one name, held by different owners, that overlap.
func (c *checker) overlaps(end clockwatch.Instant) []string {
	c.mu.Lock()
	ivs := append([]*interval(nil), c.ivs...)
	c.mu.Unlock()
	byName := map[string][]*interval{}
	for _, iv := range ivs {
		iv.finish(end)
		byName[iv.name] = append(byName[iv.name], iv)
	}
	var bad []string
	for _, list := range byName {
		sort.Slice(list, func(i, j int) bool { return list[i].start < list[j].start })
		var open []*interval // intervals that may still overlap the next start
		for _, iv := range list {
			kept := open[:0]
			for _, o := range open {
				if o.ended() > iv.start {
					kept = append(kept, o)
				}
			}
			open = kept
			for _, o := range open {
				if o.owner != iv.owner {
					bad = append(bad, fmt.Sprintf("overlap of %v: %s, and %s", o.ended().Sub(iv.start), o, iv))
				}
			}
			open = append(open, iv)
		}
	}
	return bad
}

// count is how many intervals were recorded.
func (c *checker) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ivs)
}
