package grantor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// An operator's revoke (issue 24, `leaseside revoke`).
//
// The Revoke RPC ends grants of a name that their holders did not give
// up: one cmdRevoke2 entry per grant, naming its token, so a revoke never
// ends a later grant of the name. The grant's holder is not asked: its
// sidecar learns it at its next keepalive (the session's listing no
// longer shows the grant) and reports the lease lost with reason
// "revoked". Until then it may act: the last renewal acknowledged before
// the entry was applied gave its holder a deadline within one term of
// that renewal. So the name does not come free at once: a lock-delay takes
// the grant's place (lockdelay.go) for the grant's term plus its own
// lock-delay (operatorDelay), counted by the leader as it counts a term
// (GrantorExpiry) from the entry's apply, and by a new leader from its
// tE. The holder's deadline passes within the term, and writes it still
// has in flight get the lock-delay, as after an expiry. The FSM computes
// the delay from the grant it ends: it reads no clock, and every replica
// keeps the same delay.
//
// A cmdRevoke (the leader's per-lease expiry of older clusters) keeps
// only the grant's lock-delay, since its holder's session had expired.

// ErrRevokeNotSupported is returned for a Revoke while not every grantor
// of the cluster applies cmdRevoke2.
var ErrRevokeNotSupported = errors.New("grantor: not every grantor of the cluster has registered that it applies operator revokes: one is older (upgrade it) or has only just joined (it registers within seconds)")

// ErrNotHeld is returned for a Revoke of a name nothing holds (NOT_FOUND).
var ErrNotHeld = errors.New("grantor: lease not held")

// ErrWrongToken is returned for a Revoke that names a token the name is
// not held with (FAILED_PRECONDITION without a NotLeader detail).
var ErrWrongToken = errors.New("grantor: lease not held with that token")

// operatorDelay is how long the name of grant cur stays delayed after an
// operator revoked it: its term, within which its holder's deadline
// passes, plus its lock-delay.
func operatorDelay(cur leaseRecord) time.Duration {
	return cur.TTL + max(cur.LockDelay, 0)
}

// revokeTargets returns the grants of lease a revoke naming token (0:
// all) ends, or why there are none.
func (f *fsm) revokeTargets(lease string, token uint64) ([]leaseRecord, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, holders := f.inForceLocked(lease)
	if len(holders) == 0 {
		if ds := f.st.Delays[lease]; len(ds) > 0 {
			return nil, fmt.Errorf("%w: nothing holds %q; it is in the lock-delay of grant %d, which ended (the delay ends by itself)", ErrNotHeld, lease, ds[0].Token)
		}
		return nil, fmt.Errorf("%w: nothing holds %q", ErrNotHeld, lease)
	}
	if token == 0 {
		return append([]leaseRecord(nil), holders...), nil
	}
	for _, h := range holders {
		if h.Token == token {
			return []leaseRecord{h}, nil
		}
	}
	tokens := make([]uint64, len(holders))
	for i, h := range holders {
		tokens[i] = h.Token
	}
	return nil, fmt.Errorf("%w: %q is not held with token %d; its grants are %v", ErrWrongToken, lease, token, tokens)
}

// operatorRevoke ends the grants of lease (only the one with token, when
// not 0) for the operator by: one entry per grant, each under the
// lease's proposal slot. It returns the tokens it ended and the longest
// delay their name got.
func (l *lessor) operatorRevoke(ctx context.Context, by Identity, lease string, token uint64) ([]uint64, time.Duration, error) {
	o, err := l.await(ctx)
	if err != nil {
		return nil, 0, err
	}
	if l.prop.allowed() < cmdRevoke2 {
		return nil, 0, ErrRevokeNotSupported
	}
	targets, err := l.fsm.revokeTargets(lease, token)
	if err != nil {
		return nil, 0, err
	}
	var revoked []uint64
	var delay time.Duration
	for _, g := range targets {
		holder := l.fsm.sessionOwner(g.Session)
		ok, err := l.revokeOne(ctx, o, by, lease, g.Token)
		if err != nil {
			return revoked, delay, err
		}
		if ok {
			revoked = append(revoked, g.Token)
			delay = max(delay, operatorDelay(g))
			l.audit.operatorRevoke(by, lease, g.Token, holder, operatorDelay(g))
		}
	}
	if len(revoked) == 0 {
		// Every target ended meanwhile (released, expired): nothing was
		// this call's to end.
		return nil, 0, fmt.Errorf("%w: the grants of %q ended before the revoke was applied", ErrNotHeld, lease)
	}
	return revoked, delay, nil
}

// revokeOne proposes the revoke of grant (lease, token) holding the
// lease's slot, and reports whether the entry ended it.
func (l *lessor) revokeOne(ctx context.Context, o *office, by Identity, lease string, token uint64) (bool, error) {
	slot := l.slot(lease)
	select {
	case slot <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	case <-o.ctx.Done():
		return false, l.prop.notLeader()
	}
	defer l.releaseSlot(o, slot)
	if !l.current(o) {
		return false, l.prop.notLeader()
	}
	res, err := l.prop.apply(encodeCmd(cmdRevoke2, revokeCmd{Lease: lease, Token: token, By: by.String()}))
	if err != nil {
		return false, err
	}
	r, ok := res.(*revokeResult)
	return ok && r.Revoked, nil
}

// operatorRevoke records grants an operator revoked: who, the grant, its
// holder's identity and how long its name stays delayed.
func (a *audit) operatorRevoke(who Identity, lease string, token uint64, holder string, delay time.Duration) {
	if a == nil {
		return
	}
	a.write(slog.LevelWarn, "operator_revoke", who, "lease", lease, "token", token, "holder", holder, "delay", delay.String())
}

// Revoke implements grantorpb.GrantorServer: an operator ends grants of a
// name. Only the leader answers.
func (s *service) Revoke(ctx context.Context, req *grantorpb.RevokeRequest) (*grantorpb.RevokeResponse, error) {
	if err := validLeaseName("lease", req.GetLease()); err != nil {
		return nil, toStatus(err)
	}
	revoked, delay, err := s.n.lessor.operatorRevoke(ctx, IdentityFrom(ctx), req.GetLease(), req.GetToken())
	if err != nil {
		return nil, toStatus(err)
	}
	return &grantorpb.RevokeResponse{Revoked: revoked, DelayNs: int64(delay)}, nil
}
