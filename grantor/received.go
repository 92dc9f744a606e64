package grantor

import (
	"slices"
	"sort"
)

// Forgetting outcomes a session has received (RequestID.also_received).
//
// A session's first_unacked is the lowest seq whose reply it lacks, so one
// long waiting Acquire holds it down, and every outcome above it stays
// remembered until the session hits maxOutstanding. With also_received a
// session also names the seqs above first_unacked whose replies it has;
// the FSM forgets their outcomes too.
//
// Forgetting must not let a request be applied twice. A request can reach
// the log again after its reply: a sidecar's retry after a reply it lost
// (which it does not list, since it has no reply), or a late copy of an
// attempt it gave up on (an Acquire still queued on a deposed leader, a
// proposal whose apply timed out but went through). If the FSM only
// dropped the outcome, such a late copy would be evaluated afresh and
// could grant a lease that the session already took for refused, or grant
// it a second time after a release: a grant nobody renews or releases,
// which blocks the lease for a whole term.
//
// So a forgotten seq is not forgotten entirely: it joins the session's
// Forgotten ranges, and any later request with that seq is stale, exactly
// as one below the floor is (StaleRequestError). Listed seqs are mostly
// contiguous (replies arrive roughly in order), so the ranges stay few: a
// range boundary is a seq the session still waits for. The FSM keeps at
// most maxForgottenRanges of them; a seq that would need more is simply
// not forgotten (also_received is a permission, not an order), and its
// outcome counts towards maxOutstanding as before. When the lowest range
// reaches the floor, the floor moves past it.
//
// This holds whatever the sidecar lists, as long as it lists only seqs
// whose requests it will not send again: a seq it lists and then retries
// gets OUT_OF_RANGE, never a second grant. The session's own seq may not
// be listed (INVALID_ARGUMENT).
//
// Entries that carry also_received are written with their own command
// types (cmdAcquire2, cmdRelease2), which a grantor built before this
// feature refuses to apply: it would apply them without forgetting, and
// its FSM would drift from the others'. Upgrade every grantor before any
// sidecar sends also_received.

// maxForgottenRanges bounds a session's Forgotten ranges.
const maxForgottenRanges = maxOutstanding

// maxAlsoReceived bounds the seqs one request's entry carries; a longer
// list is cut there (validRequestID).
const maxAlsoReceived = maxOutstanding

// alsoReceivedWindow is how far below a request's own seq the seqs its
// also_received lists may be: the leader drops the others before it
// proposes the entry (validRequestID), so an entry carries at most this
// many (review R8-9: 4096 scattered seqs cost every replica 14 ms of
// apply). A sidecar lists the replies that came in since its previous
// request, all below the new request's seq; one it cannot list stays
// remembered until first_unacked passes it.
const alsoReceivedWindow = 512

// seqRange is the seqs Lo..Hi, both included.
type seqRange struct {
	Lo uint64 `json:"lo"`
	Hi uint64 `json:"hi"`
}

// seqRanges is a sorted list of disjoint, non-adjacent ranges.
type seqRanges []seqRange

// find returns the index of the first range whose Hi is at least seq.
func (rs seqRanges) find(seq uint64) int {
	return sort.Search(len(rs), func(i int) bool { return rs[i].Hi >= seq })
}

// contains reports whether seq is in one of the ranges.
func (rs seqRanges) contains(seq uint64) bool {
	i := rs.find(seq)
	return i < len(rs) && rs[i].Lo <= seq
}

// add returns the ranges with seq added, and false (and rs unchanged)
// when that would take more than limit ranges.
func (rs seqRanges) add(seq uint64, limit int) (seqRanges, bool) {
	i := rs.find(seq)
	if i < len(rs) && rs[i].Lo <= seq {
		return rs, true // already in
	}
	joinPrev := i > 0 && rs[i-1].Hi+1 == seq
	joinNext := i < len(rs) && rs[i].Lo == seq+1
	switch {
	case joinPrev && joinNext:
		rs[i-1].Hi = rs[i].Hi
		return append(rs[:i], rs[i+1:]...), true
	case joinPrev:
		rs[i-1].Hi = seq
		return rs, true
	case joinNext:
		rs[i].Lo = seq
		return rs, true
	case len(rs) >= limit:
		return rs, false
	}
	rs = append(rs, seqRange{})
	copy(rs[i+1:], rs[i:])
	rs[i] = seqRange{Lo: seq, Hi: seq}
	return rs, true
}

