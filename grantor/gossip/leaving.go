package gossip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// How "left" reaches every member, not only "dead".
//
// memberlist tells its delegates that a member is gone, not whether it
// left or died: the others tell by the leaving flag the member gossiped in
// its metadata first. A member that gets the leave notice before the flag
// lists the member dead for good (memberlist ignores the flag's update
// once the member is gone). On a loaded machine that happens: the flag's
// broadcast is dropped from memberlist's queue when the member refutes a
// suspicion meanwhile (the refutation replaces it, and the leave notice
// then replaces that before it is sent), and a member memberlist took for
// dead for a moment is not gossiped to. Two things close it:
//
//   - confirmLeaving: before it leaves, a member syncs its state over TCP
//     with every alive grantor until the grantor's answer lists it as
//     leaving (grantors are few, and the ones that act on "left": the
//     leader's reconciliation). Sidecars are not asked: they may be
//     thousands.
//   - left claims: every state sync (push/pull) carries the names and runs
//     (Meta.Instance) of the members the sender lists as left, and the
//     receiver lists a member it had as dead as left when its claim names
//     the same run. So a member that missed the flag learns "left" from any
//     that saw it, within a push/pull interval.

// leftVersion1 is the first encoding of the left claims a state sync
// carries. ONLY APPEND new versions; never reuse or renumber one.
const leftVersion1 byte = 1

// Bounds of the left claims: what one state sync may carry, and what a
// member decodes (anything past them is refused whole).
const (
	maxLeftClaims  = 1024
	maxLeftNameLen = 512
)

// leftClaim is one member that left: its name and the run that left.
type leftClaim struct {
	name     string
	instance uint64
}

// encodeLeft encodes claims (at most maxLeftClaims of them):
//
//	byte 0   version (leftVersion1)
//	then     uvarint count, then per claim: uvarint name length, the
//	         name, uvarint instance
//
// It returns nil for none.
func encodeLeft(cs []leftClaim) []byte {
	if len(cs) == 0 {
		return nil
	}
	cs = cs[:min(len(cs), maxLeftClaims)]
	b := binary.AppendUvarint([]byte{leftVersion1}, uint64(len(cs)))
	for _, c := range cs {
		b = binary.AppendUvarint(b, uint64(len(c.name)))
		b = append(b, c.name...)
		b = binary.AppendUvarint(b, c.instance)
	}
	return b
}

// errLeftMalformed is a left claims encoding this build cannot read.
var errLeftMalformed = errors.New("gossip: malformed left claims in a state sync")

// decodeLeft decodes what encodeLeft made, strictly: an unknown version,
// more than maxLeftClaims claims, a name over maxLeftNameLen, a
// truncation or trailing bytes refuse the whole of it.
func decodeLeft(b []byte) ([]leftClaim, error) {
	if len(b) == 0 || b[0] != leftVersion1 {
		return nil, fmt.Errorf("%w: unknown version", errLeftMalformed)
	}
	rest := b[1:]
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > maxLeftClaims {
		return nil, fmt.Errorf("%w: bad count", errLeftMalformed)
	}
	rest = rest[k:]
	out := make([]leftClaim, 0, n)
	for range n {
		l, k := binary.Uvarint(rest)
		if k <= 0 || l > maxLeftNameLen || l > uint64(len(rest)-k) {
			return nil, fmt.Errorf("%w: bad name", errLeftMalformed)
		}
		name := string(rest[k : k+int(l)])
		rest = rest[k+int(l):]
		inst, k := binary.Uvarint(rest)
		if k <= 0 {
			return nil, fmt.Errorf("%w: bad instance", errLeftMalformed)
		}
		rest = rest[k:]
		out = append(out, leftClaim{name: name, instance: inst})
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: trailing bytes", errLeftMalformed)
	}
	return out, nil
}

// leftClaims lists the members this roster lists as left, with the run
// that left (members of a build that gossips no Instance are left out).
func (r *roster) leftClaims(now time.Time) []leftClaim {
	var out []leftClaim
	for _, e := range r.snapshot(now) {
		if e.info.State == StateLeft && e.info.MetaErr == nil && e.info.Meta.Instance != 0 && len(out) < maxLeftClaims {
			out = append(out, leftClaim{name: e.info.Name, instance: e.info.Meta.Instance})
		}
	}
	return out
}

// learnLeft lists as left each member listed dead whose run another
// member says left. A claim about another run, or a member listed alive,
// changes nothing: only memberlist says a member is gone.
func (r *roster) learnLeft(cs []leftClaim) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		e := r.byName[c.name]
		if e == nil || e.info.State != StateDead || e.info.MetaErr != nil || c.instance == 0 || e.info.Meta.Instance != c.instance {
			continue
		}
		e.info.State = StateLeft
		e.leaving = true
		e.seq = r.bumpLocked()
	}
}

// mergeWatch is memberlist's MergeDelegate. It refuses no merge; while
// confirmLeaving syncs with a member it records whether an answer listed
// this member (name, run instance) as leaving. A member that joins this
// one meanwhile and already lists it as leaving counts too: it has the
// flag as well.
type mergeWatch struct {
	mu       sync.Mutex
	name     string
	instance uint64 // 0: not watching
	seen     bool
}

var _ memberlist.MergeDelegate = (*mergeWatch)(nil)

func (w *mergeWatch) NotifyMerge(peers []*memberlist.Node) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.instance == 0 {
		return nil
	}
	for _, p := range peers {
		if p.Name != w.name {
			continue
		}
		if meta, leaving, err := decodeMeta(p.Meta); err == nil && leaving && meta.Instance == w.instance {
			w.seen = true
		}
	}
	return nil
}

// watch starts recording; done stops and reports whether an answer
// listed this member as leaving.
func (w *mergeWatch) watch(name string, instance uint64) {
	w.mu.Lock()
	w.name, w.instance, w.seen = name, instance, false
	w.mu.Unlock()
}

func (w *mergeWatch) done() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.instance = 0
	return w.seen
}

// confirmRetry is the pause between two state syncs with a grantor that
// has not yet listed this member as leaving: a sync's answer is sent
// before the other side merges this member's state, so the next one
// shows it.
const confirmRetry = 20 * time.Millisecond

// confirmLeaving syncs this member's state (with its leaving flag) with
// every grantor it lists alive, until that grantor's answer lists it as
// leaving or deadline passes; it returns the grantors not confirmed. The
// caller holds opMu and has set the flag.
func (m *Member) confirmLeaving(deadline time.Time) (unconfirmed []string) {
	m.metaMu.Lock()
	instance := m.meta.Instance
	m.metaMu.Unlock()
	for _, in := range m.Members() {
		if in.Name == m.cfg.Name || in.State != StateAlive || in.MetaErr != nil || in.Meta.Role != RoleGrantor {
			continue
		}
		for {
			m.merges.watch(m.cfg.Name, instance)
			_, err := m.ml.Join([]string{in.Addr})
			if m.merges.done() && err == nil {
				break
			}
			if time.Until(deadline) < confirmRetry {
				unconfirmed = append(unconfirmed, in.Name)
				break
			}
			t := time.NewTimer(confirmRetry)
			<-t.C
		}
	}
	return unconfirmed
}
