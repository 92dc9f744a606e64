package daemon

import (
	"slices"

	"github.com/leaseside/leaseside/clockwatch"
)

// Keepalives in flight per term (issue 22.6). Each grantor session (the
// leases of one term) is in at most one keepalive in flight, and the
// keepalives of different sessions are in flight side by side on the one
// stream, matched to their replies by batch id. So a session comes due and
// leaves at once whatever another session's keepalive is waiting for: a
// batch of long-term sessions whose reply is slow holds back no short-term
// one, and each batch times out by its own sessions' terms (batchTimeout).
// Failures and backoff are per session too. A batch that goes unanswered
// drops the stream (the grantor behind it may be silent), and with it
// every batch in flight on it: their replies can no longer come, and each
// of their sessions is retried after its own backoff.

// kaFlight is the renew loop's keepalives in flight and the state of
// every session it renews. Only the renew loop uses it.
type kaFlight struct {
	batches map[uint64]*batch
	terms   map[*gsession]*termFlight
	nextID  uint64
}

// termFlight is one session's keepalive state.
type termFlight struct {
	// inflight is the batch the session is in, nil when none.
	inflight *batch
	// failures counts the keepalives in a row that failed for it;
	// retryAt is when it may be sent again after the last of them.
	failures int
	retryAt  clockwatch.Instant
}

func newKAFlight() *kaFlight {
	return &kaFlight{batches: map[uint64]*batch{}, terms: map[*gsession]*termFlight{}}
}

// term returns s's state.
func (f *kaFlight) term(s *gsession) *termFlight {
	t := f.terms[s]
	if t == nil {
		t = &termFlight{}
		f.terms[s] = t
	}
	return t
}

// ready reports whether s may go in a new batch at now: it is in none in
// flight, and its backoff after a failure is over.
func (f *kaFlight) ready(s *gsession, now clockwatch.Instant) bool {
	t := f.terms[s]
	return t == nil || (t.inflight == nil && !now.Before(t.retryAt))
}

// failing reports whether s's renewal is failing: a keepalive for it
// failed last, or one is still unanswered.
func (f *kaFlight) failing(s *gsession) bool {
	t := f.terms[s]
	return t != nil && (t.failures > 0 || t.inflight != nil)
}

// start numbers b and puts it in flight.
func (f *kaFlight) start(b *batch) {
	f.nextID++
	b.id = f.nextID
	f.batches[b.id] = b
	for _, sb := range b.sessions {
		f.term(sb.s).inflight = b
	}
}

// answered takes b out of flight after its reply was applied at now: its
// sessions renew on schedule again, but those in unanswered (the grantor
// withheld their listing), which back off as failed ones do.
func (f *kaFlight) answered(b *batch, unanswered []*sessionBatch, now clockwatch.Instant) {
	delete(f.batches, b.id)
	for _, sb := range b.sessions {
		if !slices.Contains(unanswered, sb) {
			delete(f.terms, sb.s)
		}
	}
	for _, sb := range unanswered {
		f.failedSession(sb, now)
	}
}

// failed takes b out of flight after it failed at now: each of its
// sessions backs off by its own count of failures.
func (f *kaFlight) failed(b *batch, now clockwatch.Instant) {
	delete(f.batches, b.id)
	for _, sb := range b.sessions {
		f.failedSession(sb, now)
	}
}

// failedSession counts a failure of sb's session at now, and sets when
// it may be sent again.
func (f *kaFlight) failedSession(sb *sessionBatch, now clockwatch.Instant) {
	t := f.term(sb.s)
	t.inflight = nil
	t.failures++
	t.retryAt = now.Add(sb.retryDelay(now, t.failures))
}

// overdue returns a batch in flight whose timeout has passed at now, nil
// when none has.
func (f *kaFlight) overdue(now clockwatch.Instant) *batch {
	for _, b := range f.batches {
		if !now.Before(b.timeout) {
			return b
		}
	}
	return nil
}

// all returns the batches in flight.
func (f *kaFlight) all() []*batch {
	out := make([]*batch, 0, len(f.batches))
	for _, b := range f.batches {
		out = append(out, b)
	}
	return out
}

// wake is the earliest instant a batch in flight times out (never when
// none is in flight). The end of a session's backoff is notBefore's.
func (f *kaFlight) wake() clockwatch.Instant {
	next := never
	for _, b := range f.batches {
		next = min(next, b.timeout)
	}
	return next
}

// notBefore is the earliest s may be sent again: never while it is in
// flight, its retry instant after a failure, else 0.
func (f *kaFlight) notBefore(s *gsession) clockwatch.Instant {
	t := f.terms[s]
	switch {
	case t == nil:
		return 0
	case t.inflight != nil:
		return never
	}
	return t.retryAt
}
