package grantor

import (
	"errors"
	"log/slog"
)

// Grants nobody was told of are ended by the grantor (issue 22 item 3).
//
// A grant's answer can miss its owner: the reply came after the owner or
// the requester was gone, the grant came too late and its first renewal
// failed, or the sidecar's call gave up and only a retry of the same
// request id (which the FSM answers with the same outcome) learned the
// grant afterwards. Nobody acted on such a grant, so it must end without
// lock-delay. A grant whose owner ended, or that the sidecar lost, may
// still be acted on: it ends with its lock-delay. The sidecar reports the
// first kind, and the second when its release did not get there, in its
// keepalive (SessionRenewal.untold and owner_ended) until a reply shows
// them gone; it never guesses at a grant it does not know. The leader
// ends each that the session still holds with one cmdEndGrant entry,
// which hands the name to its first waiter in the same entry, as a
// release would.

// endGrantCmd ends grant Token of Lease, held by Session (cmdEndGrant):
// as a release by its owner (no lock-delay), or with OwnerEnded as a
// release that reports its owner's end (the grant's lock-delay takes its
// place). Next is the Acquire of the name's first waiter, applied in the
// same entry when the name has room then (handoff.go).
type endGrantCmd struct {
	Session    string      `json:"session"`
	Lease      string      `json:"lease"`
	Token      uint64      `json:"token"`
	OwnerEnded bool        `json:"owner_ended,omitempty"`
	Next       *acquireCmd `json:"next,omitempty"`
}

// endGrantResult is what the FSM returns for an endGrantCmd.
type endGrantResult struct {
	// Ended is false when Session did not hold that grant: nothing changed.
	Ended bool
	Next  *handoff
}

func (f *fsm) applyEndGrant(c *endGrantCmd) any {
	cur, held := f.grantLocked(c.Lease, c.Token)
	if !held || cur.Session != c.Session {
		return &endGrantResult{}
	}
	f.end(c.Lease, cur, freedReleased, c.OwnerEnded)
	return &endGrantResult{Ended: true, Next: f.handOff(c.Lease, c.Next)}
}

// endJob is a grant a keepalive named, to end, with the name's head
// waiter claimed for the handoff, if no other entry carries it.
type endJob struct {
	session    string
	g          grantRef
	ownerEnded bool
	waiter     *waiter
}

// endNamedLocked starts ending the grants of session that keepalive r
// names untold or owner-ended and that the session still holds, each
// once while its entry is in flight. A cluster in which not every grantor
// applies cmdEndGrant ends none: they stand, and the sidecar names them
// again. The caller holds l.mu.
func (l *lessor) endNamedLocked(o *office, r sessionRenewal) {
	if len(r.Untold)+len(r.OwnerEnded) == 0 {
		return
	}
	if l.prop.allowed() < cmdEndGrant {
		l.log.Warn("grantor: a sidecar names grants to end, but not every grantor of the cluster applies that yet (upgrade them)", "session", r.Session)
		return
	}
	start := func(g grantRef, ownerEnded bool) {
		if rec, held := l.fsm.grant(g.Lease, g.Token); !held || rec.Session != r.Session || o.ending[g] {
			return
		}
		o.ending[g] = true
		l.wg.Add(1)
		go l.endGrant(o, endJob{session: r.Session, g: g, ownerEnded: ownerEnded, waiter: l.claimLocked(o, g.Lease, 0)})
	}
	for _, g := range r.Untold {
		start(g, false)
	}
	for _, g := range r.OwnerEnded {
		start(g, true)
	}
}

// endGrant proposes the end of j's grant, which grants the name to its
// first waiter in the same entry. A failed proposal is not retried: the
// sidecar names the grant again in its next keepalive.
func (l *lessor) endGrant(o *office, j endJob) {
	defer l.wg.Done()
	c := endGrantCmd{Session: j.session, Lease: j.g.Lease, Token: j.g.Token, OwnerEnded: j.ownerEnded}
	if j.waiter != nil {
		next := j.waiter.cmd
		c.Next = &next
	}
	res, err := l.proposeEnd(o, j.waiter, endGrantEntry(c, l.prop.allowed()), func(res any) *handoff {
		if r, ok := res.(*endGrantResult); ok && r != nil {
			return r.Next
		}
		return nil
	})
	r, _ := res.(*endGrantResult)
	l.mu.Lock()
	delete(o.ending, j.g)
	l.mu.Unlock()
	poke(o.kick)
	if err != nil && !errors.Is(err, ErrNotLeader) {
		l.log.Warn("grantor: ending a grant a sidecar named failed", "lease", j.g.Lease, "token", j.g.Token, "err", err)
	}
	if r != nil && r.Ended {
		l.audit.grantEnded(j.g.Lease, j.g.Token, j.session, j.ownerEnded)
		l.test(testEvent{what: "grant ended", lease: j.g.Lease})
	}
}

// grantEnded records a grant the leader ended because its sidecar named
// it in a keepalive (untold.go): untold, or with its owner ended.
func (a *audit) grantEnded(lease string, token uint64, session string, ownerEnded bool) {
	if a == nil {
		return
	}
	a.write(slog.LevelInfo, "grant_end", a.self, "lease", lease, "token", token, "session", session, "owner_ended", ownerEnded)
}
