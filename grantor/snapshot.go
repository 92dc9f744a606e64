package grantor

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/hashicorp/raft"
)

// snapshotFormat versions the snapshot encoding.
//
// Version history:
//
//	1: JSON {"format":1,"state":fsmState}.
//	2: sessions may carry "forgotten" ranges (also_received). A state
//	   without any is still written as format 1, which grantors built
//	   before format 2 read; one with some is not, since such a grantor
//	   would drop them and apply differently from the others.
//	3: semaphores ("sems") and grants' values. Written only when the
//	   state has either; grantors built before it refuse the file.
//	4: lock-delays: names in a delay ("delays") and grants' lock-delays.
//	   Written only when the state has either; grantors built before it
//	   refuse the file.
//	5: remembered refusals (outcomes with "refused", outcome.go). Written
//	   only when the state has one; grantors built before it refuse the
//	   file (they would take a refusal for a grant that ended).
//	6: shared grants ("sems" with "shared") and shared grants' delays
//	   (shared.go). Written only when the state has either; grantors built
//	   before it refuse the file (they would take shared grants for a
//	   semaphore without a limit).
const (
	snapshotFormat1 = 1
	snapshotFormat2 = 2
	snapshotFormat3 = 3
	snapshotFormat4 = 4
	snapshotFormat5 = 5
	snapshotFormat  = 6
)

// Snapshot captures the state for raft; Persist writes it. A halted FSM
// refuses: its state is not the log's up to the snapshot's index.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.halted != nil {
		return nil, f.halted
	}
	return &fsmSnapshot{st: f.st.clone()}, nil
}

// Restore replaces the state with a snapshot written by Persist; a halted
// FSM refuses.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if h := f.haltErr(); h != nil {
		return h
	}
	st, err := readSnapshot(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	if st.LastToken < f.st.LastToken {
		// Raft only restores snapshots of its own later state, so this
		// cannot happen; refuse rather than let a token go back.
		have := f.st.LastToken
		f.mu.Unlock()
		return fmt.Errorf("grantor: snapshot token counter %d is behind the state's %d", st.LastToken, have)
	}
	f.st = st
	f.bySession, f.byOwner = map[string]*sessionLeases{}, map[string]*ownerUsage{}
	for id, s := range st.Sessions {
		f.putSession(id, s)
	}
	for name, l := range st.Leases {
		l.Session = f.internSession(l.Session)
		st.Leases[name] = l
		f.hold(name, l)
	}
	for name, sem := range st.Sems {
		for _, l := range sem.Holders {
			f.hold(name, l)
		}
	}
	for _, ds := range st.Delays {
		for _, d := range ds {
			f.chargeDelay(d.Owner, 1)
		}
	}
	f.mu.Unlock()
	if f.observe != nil {
		f.observe(fsmEvent{Kind: evRestored})
	}
	return nil
}

func (st *fsmState) clone() fsmState {
	// maps.Clone copies a map's tables whole, several times faster than
	// inserting every entry again: the raft FSM goroutine applies nothing
	// while a snapshot is taken, and Leases may hold millions.
	c := fsmState{
		LastToken: st.LastToken,
		Leases:    maps.Clone(st.Leases),
		Sessions:  make(map[string]*sessionRecord, len(st.Sessions)),
		Nodes:     maps.Clone(st.Nodes),
		Delays:    make(map[string][]delayRecord, len(st.Delays)),
	}
	for k, v := range st.Delays {
		c.Delays[k] = slices.Clone(v)
	}
	for k, v := range st.Sessions {
		s := &sessionRecord{Floor: v.Floor, Outcomes: maps.Clone(v.Outcomes),
			Forgotten: append(seqRanges(nil), v.Forgotten...), Owner: v.Owner}
		if s.Outcomes == nil {
			s.Outcomes = map[uint64]outcome{} // written as {}, never null
		}
		c.Sessions[k] = s
	}
	if len(st.NodeCmds) > 0 {
		c.NodeCmds = maps.Clone(st.NodeCmds)
	}
	if len(st.Sems) > 0 {
		c.Sems = make(map[string]*semRecord, len(st.Sems))
		for k, v := range st.Sems {
			c.Sems[k] = &semRecord{Limit: v.Limit, Shared: v.Shared, Holders: append([]leaseRecord(nil), v.Holders...)}
		}
	}
	return c
}

type snapshotFile struct {
	Format int      `json:"format"`
	State  fsmState `json:"state"`
}

// fsmSnapshot is a point-in-time copy of the FSM state.
type fsmSnapshot struct {
	st fsmState
}

// Persist writes the snapshot as JSON. Maps are written with sorted keys, so
// equal states give equal bytes.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriter(sink)
	format := snapshotFormat1
	for _, sess := range s.st.Sessions {
		if len(sess.Forgotten) > 0 {
			format = snapshotFormat2
			break
		}
	}
	if s.st.needsFormat3() {
		format = snapshotFormat3
	}
	if s.st.needsFormat4() {
		format = snapshotFormat4
	}
	if s.st.hasRefusals() {
		format = snapshotFormat5
	}
	if s.st.hasShared() {
		format = snapshotFormat
	}
	err := json.NewEncoder(w).Encode(snapshotFile{Format: format, State: s.st})
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("grantor: writing snapshot: %w", err)
	}
	return sink.Close()
}

// Release is a no-op: the snapshot holds a private copy.
func (s *fsmSnapshot) Release() {}

