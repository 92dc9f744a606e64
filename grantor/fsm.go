package grantor

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// maxOutstanding bounds the remembered outcomes per session: a session that
// never raises first_unacked cannot grow the FSM without limit.
const maxOutstanding = 4096

// leaseRecord is one held lease in the FSM. A lease that is free has no
// record.
type leaseRecord struct {
	Session string        `json:"session"`
	Owner   string        `json:"owner"`
	Token   uint64        `json:"token"`
	TTL     time.Duration `json:"ttl_ns"`
	// Value is the grant's value (elections, semaphore.go); written to
	// snapshots of format 3 only.
	Value string `json:"value,omitempty"`
	// LockDelay is how long the name stays delayed after this grant ends
	// without a release (lockdelay.go); written to snapshots of format 4
	// only.
	LockDelay time.Duration `json:"lock_delay_ns,omitempty"`
}

// outcome is a remembered result of one request of a session.
type outcome struct {
	Kind  cmdType `json:"kind"`
	Lease string  `json:"lease"`
	Owner string  `json:"owner"`
	Token uint64  `json:"token"`
	// Released says a release freed the lease, or a proclaim changed
	// the grant's value.
	Released bool `json:"released,omitempty"`
	// Refused says an Acquire was refused for good (outcome.go); Token
	// is then 0.
	Refused bool `json:"refused,omitempty"`
}

// sessionRecord is a session's idempotency state (Ongaro's client
// sessions): outcomes by seq, the floor below which it forgot them, and
// the seqs above the floor it forgot because the session listed them in
// also_received (received.go). A request with a forgotten seq is stale.
type sessionRecord struct {
	Floor     uint64             `json:"floor"`
	Outcomes  map[uint64]outcome `json:"outcomes"`
	Forgotten seqRanges          `json:"forgotten,omitempty"`
	// Owner is the identity name that opened the session (ownership.go);
	// "" for a session no entry with an identity has named yet.
	Owner string `json:"owner,omitempty"`
}

// fsmState is everything the FSM replicates and snapshots.
type fsmState struct {
	// LastToken is the highest fencing token ever granted. It only grows.
	LastToken uint64                    `json:"last_token"`
	Leases    map[string]leaseRecord    `json:"leases"`
	Sessions  map[string]*sessionRecord `json:"sessions"`
	// Nodes maps raft server IDs to gRPC addresses, for NotLeader hints.
	Nodes map[string]string `json:"nodes"`
	// NodeCmds maps raft server IDs to the newest command type each has
	// registered that it applies (versions.go); absent means baselineCmd.
	// Grantors built before it ignore the key in snapshots.
	NodeCmds map[string]cmdType `json:"node_cmds,omitempty"`
	// Sems are the semaphores in force (semaphore.go): names held by
	// grants of cmdAcquire5 with a limit above 1. Exclusive grants are in
	// Leases. Written to snapshots of format 3 only.
	Sems map[string]*semRecord `json:"sems,omitempty"`
	// Delays are the lock-delays in force per name (lockdelay.go): each
	// takes the place of the grant whose end started it, for an
	// exclusive lease the whole name, for a semaphore one slot, until
	// the leader ends it. Written to snapshots of format 4 only.
	Delays map[string][]delayRecord `json:"delays,omitempty"`
}

func newFSMState() fsmState {
	return fsmState{
		Leases:   map[string]leaseRecord{},
		Sessions: map[string]*sessionRecord{},
		Nodes:    map[string]string{},
		NodeCmds: map[string]cmdType{},
		Sems:     map[string]*semRecord{},
		Delays:   map[string][]delayRecord{},
	}
}

// eventKind says what changed in an fsmEvent.
type eventKind uint8

const (
	evGranted    eventKind = iota + 1 // a lease was granted, or re-granted to its holder
	evFreed                           // a lease was released or revoked
	evRestored                        // the whole state was replaced from a snapshot
	evRegistered                      // a node's gRPC address was recorded (Lease holds the node ID)
	evProclaimed                      // a grant's value changed (Rec is the grant after it)
	evDelayed                         // a name entered its lock-delay (Rec is the grant that ended)
	evUndelayed                       // a name's lock-delay ended
)

// freeWhy says why a grant ended, for watchers (watch.go).
type freeWhy uint8

const (
	freedReleased freeWhy = iota + 1 // its holder released it
	freedExpired                     // its session expired (revoke or expire-session), or its sidecar ended it as lapsed (releaseCmd.Lapsed)
)

