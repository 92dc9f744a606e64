package grantor

import (
	"maps"
	"slices"
	"sync"
)

// halt is the FSM's onHalt: the node met a raft log entry it cannot apply
// (fsm.go). It logs why, stops acknowledging anything at once (the lessor
// acts on a state that lacks the entry), and makes Run return the
// *HaltError, which matches ErrHalted, so that the CLI exits with its own
// code and a service manager does not restart it into the same entry.
func (n *Node) halt(h *HaltError) {
	n.log.Error(h.Error(), "index", h.Index, "term", h.Term, "leader", h.Leader, "type", h.Type)
	n.lessor.stop()
	close(n.halted)
}

// maxTermLeaders bounds the terms whose leader a node remembers.
const maxTermLeaders = 64

// termLeaders remembers the leader of each of the last maxTermLeaders
// terms this node saw, for HaltError.Leader. Safe for concurrent use.
type termLeaders struct {
	mu sync.Mutex
	m  map[uint64]string
}

// note records id as the leader of term.
func (t *termLeaders) note(term uint64, id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[uint64]string{}
	}
	t.m[term] = id
	if len(t.m) > maxTermLeaders {
		delete(t.m, slices.Min(slices.Collect(maps.Keys(t.m))))
	}
}

// of returns the leader of term, "" when unknown.
func (t *termLeaders) of(term uint64) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[term]
}
