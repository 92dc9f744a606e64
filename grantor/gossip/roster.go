package gossip

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Member states as Members reports them.
const (
	// StateAlive is a member memberlist considers alive (or only suspects).
	StateAlive = "alive"
	// StateLeaving is a member that announced it is leaving.
	StateLeaving = "leaving"
	// StateLeft is a member that left gracefully (Leave).
	StateLeft = "left"
	// StateDead is a member memberlist declared dead: it stopped answering
	// without leaving. This is a discovery hint only; it never shortens a
	// lease.
	StateDead = "dead"
)

// MemberInfo is one member as this member sees it.
type MemberInfo struct {
	// Name is the member's unique gossip name.
	Name string
	// Addr is its gossip address (host:port).
	Addr string
	// State is StateAlive, StateLeaving, StateLeft or StateDead.
	State string
	// Meta is what it gossips about itself; zero when MetaErr is set.
	Meta Meta
	// MetaErr is set when its metadata could not be decoded (for instance
	// an encoding version this build does not know; see ErrMetaVersion).
	MetaErr error
	// Appearance numbers the member's spells of being listed alive (or
	// leaving), as this member saw them: it changes when the member joins,
	// comes back after it was declared dead or left, or gossips another
	// Meta.Instance (it restarted before memberlist declared it dead), and
	// stays while the same run only updates its metadata. The numbers are
	// this member's own, never reused; compare them only with each other.
	Appearance uint64
}

type entry struct {
	info    MemberInfo
	leaving bool
	seq     uint64    // roster sequence number of its last change
	gone    time.Time // when it left or died; zero while alive
}

// roster is this member's table of the cluster, fed by memberlist's events.
// The time.Time instants it is given (time.Now) decide only how long a
// member that left or died stays listed (Config.ForgetAfter): display,
// never a lease decision, which is why they need no clockwatch.Clock.
// memberlist calls the event methods with its node lock held, so the node
// is read (and its metadata decoded) here and never kept; roster never
// calls into memberlist, so the two locks cannot deadlock.
type roster struct {
	forgetAfter time.Duration

	mu      sync.Mutex
	seq     uint64
	byName  map[string]*entry
	changed chan struct{} // closed and replaced at every change
}

func newRoster(forgetAfter time.Duration) *roster {
	return &roster{forgetAfter: forgetAfter, byName: map[string]*entry{}, changed: make(chan struct{})}
}

// changes returns a channel that is closed at the next change.
func (r *roster) changes() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// bumpLocked records a change and wakes every waiter.
func (r *roster) bumpLocked() uint64 {
	r.seq++
	close(r.changed)
	r.changed = make(chan struct{})
	return r.seq
}

// alive records a member that joined or updated its metadata.
func (r *roster) alive(name, addr string, rawMeta []byte) {
	meta, leaving, err := decodeMeta(rawMeta)
	state := StateAlive
	if leaving {
		state = StateLeaving
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e := &entry{
		info:    MemberInfo{Name: name, Addr: addr, State: state, Meta: meta, MetaErr: err},
		leaving: leaving,
	}
	e.seq = r.bumpLocked()
	e.info.Appearance = e.seq
	if old := r.byName[name]; old != nil && old.gone.IsZero() && old.info.MetaErr == nil && err == nil && old.info.Meta.Instance == meta.Instance {
		e.info.Appearance = old.info.Appearance // the same run, updating its metadata
	}
	r.byName[name] = e
}

// gone records that memberlist declared a member dead, which it also does
// for a member that left: one that announced leaving is taken as left.
func (r *roster) gone(name string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.byName[name]
	if !ok {
		return
	}
	if e.leaving {
		e.info.State = StateLeft
	} else {
		e.info.State = StateDead
	}
	e.gone = now
	e.seq = r.bumpLocked()
}

// snapshot returns copies of the entries, sorted by name, after dropping
// the members gone for longer than forgetAfter.
func (r *roster) snapshot(now time.Time) []entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]entry, 0, len(r.byName))
	for name, e := range r.byName {
		if !e.gone.IsZero() && now.Sub(e.gone) > r.forgetAfter {
			delete(r.byName, name)
			continue
		}
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b entry) int { return cmp.Compare(a.info.Name, b.info.Name) })
	return out
}

// grantors implements Member.Grantors.
func (r *roster) grantors(now time.Time) (rpcAddrs []string, leaderRPC string) {
	var views []grantorView
	for _, e := range r.snapshot(now) {
		if !isAliveGrantor(e.info) {
			continue
		}
		mt := e.info.Meta
		rpcAddrs = append(rpcAddrs, mt.RPCAddr)
		views = append(views, grantorView{nodeID: mt.NodeID, rpcAddr: mt.RPCAddr, leaderID: mt.LeaderID, seq: e.seq})
	}
	slices.Sort(rpcAddrs)
	return rpcAddrs, resolveLeader(views)
}

func isAliveGrantor(in MemberInfo) bool {
	return in.State == StateAlive && in.MetaErr == nil && in.Meta.Role == RoleGrantor && in.Meta.RPCAddr != ""
}

// events adapts the roster to memberlist.EventDelegate.
type events struct{ r *roster }

var _ memberlist.EventDelegate = events{}

func (ev events) NotifyJoin(n *memberlist.Node)   { ev.r.alive(n.Name, n.Address(), n.Meta) }
func (ev events) NotifyUpdate(n *memberlist.Node) { ev.r.alive(n.Name, n.Address(), n.Meta) }
func (ev events) NotifyLeave(n *memberlist.Node)  { ev.r.gone(n.Name, time.Now()) }

// grantorView is what leader resolution needs of one alive grantor.
type grantorView struct {
	nodeID, rpcAddr, leaderID string
	seq                       uint64 // recency of its last metadata change
}

// resolveLeader picks the RPC address of the grantor the claims point at,
// or "". Each grantor's LeaderID is a claim. A grantor that claims itself
// is preferred over any other; among candidates, more claims win, then the
// most recent claim, then the lower NodeID (so every member agrees). A
// claim for an ID no alive grantor has is ignored.
func resolveLeader(gs []grantorView) string {
	support := map[string]int{}
	latest := map[string]uint64{}
	for _, g := range gs {
		if g.leaderID == "" {
			continue
		}
		support[g.leaderID]++
		latest[g.leaderID] = max(latest[g.leaderID], g.seq)
	}
	var best *grantorView
	better := func(a, b *grantorView) bool { // is a better than b?
		if sa, sb := a.leaderID == a.nodeID, b.leaderID == b.nodeID; sa != sb {
			return sa
		}
		if support[a.nodeID] != support[b.nodeID] {
			return support[a.nodeID] > support[b.nodeID]
		}
		if latest[a.nodeID] != latest[b.nodeID] {
			return latest[a.nodeID] > latest[b.nodeID]
		}
		return a.nodeID < b.nodeID
	}
	for i := range gs {
		c := &gs[i]
		if support[c.nodeID] == 0 || c.rpcAddr == "" {
			continue
		}
		if best == nil || better(c, best) {
			best = c
		}
	}
	if best == nil {
		return ""
	}
	return best.rpcAddr
}