// fsmEvent tells the lessor what an applied entry changed. The FSM's
// decisions never depend on who listens.
type fsmEvent struct {
	Kind  eventKind
	Lease string
	Rec   leaseRecord // the lease after evGranted, before evFreed
	// Index is the raft index of the entry; Why says why a grant was
	// freed; Replaced is the grant of the same holder that an evGranted
	// ended (a re-acquire); Retry marks an evGranted that only repeats a
	// grant for a retried request; HolderName is the identity name of
	// Rec's session.
	Index      uint64
	Why        freeWhy
	Replaced   uint64
	Retry      bool
	HolderName string
}

// fsm is the grantor's raft.FSM: the lease table, the token counter and the
// session records. Apply is deterministic and reads no clock.
//
// Apply, Snapshot and Restore are called by raft from one goroutine; the
// read methods may be called from any goroutine.
type fsm struct {
	// observe, if set, is called after each change, from the goroutine
	// that applied it and without f.mu held. Set before raft starts.
	observe func(fsmEvent)
	// onHalt, if set, is called once when the FSM halts, from the
	// goroutine that applied the entry and without f.mu held.
	onHalt func(*HaltError)
	// leaderOf, if set, names the leader of a term, "" when unknown, for
	// a HaltError. Set before raft starts.
	leaderOf func(term uint64) string
	// onConfig, if set, is told each committed raft configuration
	// (StoreConfiguration). Set before raft starts.
	onConfig func(raft.Configuration)

	mu sync.RWMutex
	st fsmState
	// bySession indexes the leases of each session (sessions.go), byOwner
	// what each identity name holds (usage.go); both derived from
	// st.Leases and st.Sessions.
	bySession map[string]*sessionLeases
	byOwner   map[string]*ownerUsage
	// evs collects the events of the entry being applied (one goroutine).
	evs []fsmEvent
	// halted is set at the first entry that cannot be decoded; from then
	// on nothing is applied, restored or snapshotted.
	halted *HaltError
	// applied is the index of the last entry applied (a restore does not
	// move it): watchers order snapshots and changes by it (watch.go).
	applied uint64
}

var _ raft.ConfigurationStore = (*fsm)(nil)

func newFSM() *fsm {
	return &fsm{st: newFSMState(), bySession: map[string]*sessionLeases{}, byOwner: map[string]*ownerUsage{}}
}

