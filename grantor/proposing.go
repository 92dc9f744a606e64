package grantor

import (
	"context"
	"errors"
)

// Proposals in flight (chaos finding F8). A call of an Acquire that
// proposes it with no waiter (it found none, and nothing queued keeps it
// behind) is known to the office until its entry's outcome is known and,
// when it then queues, until its waiter is in the queue. Another call of
// the same request id that arrives meanwhile (a sidecar's retry on
// another connection) waits for that outcome instead of proposing its
// own: at ab781e3 a retry without wait was refused behind the queue while
// the first call's entry, slowed by the leader's disk, applied a second
// later and granted the id, so one request id got two answers. Since every
// answer is an entry's (outcome.go), this only saves entries: the FSM
// would order the two calls' entries and answer both the same.

// proposal is one call's Acquire in flight.
type proposal struct {
	done chan struct{} // closed once res is set
	// res is the outcome (*acquireResult or error), nil when the other
	// calls of the id must join again: the proposing call queued a
	// waiter, or gave up before its entry was made.
	res   any
	ended bool // under lessor.mu
}

// proposalKey names the proposal of a request id for an identity.
type proposalKey struct {
	session  string
	seq      uint64
	identity string
}

func proposalKeyOf(c acquireCmd) proposalKey {
	return proposalKey{c.ID.Session, c.ID.Seq, c.Identity}
}

// beginProposalLocked registers c's proposal. The caller holds lessor.mu
// and found none in flight.
func (l *lessor) beginProposalLocked(o *office, c acquireCmd) *proposal {
	if o.proposing == nil {
		o.proposing = map[proposalKey]*proposal{}
	}
	p := &proposal{done: make(chan struct{})}
	o.proposing[proposalKeyOf(c)] = p
	return p
}

// endProposal ends c's proposal p with the outcome res or err, which the
// other calls of c's id take as theirs; with neither (or an error of c's
// own context, before its entry was made) they join again. Only the
// first end counts.
func (l *lessor) endProposal(o *office, c acquireCmd, p *proposal, res *acquireResult, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.ended {
		return
	}
	p.ended = true
	switch {
	case err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		p.res = err
	case err == nil && res != nil:
		p.res = res
	}
	if o.proposing[proposalKeyOf(c)] == p {
		delete(o.proposing, proposalKeyOf(c))
	}
	close(p.done)
}

// awaitProposal waits for another call's proposal p of the same request
// id. final reports that its outcome is this call's answer: the request's
// outcome (a grant, an error, a refusal for good); otherwise (a refusal
// that means "wait on") the call joins again.
func (l *lessor) awaitProposal(ctx context.Context, o *office, lease string, p *proposal) (res *acquireResult, err error, final bool) {
	l.test(testEvent{what: "awaits proposal", lease: lease})
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil, ctx.Err(), true
	case <-o.ctx.Done():
		return nil, l.prop.notLeader(), true
	}
	if r, ok := p.res.(*acquireResult); p.res == nil || ok && !r.settled() {
		return nil, nil, false
	}
	res, err = handedOff(p.res)
	return res, err, true
}