// trimBelow drops every seq below floor.
func (rs seqRanges) trimBelow(floor uint64) seqRanges {
	i := rs.find(floor)
	rs = rs[i:]
	if len(rs) > 0 && rs[0].Lo < floor {
		rs[0].Lo = floor
	}
	if len(rs) == 0 {
		return nil
	}
	return rs
}

// union returns the ranges with the seqs of sorted (ascending, no
// duplicates) added, in one pass: what adding them one by one
// gives when no limit is met.
func (rs seqRanges) union(sorted []uint64) seqRanges {
	out := make(seqRanges, 0, len(rs)+len(sorted))
	put := func(r seqRange) {
		if n := len(out); n > 0 && out[n-1].Hi+1 >= r.Lo {
			out[n-1].Hi = max(out[n-1].Hi, r.Hi)
			return
		}
		out = append(out, r)
	}
	i := 0
	for _, seq := range sorted {
		for i < len(rs) && rs[i].Lo < seq {
			put(rs[i])
			i++
		}
		put(seqRange{Lo: seq, Hi: seq})
	}
	for ; i < len(rs); i++ {
		put(rs[i])
	}
	return out
}

// forget drops the outcomes of the seqs id lists in AlsoReceived and
// records them as forgotten (see above). Seqs below the floor are already
// forgotten; the request's own seq never gets here (validRequestID).
func (s *sessionRecord) forget(id requestID) {
	if !s.forgetSorted(id) {
		s.forgetEach(id)
	}
	// A range that starts at the floor is the same as a higher floor.
	if len(s.Forgotten) > 0 && s.Forgotten[0].Lo == s.Floor {
		s.Floor = s.Forgotten[0].Hi + 1
		s.Forgotten = s.Forgotten[1:]
		if len(s.Forgotten) == 0 {
			s.Forgotten = nil
		}
	}
}

// forgetSorted forgets id's seqs in one sorted pass when the ranges
// cannot reach maxForgottenRanges whatever the order (each seq adds at
// most one range), so the result is forgetEach's; false otherwise, having
// changed nothing.
func (s *sessionRecord) forgetSorted(id requestID) bool {
	if len(s.Forgotten)+len(id.AlsoReceived) > maxForgottenRanges {
		return false
	}
	seqs := make([]uint64, 0, len(id.AlsoReceived))
	for _, seq := range id.AlsoReceived {
		if seq >= s.Floor && seq != id.Seq {
			seqs = append(seqs, seq)
		}
	}
	if len(seqs) == 0 {
		return true
	}
	slices.Sort(seqs)
	seqs = slices.Compact(seqs)
	for _, seq := range seqs {
		delete(s.Outcomes, seq)
	}
	s.Forgotten = s.Forgotten.union(seqs)
	return true
}

// forgetEach forgets id's seqs one by one, in the entry's order, each
// only if the ranges stay within maxForgottenRanges.
func (s *sessionRecord) forgetEach(id requestID) {
	for _, seq := range id.AlsoReceived {
		if seq < s.Floor || seq == id.Seq {
			continue
		}
		rs, ok := s.Forgotten.add(seq, maxForgottenRanges)
		if !ok {
			continue // keep remembering it
		}
		s.Forgotten = rs
		delete(s.Outcomes, seq)
	}
}

// raiseFloor forgets every outcome below floor, if it is above the
// current one.
func (s *sessionRecord) raiseFloor(floor uint64) {
	if floor <= s.Floor {
		return
	}
	s.Floor = floor
	for seq := range s.Outcomes {
		if seq < floor {
			delete(s.Outcomes, seq)
		}
	}
	s.Forgotten = s.Forgotten.trimBelow(floor)
}