// Apply applies one log entry. It returns *acquireResult, *releaseResult,
// *revokeResult, nil, or an error that belongs to the request (stale, seq
// reused, too many outstanding) and is the same on every replica.
//
// An entry this binary cannot decode halts the FSM (a *HaltError): that
// entry and every later one are not applied, and Snapshot and Restore
// refuse, so the state on disk stays what it was before the entry.
// Applying some entries and not others would let replicas diverge, which
// is worse for leases than a node that stops until it is upgraded; and a
// panic would only restart into the same entry, a crash loop.
func (f *fsm) Apply(l *raft.Log) any {
	f.mu.Lock()
	if f.halted != nil {
		h := f.halted
		f.mu.Unlock()
		return h
	}
	t, body, err := decodeCmd(l.Data)
	if err != nil {
		h := &HaltError{Index: l.Index, Term: l.Term, Type: uint8(t), Unknown: errors.Is(err, errUnknownCmd), Err: err}
		if h.Unknown {
			h.RegisteredBy = f.registeredFor(t)
		}
		if f.leaderOf != nil {
			h.Leader = f.leaderOf(l.Term)
		}
		f.halted = h
		f.mu.Unlock()
		if f.onHalt != nil {
			f.onHalt(h)
		}
		return h
	}
	t = t.meaning() // a binary type applies as the JSON type it encodes
	var res any
	f.evs = f.evs[:0]
	f.applied = l.Index
	dropShared(t, body)
	switch c := body.(type) {
	case *acquireCmd:
		if t == cmdAcquire {
			c.ID.AlsoReceived = nil // only cmdAcquire2 and later forget
		}
		if t < cmdAcquire4 {
			c.Identity, c.Limit = "", 0
		}
		if t < cmdAcquire5 {
			oldAcquire(c)
		}
		if t < cmdAcquire7 {
			c.LockDelay = 0
		}
		if t < cmdAcquire8 {
			c.Final = false
		}
		_, existed := f.st.Sessions[c.ID.Session]
		if t == cmdWithdraw {
			res = f.applyWithdraw(c)
		} else {
			res = f.applyAcquire(c, t >= cmdAcquire3)
		}
		if t >= cmdAcquire6 && !existed {
			f.dropEmptySession(c.ID.Session)
		}
	case *releaseCmd:
		if t == cmdRelease {
			c.ID.AlsoReceived = nil
		}
		if t < cmdRelease3 {
			c.Identity = ""
		}
		if t < cmdRelease4 {
			c.Next = nil
		}
		if t < cmdRelease5 && c.Next != nil {
			oldAcquire(c.Next)
		}
		if t < cmdRelease6 {
			c.OwnerEnded = false
			if c.Next != nil {
				c.Next.LockDelay = 0
			}
		}
		res = f.applyRelease(c)
	case *revokeCmd:
		if t < cmdRevoke2 {
			c.By = ""
		}
		res = f.applyRevoke(c)
	case *expireSessionCmd:
		if t < cmdExpireSession2 {
			for i := range c.Next {
				oldAcquire(&c.Next[i])
			}
		}
		res = f.applyExpireSession(c, l.Term)
	case *proclaimCmd:
		res = f.applyProclaim(c)
	case *endDelayCmd:
		res = f.applyEndDelay(c)
	case *endGrantCmd:
		res = f.applyEndGrant(c)
	case *closeSessionCmd:
		if t == cmdCloseSession || f.closable(c) {
			f.deleteSession(c.Session)
		}
	case *registerNodeCmd:
		f.st.Nodes[c.NodeID] = c.RPCAddr
		if c.MaxCmd > baselineCmd {
			f.st.NodeCmds[c.NodeID] = c.MaxCmd
		} else {
			delete(f.st.NodeCmds, c.NodeID) // an older binary registered
		}
		f.event(fsmEvent{Kind: evRegistered, Lease: c.NodeID})
	default:
		panic(fmt.Sprintf("grantor: raft log entry %d: no apply for %v", l.Index, t)) // decodeCmd and this switch disagree: a bug
	}
	f.mu.Unlock()
	if f.observe != nil {
		for _, ev := range f.evs {
			f.observe(ev)
		}
	}
	return res
}

// StoreConfiguration implements raft.ConfigurationStore: raft calls it, in
// log order, for each committed configuration entry. The FSM keeps nothing
// of it (the configuration is raft's, and snapshotted by raft); it tells
// onConfig, which the node uses to remember removed servers (removed.go).
// A halted FSM tells nothing more.
func (f *fsm) StoreConfiguration(_ uint64, c raft.Configuration) {
	f.mu.RLock()
	halted := f.halted != nil
	f.mu.RUnlock()
	if !halted && f.onConfig != nil {
		f.onConfig(c)
	}
}

// event records a change for the observer, told after the apply.
func (f *fsm) event(ev fsmEvent) {
	ev.Index = f.applied
	if ev.Rec.Session != "" {
		ev.HolderName = f.ownerOf(ev.Rec.Session)
	}
	f.evs = append(f.evs, ev)
}

// session returns the record of id.Session, creating it, after checking
// that identity may use it (ownership.go) and that id is not stale, raising
// the floor to id.FirstUnacked and forgetting the outcomes of
// id.AlsoReceived. Nothing changes when it fails.
func (f *fsm) session(id requestID, identity string) (*sessionRecord, error) {
	if id.Session == "" || id.Seq == 0 {
		return nil, invalid("id", "session and seq are required")
	}
	s := f.st.Sessions[id.Session]
	if err := checkOwner(s, id.Session, identity); err != nil {
		return nil, err
	}
	if s == nil {
		s = &sessionRecord{Outcomes: map[uint64]outcome{}, Owner: identity}
		f.putSession(id.Session, s)
	}
	if id.Seq < s.Floor {
		return nil, &StaleRequestError{Session: id.Session, Seq: id.Seq, Floor: s.Floor}
	}
	if s.Forgotten.contains(id.Seq) {
		return nil, &StaleRequestError{Session: id.Session, Seq: id.Seq, Floor: s.Floor, Received: true}
	}
	f.adopt(id.Session, s, identity)
	// The session has every reply below FirstUnacked; a floor above the
	// request's own seq would be nonsense, so it is capped there.
	s.raiseFloor(min(id.FirstUnacked, id.Seq))
	s.forget(id)
	return s, nil
}

