package grantor

import (
	"sync"

	"github.com/leaseside/leaseside/clockwatch"
)

// claimWarnEvery is how often the node log may warn of the refusals of
// one gossip claim to be a grantor (one raft address, node ID and
// reason), as the audit trail sums them up (refusedClaim).
const claimWarnEvery = raftRefusalInterval

// maxClaimWarnKeys bounds the claims claimWarnings remembers; past it,
// refusals of claims it does not remember are not logged (the audit trail
// still counts them).
const maxClaimWarnKeys = 256

// claimWarnings limits the node log's warnings of refused gossip claims
// to one per claim and claimWarnEvery: anyone with the gossip key starts
// a reconciliation pass at every gossip change, and each pass refuses
// every claim again (issue 21). Safe for concurrent use.
type claimWarnings struct {
	clock clockwatch.Clock
	mu    sync.Mutex
	last  map[claimKey]*claimWarn
}

// claimKey is one claim and why it was refused.
type claimKey struct{ raftAddr, nodeID, reason string }

// claimWarn is when a claim was last logged, how many of its refusals
// were not logged since, and how many were noted in all.
type claimWarn struct {
	at       clockwatch.Instant
	unlogged int
	total    int
}

// note records one refusal of claim k, and reports whether to log it
// now, and how many of its refusals were not logged since its last line.
func (w *claimWarnings) note(k claimKey) (log bool, unlogged int) {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.last[k]; ok {
		c.total++
		if now.Sub(c.at) < claimWarnEvery {
			c.unlogged++
			return false, 0
		}
		unlogged = c.unlogged
		c.at, c.unlogged = now, 0
		return true, unlogged
	}
	if w.last == nil {
		w.last = map[claimKey]*claimWarn{}
	}
	if len(w.last) >= maxClaimWarnKeys {
		for key, c := range w.last {
			if now.Sub(c.at) >= claimWarnEvery {
				delete(w.last, key)
			}
		}
		if len(w.last) >= maxClaimWarnKeys {
			return false, 0
		}
	}
	w.last[k] = &claimWarn{at: now, total: 1}
	return true, 0
}

// claimRefusedLine starts the node log's warning of a refused gossip
// claim.
const claimRefusedLine = "grantor: not adding a grantor gossip told of: "

// warnClaim logs that the claim of gossip member id, at raftAddr, to be a
// grantor was refused for reason, unless that claim was logged for that
// reason less than claimWarnEvery ago; the line counts the refusals not
// logged since the last one (unlogged_refusals). attrs are the line's
// other attributes.
func (n *Node) warnClaim(id, raftAddr, reason string, attrs ...any) {
	log, unlogged := n.claimWarns.note(claimKey{raftAddr: raftAddr, nodeID: id, reason: reason})
	if !log {
		return
	}
	n.log.Warn(claimRefusedLine+reason, append([]any{"node_id", id, "raft_addr", raftAddr, "unlogged_refusals", unlogged}, attrs...)...)
}
