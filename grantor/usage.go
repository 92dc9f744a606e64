package grantor

// The replicated state's part of the accounts (account.go): what the FSM
// holds for each identity name (sessionRecord.Owner), counted as entries
// are applied and rebuilt by a restore, the same on every replica.

// ownerUsage is what the FSM holds for one identity name: its sessions
// (their outcomes are counted from them), its live grants and their value
// bytes, and the names its grants left in a lock-delay (lockdelay.go),
// which count as its leases until the delay ends. Derived state, under
// fsm.mu.
type ownerUsage struct {
	sessions                   map[string]*sessionRecord
	leases, valueBytes, delays int
}

// fsmUsage is an identity's usage of the replicated state; Leases counts
// its names in a lock-delay too.
type fsmUsage struct {
	Sessions, Outcomes, Leases, ValueBytes int
}

func (f *fsm) ownerUsageLocked(owner string) *ownerUsage {
	u := f.byOwner[owner]
	if u == nil {
		u = &ownerUsage{sessions: map[string]*sessionRecord{}}
		f.byOwner[owner] = u
	}
	return u
}

func (f *fsm) dropUsageIfEmpty(owner string) {
	if u := f.byOwner[owner]; u != nil && len(u.sessions) == 0 && u.leases == 0 && u.valueBytes == 0 && u.delays == 0 {
		delete(f.byOwner, owner)
	}
}

// putSession records session s and charges it to its owner.
func (f *fsm) putSession(id string, s *sessionRecord) {
	f.st.Sessions[id] = s
	f.ownerUsageLocked(s.Owner).sessions[id] = s
}

// deleteSession forgets session id and its outcomes, and their charge.
func (f *fsm) deleteSession(id string) {
	s := f.st.Sessions[id]
	if s == nil {
		return
	}
	delete(f.st.Sessions, id)
	if u := f.byOwner[s.Owner]; u != nil {
		delete(u.sessions, id)
		f.dropUsageIfEmpty(s.Owner)
	}
}

// chargeGrant adds (n = 1) or takes back (n = -1) a grant of owner with
// value bytes.
func (f *fsm) chargeGrant(owner string, n, value int) {
	u := f.ownerUsageLocked(owner)
	u.leases += n
	u.valueBytes += n * value
	f.dropUsageIfEmpty(owner)
}

// chargeDelay adds (n = 1) or takes back (n = -1) a name in a lock-delay
// that owner's grant left.
func (f *fsm) chargeDelay(owner string, n int) {
	f.ownerUsageLocked(owner).delays += n
	f.dropUsageIfEmpty(owner)
}

// moveOwner moves session's charges (the session, its grants, their
// values) from its recorded owner to owner (adopt).
func (f *fsm) moveOwner(id string, s *sessionRecord, owner string) {
	from := f.ownerUsageLocked(s.Owner)
	delete(from.sessions, id)
	to := f.ownerUsageLocked(owner)
	to.sessions[id] = s
	if sl := f.bySession[id]; sl != nil {
		for g := range sl.grants {
			rec, _ := f.grantLocked(g.Lease, g.Token)
			from.leases--
			from.valueBytes -= len(rec.Value)
			to.leases++
			to.valueBytes += len(rec.Value)
		}
		sl.owner = owner
	}
	f.dropUsageIfEmpty(s.Owner)
	s.Owner = owner
}

// forgets returns how many outcomes of its session request r makes the
// state forget, as fsm.session will: those below its first_unacked and
// those its also_received lists.
func (f *fsm) forgets(r requestID) int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.st.Sessions[r.Session]
	if s == nil {
		return 0
	}
	n, floor := 0, min(r.FirstUnacked, r.Seq)
	if floor > s.Floor {
		for seq := range s.Outcomes {
			if seq < floor {
				n++
			}
		}
	}
	for _, seq := range r.AlsoReceived {
		if _, ok := s.Outcomes[seq]; ok && seq >= floor && seq != r.Seq {
			n++
		}
	}
	return n
}

// usage returns what the replicated state holds for owner.
func (f *fsm) usage(owner string) fsmUsage {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.usageLocked(f.byOwner[owner])
}

func (f *fsm) usageLocked(u *ownerUsage) fsmUsage {
	if u == nil {
		return fsmUsage{}
	}
	out := fsmUsage{Sessions: len(u.sessions), Leases: u.leases + u.delays, ValueBytes: u.valueBytes}
	for _, s := range u.sessions {
		out.Outcomes += len(s.Outcomes)
	}
	return out
}

// usages returns every identity name's usage.
func (f *fsm) usages() map[string]fsmUsage {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make(map[string]fsmUsage, len(f.byOwner))
	for name, u := range f.byOwner {
		out[name] = f.usageLocked(u)
	}
	return out
}

// checkLimit refuses a new grant to owner when it holds limit live leases
// or more (limit 0: no limit). The limit comes in the entry, from the
// leader's account of owner, so every replica decides the same. Names in
// a lock-delay are not counted here (a delay restored from a snapshot
// written before delays named their owner is charged to nobody, and
// replicas must never decide differently): the leader counts them before
// it proposes (accounts.checkRequest).
func (f *fsm) checkLimit(owner string, limit int) error {
	held := 0
	if u := f.byOwner[owner]; u != nil {
		held = u.leases
	}
	if limit <= 0 || held < limit {
		return nil
	}
	return &LimitError{Identity: owner, Limit: limLeases.String(), Used: held, Max: limit}
}