// dropEmptySession deletes the record of session, which the entry being
// applied opened, when the entry left it nothing to remember: no outcome
// (an Acquire refused without Final remembers none) and no grant (review R8-2: each
// refused Acquire under a fresh session id left a record for an hour, in
// every replica and snapshot). Its floor and forgotten seqs go with it,
// as when an idle session is closed. cmdAcquire6 and later.
func (f *fsm) dropEmptySession(session string) {
	if s := f.st.Sessions[session]; s != nil && len(s.Outcomes) == 0 && f.bySession[session] == nil {
		f.deleteSession(session)
	}
}

// applyAcquire grants c when the lease is free. When c's owner holds it
// already, newToken (cmdAcquire3) makes that a new grant: the old one ends
// and the new one starts with the next token and c's term, in this one
// entry, so a Release, Revoke or reply that names the old token cannot
// touch the new grant (TEAM.md decision 1). Older entries kept the token
// and took c's term.
func (f *fsm) applyAcquire(c *acquireCmd, newToken bool) any {
	s, err := f.session(c.ID, c.Identity)
	if err != nil {
		return err
	}
	if c.Shared || f.sharedLocked(c.Lease) {
		return f.acquireRW(s, c) // shared.go
	}
	if c.MaxHolders > 1 || f.st.Sems[c.Lease] != nil {
		return f.acquireSlot(s, c) // semaphore.go
	}
	if r, ok := f.remembered(s, c); ok {
		return r
	}
	cur, held := f.st.Leases[c.Lease]
	if len(s.Outcomes) >= maxOutstanding {
		return fmt.Errorf("%w: session %q has %d", ErrTooManyOutstanding, c.ID.Session, len(s.Outcomes))
	}
	var replaced uint64
	switch ds := f.st.Delays[c.Lease]; {
	case len(ds) > 0:
		return f.refuse(s, c, delayedRefusal(ds[0]))
	case !held:
		if err := f.checkLimit(s.Owner, c.Limit); err != nil {
			return err // nothing changed: not remembered
		}
		f.st.LastToken++
		cur = leaseRecord{Session: f.internSession(c.ID.Session), Owner: c.Owner, Token: f.st.LastToken, TTL: c.TTL, Value: c.Value, LockDelay: c.LockDelay}
		f.st.Leases[c.Lease] = cur
		f.hold(c.Lease, cur)
	case cur.Session == c.ID.Session && cur.Owner == c.Owner && newToken:
		// The holder asks again: its old grant ends, a new one starts.
		f.unhold(c.Lease, cur)
		replaced = cur.Token
		f.st.LastToken++
		cur.Token, cur.TTL, cur.Value, cur.LockDelay = f.st.LastToken, c.TTL, c.Value, c.LockDelay
		f.st.Leases[c.Lease] = cur
		f.hold(c.Lease, cur)
	case cur.Session == c.ID.Session && cur.Owner == c.Owner:
		// cmdAcquire and cmdAcquire2: same grant, same token, new term.
		cur.TTL = c.TTL
		f.st.Leases[c.Lease] = cur
	default:
		// Not granted: nothing changed; remembered only when Final (a
		// retry is otherwise evaluated afresh, and can grant at most once).
		return f.refuse(s, c, f.notGranted(cur))
	}
	s.Outcomes[c.ID.Seq] = outcome{Kind: cmdAcquire, Lease: c.Lease, Owner: c.Owner, Token: cur.Token}
	f.event(fsmEvent{Kind: evGranted, Lease: c.Lease, Rec: cur, Replaced: replaced})
	return &acquireResult{Granted: true, Token: cur.Token, TTL: cur.TTL, Limit: 1, Holders: 1}
}

// notGranted answers an Acquire of a lease cur holds: its token and the
// identity name of its session, never its session or owner ids.
func (f *fsm) notGranted(cur leaseRecord) *acquireResult {
	r := &acquireResult{Token: cur.Token, Limit: 1}
	if cur.Token != 0 {
		r.Holders = 1
	}
	if s := f.st.Sessions[cur.Session]; s != nil {
		r.HolderName = s.Owner
	}
	return r
}