func readSnapshot(r io.Reader) (fsmState, error) {
	var f snapshotFile
	if err := json.NewDecoder(bufio.NewReader(r)).Decode(&f); err != nil {
		return fsmState{}, fmt.Errorf("grantor: reading snapshot: %w", err)
	}
	if f.Format < snapshotFormat1 || f.Format > snapshotFormat {
		return fsmState{}, fmt.Errorf("grantor: snapshot format %d is not %d to %d (written by a newer grantor?)", f.Format, snapshotFormat1, snapshotFormat)
	}
	st := f.State
	if st.Leases == nil {
		st.Leases = map[string]leaseRecord{}
	}
	if st.Sessions == nil {
		st.Sessions = map[string]*sessionRecord{}
	}
	if st.Nodes == nil {
		st.Nodes = map[string]string{}
	}
	if st.NodeCmds == nil {
		st.NodeCmds = map[string]cmdType{}
	}
	if st.Sems == nil {
		st.Sems = map[string]*semRecord{}
	}
	if st.Delays == nil {
		st.Delays = map[string][]delayRecord{}
	}
	for k, s := range st.Sessions {
		if s == nil {
			s = &sessionRecord{}
			st.Sessions[k] = s
		}
		if s.Outcomes == nil {
			s.Outcomes = map[uint64]outcome{}
		}
	}
	for name, l := range st.Leases {
		if l.Token == 0 || l.Token > st.LastToken {
			return fsmState{}, fmt.Errorf("grantor: snapshot lease %q has token %d beyond the counter %d", name, l.Token, st.LastToken)
		}
	}
	for name, ds := range st.Delays {
		if err := validDelays(name, ds, st); err != nil {
			return fsmState{}, err
		}
	}
	for name, sem := range st.Sems {
		if sem == nil || len(sem.Holders) == 0 || (sem.Shared && sem.Limit != 0) || (!sem.Shared && (sem.Limit < 2 || len(sem.Holders) > sem.Limit)) {
			return fsmState{}, fmt.Errorf("grantor: snapshot semaphore %q is malformed", name)
		}
		if _, both := st.Leases[name]; both {
			return fsmState{}, fmt.Errorf("grantor: snapshot lease %q is both exclusive and a semaphore", name)
		}
		for _, l := range sem.Holders {
			if l.Token == 0 || l.Token > st.LastToken {
				return fsmState{}, fmt.Errorf("grantor: snapshot semaphore %q has token %d beyond the counter %d", name, l.Token, st.LastToken)
			}
		}
	}
	return st, nil
}

// needsFormat3 reports whether the state has semaphores or values, which
// grantors that read format 2 at most would drop.
func (st *fsmState) needsFormat3() bool {
	if len(st.Sems) > 0 {
		return true
	}
	for _, l := range st.Leases {
		if l.Value != "" {
			return true
		}
	}
	return false
}

// needsFormat4 reports whether the state has lock-delays, which grantors
// that read format 3 at most would drop.
func (st *fsmState) needsFormat4() bool {
	if len(st.Delays) > 0 {
		return true
	}
	for _, l := range st.Leases {
		if l.LockDelay != 0 {
			return true
		}
	}
	for _, sem := range st.Sems {
		for _, l := range sem.Holders {
			if l.LockDelay != 0 {
				return true
			}
		}
	}
	return false
}

// validDelays checks the lock-delays of name in a snapshot's state: each
// names a grant the counter reached and lasts some time, and they and the
// name's grants fit its limit (an exclusive name: one delay, no grant).
func validDelays(name string, ds []delayRecord, st fsmState) error {
	if len(ds) == 0 {
		return fmt.Errorf("grantor: snapshot lease %q has an empty list of delays", name)
	}
	limit, shared := max(ds[0].Limit, 1), ds[0].Shared
	for _, d := range ds {
		if d.Token == 0 || d.Token > st.LastToken || d.Delay <= 0 || max(d.Limit, 1) != limit || d.Shared != shared || (d.Shared && d.Limit != 0) {
			return fmt.Errorf("grantor: snapshot delay of %q is malformed (token %d, counter %d, delay %v, limit %d, shared %t)", name, d.Token, st.LastToken, d.Delay, d.Limit, d.Shared)
		}
	}
	if shared {
		return validSharedDelays(name, st)
	}
	holders := 0
	if _, held := st.Leases[name]; held {
		holders = limit // an exclusive grant beside a delay: no room for it
	}
	if sem := st.Sems[name]; sem != nil {
		if sem.Limit != limit {
			return fmt.Errorf("grantor: snapshot delays of %q are of limit %d, its semaphore of %d", name, limit, sem.Limit)
		}
		holders = len(sem.Holders)
	}
	if holders+len(ds) > limit {
		return fmt.Errorf("grantor: snapshot lease %q has %d grants and %d delays, more than its limit %d", name, holders, len(ds), limit)
	}
	return nil
}

// hasRefusals reports whether some session remembers a refusal, which
// grantors that read format 4 at most would take for a grant that ended.
func (st *fsmState) hasRefusals() bool {
	for _, sess := range st.Sessions {
		for _, o := range sess.Outcomes {
			if o.Refused {
				return true
			}
		}
	}
	return false
}

// hasShared reports whether the state has shared grants or their delays,
// which grantors that read format 5 at most would misread.
func (st *fsmState) hasShared() bool {
	for _, sem := range st.Sems {
		if sem.Shared {
			return true
		}
	}
	for _, ds := range st.Delays {
		if len(ds) > 0 && ds[0].Shared {
			return true
		}
	}
	return false
}

// validSharedDelays checks that the name whose delays are shared grants'
// has no grant beside them but shared ones.
func validSharedDelays(name string, st fsmState) error {
	if _, held := st.Leases[name]; held {
		return fmt.Errorf("grantor: snapshot lease %q is held exclusive beside shared delays", name)
	}
	if sem := st.Sems[name]; sem != nil && !sem.Shared {
		return fmt.Errorf("grantor: snapshot lease %q is a semaphore beside shared delays", name)
	}
	return nil
}
