package grantor

import (
	"sync"

	"github.com/hashicorp/raft"

	"github.com/leaseside/leaseside/grantor/gossip"
)

// removedServers remembers the grantors taken out of the raft
// configuration while gossip still listed them alive, so that
// reconciliation does not add them straight back. A grantor killed a
// moment ago is alive in gossip for seconds (memberlist must first
// suspect it, then declare it dead), and `leaseside members remove` right
// after the kill would not stick (chaos finding F3).
//
// It keeps, per node ID, the gossip Appearance of the member that was
// alive at the removal. Reconciliation keeps such a grantor out while that
// same appearance is the one alive: it is added again once gossip has seen
// it leave or die and come back, or it comes back as another run (a
// restart, a new Meta.Instance), or another member joins with its node ID.
//
// Every node keeps its own (gossip is never a safety input, and an
// appearance number is one member's view): the leader notes a removal it
// is asked for before proposing it (noteRemoval), so its own
// reconciliation cannot race the change; every node, followers included,
// notes each server that leaves a committed configuration (configured),
// so that whoever leads next keeps it out too.
type removedServers struct {
	mu sync.Mutex
	// out maps a node ID to the appearance that is kept out.
	out map[string]uint64
	// told is the appearance reconciliation last logged keeping out.
	told map[string]uint64
	// prev is the last committed configuration seen, nil before the first.
	prev map[string]bool
}

func newRemovedServers() *removedServers {
	return &removedServers{out: map[string]uint64{}, told: map[string]uint64{}}
}

// aliveGrantor returns the alive gossip member with node ID id, if any.
func aliveGrantor(ms []gossip.MemberInfo, id string) (gossip.MemberInfo, bool) {
	g := gossipGrantors(ms)[id]
	if g == nil || g.alive == nil {
		return gossip.MemberInfo{}, false
	}
	return *g.alive, true
}

// noteRemoval notes that id is being taken out of the configuration: if
// gossip lists it alive, that appearance stays out.
func (r *removedServers) noteRemoval(id string, ms []gossip.MemberInfo) {
	in, ok := aliveGrantor(ms, id)
	if !ok {
		return // dead or gone already: its return is a new appearance
	}
	r.mu.Lock()
	r.out[id] = in.Appearance
	r.mu.Unlock()
}

// configured is told every committed configuration, in log order (raft's
// FSM goroutine). A server that left it since the last one is noted as
// removed; one that entered it is no longer kept out (it was added back
// on purpose).
func (r *removedServers) configured(c raft.Configuration, ms func() []gossip.MemberInfo) {
	now := make(map[string]bool, len(c.Servers))
	for _, s := range c.Servers {
		now[string(s.ID)] = true
	}
	r.mu.Lock()
	prev := r.prev
	r.prev = now
	if prev != nil {
		for id := range now {
			if !prev[id] {
				delete(r.out, id)
			}
		}
	}
	r.mu.Unlock()
	for id := range prev {
		if !now[id] {
			r.noteRemoval(id, ms())
		}
	}
}

// keepsOut reports whether reconciliation must not add alive member in,
// the grantor id: it is the appearance that was alive when id was removed.
// The first time it says so for an appearance, it also says to log it.
func (r *removedServers) keepsOut(id string, in gossip.MemberInfo) (out, tell bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.out[id]
	if !ok {
		return false, false
	}
	if a != in.Appearance {
		delete(r.out, id)
		delete(r.told, id)
		return false, false
	}
	tell = r.told[id] != a
	r.told[id] = a
	return true, tell
}

// forget drops what is kept out for the node IDs gossip lists no alive
// member of: whatever comes back with them is a new appearance.
func (r *removedServers) forget(alive func(id string) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range r.out {
		if !alive(id) {
			delete(r.out, id)
			delete(r.told, id)
		}
	}
}