// applyRelease frees a lease its session and owner hold with the token
// named. A cmdRelease4 may carry the acquire of the lease's first waiter
// (Next), which is applied in this same entry when the release freed the
// lease: a handoff is one raft entry (handoff.go).
func (f *fsm) applyRelease(c *releaseCmd) any {
	s, err := f.session(c.ID, c.Identity)
	if err != nil {
		return err
	}
	if o, dup := s.Outcomes[c.ID.Seq]; dup {
		if o.Kind != cmdRelease || o.Lease != c.Lease || o.Owner != c.Owner || o.Token != c.Token {
			return fmt.Errorf("%w: seq %d was %v of %q", ErrSeqReused, c.ID.Seq, o.Kind, o.Lease)
		}
		return &releaseResult{Released: o.Released}
	}
	if len(s.Outcomes) >= maxOutstanding {
		return fmt.Errorf("%w: session %q has %d", ErrTooManyOutstanding, c.ID.Session, len(s.Outcomes))
	}
	cur, held := f.grantLocked(c.Lease, c.Token)
	released := held && cur.Session == c.ID.Session && cur.Owner == c.Owner
	s.Outcomes[c.ID.Seq] = outcome{Kind: cmdRelease, Lease: c.Lease, Owner: c.Owner, Token: c.Token, Released: released}
	res := &releaseResult{Released: released}
	if released {
		why := freedReleased
		if c.Lapsed {
			why = freedExpired
		}
		f.end(c.Lease, cur, why, c.OwnerEnded)
		res.Next = f.handOff(c.Lease, c.Next)
	}
	return res
}

func (f *fsm) applyRevoke(c *revokeCmd) any {
	cur, held := f.grantLocked(c.Lease, c.Token)
	if !held {
		return &revokeResult{}
	}
	if c.By != "" {
		cur.LockDelay = operatorDelay(cur) // revoke.go
	}
	f.end(c.Lease, cur, freedExpired, true)
	return &revokeResult{Revoked: true}
}

// free ends the grant cur of lease, an exclusive grant or a semaphore's.
func (f *fsm) free(lease string, cur leaseRecord, why freeWhy) {
	if sem := f.st.Sems[lease]; sem != nil {
		sem.remove(cur.Token)
		if len(sem.Holders) == 0 {
			delete(f.st.Sems, lease)
		}
	} else {
		delete(f.st.Leases, lease)
	}
	f.unhold(lease, cur)
	f.event(fsmEvent{Kind: evFreed, Lease: lease, Rec: cur, Why: why})
}

// Read accessors, for the lessor and the service.

// registeredFor returns the raft server that registered applying command
// type t (versions.go), the lowest ID if several did, "" if none did.
// Called with f.mu held.
func (f *fsm) registeredFor(t cmdType) string {
	by := ""
	for id, top := range f.st.NodeCmds {
		if top >= t && (by == "" || id < by) {
			by = id
		}
	}
	return by
}

// haltErr returns why the FSM halted, nil while it applies.
func (f *fsm) haltErr() *HaltError {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.halted
}

// lease returns the record of a held lease.
func (f *fsm) lease(name string) (leaseRecord, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l, ok := f.st.Leases[name]
	return l, ok
}

// leaseCount returns the number of grants that stand: exclusive leases
// and semaphore holders.
func (f *fsm) leaseCount() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := len(f.st.Leases)
	for _, sem := range f.st.Sems {
		n += len(sem.Holders)
	}
	return n
}

// sessions returns the names of the sessions with records.
func (f *fsm) sessions() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := make([]string, 0, len(f.st.Sessions))
	for k := range f.st.Sessions {
		s = append(s, k)
	}
	return s
}

// holdsLeases reports whether session holds any lease.
func (f *fsm) holdsLeases(session string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.bySession[session] != nil
}

// hasSession reports whether session has idempotency records.
func (f *fsm) hasSession(session string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, ok := f.st.Sessions[session]
	return ok
}

// hasOutcome reports whether the outcome of (session, seq) is remembered.
func (f *fsm) hasOutcome(session string, seq uint64) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.st.Sessions[session]
	if s == nil {
		return false
	}
	_, ok := s.Outcomes[seq]
	return ok
}

// lastToken returns the token counter.
func (f *fsm) lastToken() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.LastToken
}

// nodeCmd returns the newest command type a raft server registered that
// it applies.
func (f *fsm) nodeCmd(id string) cmdType {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if t, ok := f.st.NodeCmds[id]; ok {
		return t
	}
	return baselineCmd
}

// nodeAddr returns the gRPC address registered for a raft server ID.
func (f *fsm) nodeAddr(id string) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.Nodes[id]
}
