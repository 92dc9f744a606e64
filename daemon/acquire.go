package daemon

import (
	"cmp"
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// ownerID names the owner of a grant to the grantor, unique within the
// daemon's session: a connection, a process (pid and start time, so that a
// reused pid is another owner), or, for detached leases, the acquire
// itself: two detached acquires are two owners, and the second is refused.
func (d *Daemon) ownerID(c *ipc.Conn, req *ipc.Request) (string, *ipc.Error) {
	switch req.Owner {
	case ipc.OwnerPID:
		start, uid, err := processIdentity(req.OwnerPID)
		if err != nil {
			return "", ipc.Errorf(ipc.CodeBadRequest, "owner_pid: %v", err)
		}
		if c.Cred.UID != 0 && c.Cred.UID != uid {
			return "", ipc.Errorf(ipc.CodePermissionDenied, "owner_pid %d belongs to uid %d, not to the caller (uid %d)", req.OwnerPID, uid, c.Cred.UID)
		}
		return "pid:" + strconv.Itoa(req.OwnerPID) + ":" + strconv.FormatUint(start, 10), nil
	case ipc.OwnerDetached:
		return "detached:" + strconv.FormatUint(d.detached.Add(1), 10), nil
	}
	return d.connOwnerID(c), nil
}

// insecureIdentity is the identity name a grantor without TLS gives every
// caller (grantor.InsecureIdentity): it names no host, so a refusal does
// not pass it on as the holder's.
const insecureIdentity = "insecure"

// ownerEndedEarly is the end of the owner of l, an acquire's lease. While
// l is asking it moves to releasing (with why) and calls abandon, and the
// acquire gives back what it gets; once l is in the table, it is an
// ordinary ownerEnded. Both sides decide under d.mu, so an owner that
// ended before its grant came never has a lease in the table.
func (d *Daemon) ownerEndedEarly(l *lease, why string, abandon func()) {
	d.mu.Lock()
	if l.state != stateAsking {
		d.ownerEndedLocked(l, why)
		d.mu.Unlock()
		return
	}
	d.stepLocked(l, evOwnerEnded, why, d.clock.Now())
	d.mu.Unlock()
	abandon()
}

// acquire takes a lease for an owner. The requests of one owner for one
// name take turns (docs/design.md: one owner, one request per name in flight):
// a second acquire waits for the first and then finds its lease. An
// acquire whose owner ends, or whose answer nobody can receive any more
// (the requesting connection went), before the grant came gives back
// what it got.
func (d *Daemon) acquire(ctx context.Context, c *ipc.Conn, req *ipc.Request) (*ipc.Grant, *ipc.Error) {
	if req.TTLMs < d.cfg.MinTTL.Milliseconds() || req.TTLMs > d.cfg.MaxTTL.Milliseconds() {
		return nil, ipc.TTLError(req.TTLMs, d.cfg.MinTTL, d.cfg.MaxTTL) // the server checked already; this is for other callers
	}
	ttl := req.TTL()
	owner, ok := ownerOf(req.Owner)
	if req.Owner == "" {
		owner, ok = ownerConnection, true
	}
	if !ok { // the server checked already; this is for other callers
		return nil, ipc.Errorf(ipc.CodeBadRequest, "owner must be %q, %q or %q, got %q", ipc.OwnerConnection, ipc.OwnerPID, ipc.OwnerDetached, req.Owner)
	}
	id, ierr := d.ownerID(c, req)
	if ierr != nil {
		return nil, ierr
	}
	if req.WaitMs == 0 {
		if err := d.leaderUnreachable(d.clock.Now()); err != nil {
			return nil, err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, req.Wait()+d.cfg.RequestTimeout)
	defer cancel()
	done, err := d.turns.take(rctx, id, req.Lease)
	if err != nil {
		return nil, ipc.Errorf(ipc.CodeUnavailable, "an earlier request of this owner for %q did not finish in time", req.Lease)
	}
	// An acquire that got no answer keeps the turn until it is settled
	// (settleAcquire): a late attempt of it could otherwise replace this
	// owner's next grant of the name.
	turnHandedOn := false
	defer func() {
		if !turnHandedOn {
			done()
		}
	}()
	// Whatever this owner's earlier grants of the name left to release
	// goes first: a release landing after the new grant could end it.
	d.sendReleases(rctx, id, req.Lease)

	limit, value, shared := req.LimitValue(), req.ValueString(), req.Shared
	key := slotKey(req.Lease, limit, shared, id)
	now := d.checkSuspend()
	d.mu.Lock()
	if l := d.ownLeaseLocked(req.Lease, key, id, c.Cred.UID, now); l != nil {
		defer d.mu.Unlock()
		if l.ttl != ttl || l.lockDelay != req.LockDelay() || l.noRenew != req.NoRenew || int(l.limit) != limit || l.value != value || l.shared != shared {
			return nil, ipc.Errorf(ipc.CodeBadRequest, "this owner holds %q already, with other options (ttl, lock_delay, no_renew, limit, shared, value); release it first (or proclaim a new value)", req.Lease)
		}
		return d.ownGrant(l, now), nil // this owner holds it already: a no-op
	}
	d.mu.Unlock()
	sess := d.g.sessionFor(ttl)
	reserved, rerr := d.reserveLease(c.Cred.UID)
	if rerr != nil {
		return nil, rerr
	}
	defer reserved()

	l := &lease{name: req.Lease, key: key, limit: int32(limit), value: value, shared: shared, ttl: ttl, sess: sess, owner: owner, ownerID: id, ownerPID: req.OwnerPID, uid: uint32(c.Cred.UID),
		conn: c, lockDelay: req.LockDelay(), noRenew: req.NoRenew, renewed: make(chan struct{}), stopWatch: func() {},
		resume: d.newResumeSecret(owner.String())}
	// abandon is closed when nobody can take the grant any more: the
	// owner ended, or the requester left.
	abandon := make(chan struct{})
	var once sync.Once
	closeAbandon := func() { once.Do(func() { close(abandon) }) }
	if owner == ownerProcess {
		stop, err := watchPID(req.OwnerPID, func() { d.ownerEndedEarly(l, ipc.ReasonOwnerExited, closeAbandon) })
		if err != nil {
			return nil, ipc.Errorf(ipc.CodeBadRequest, "owner_pid: %v", err)
		}
		l.stopWatch = stop
	}
	fail := func(e *ipc.Error) (*ipc.Grant, *ipc.Error) {
		d.mu.Lock()
		d.stepLocked(l, evNoGrant, "", d.clock.Now())
		d.mu.Unlock()
		l.stopWatch()
		return nil, e
	}
	defer context.AfterFunc(ctx, closeAbandon)()

	// The grantor call does not end with the request: an abandoned
	// acquire learns what became of it, so that a grant nobody was told
	// of is ended (ends.go).
	deadline, _ := rctx.Deadline()
	gctx, gcancel := context.WithDeadline(d.life, deadline)
	defer gcancel()
	ask := acquireAsk{name: req.Lease, owner: id, limit: limit, value: value, shared: shared, lockDelay: l.lockDelay}
	t0 := d.clock.Now() // rule 1: read before the request is sent
	resp, gerr := d.g.acquire(gctx, l.sess, ask, req.Wait(), &d.metrics.acquireRPCs, abandon)
	if sessionTaken(gerr) && d.g.dropSession(l.sess) {
		// The grantors closed this term's session when it held nothing,
		// and another identity opened its id first (it is in their audit
		// trail; review finding S1): a new session of a new random id,
		// once.
		d.log.Warn("grantor session of this term belongs to another identity now; opening a new one", "session", l.sess.id, "ttl", ttl)
		l.sess = d.g.sessionFor(ttl)
		t0 = d.clock.Now()
		resp, gerr = d.g.acquire(gctx, l.sess, ask, req.Wait(), &d.metrics.acquireRPCs, abandon)
	}
	var ua *unansweredError
	if errors.As(gerr, &ua) {
		turnHandedOn = true
		d.bg.Add(1)
		go d.settleAcquire(l, ua, done)
	}
	if gerr != nil {
		return fail(grantorError(gerr))
	}
	if resp.Ended {
		// A retry of this acquire found its grant made (while the first
		// reply was lost) and ended since: it took effect, so it is no
		// refusal, and there is nothing to hold or give back.
		return fail(ipc.Errorf(ipc.CodeLost, "lease %q was granted (token %d) while the reply was lost, and that grant has ended since", req.Lease, resp.Token))
	}
	if !resp.Granted {
		d.metrics.refusals.Add(1)
		if resp.Delayed {
			e := ipc.Errorf(ipc.CodeLeaseHeld, "lease %q is in the lock-delay of its grant token %d, which ended without a release; the grantor grants it to nobody before the delay is over", req.Lease, resp.Token)
			if resp.Shared && shared {
				// Only a shared grant's delays stand: what keeps this
				// shared acquire out is a writer waiting ahead of it.
				e = ipc.Errorf(ipc.CodeLeaseHeld, "lease %q is in the lock-delay of shared grant token %d and an exclusive acquire waits for it ahead of this one (waiting writers keep new readers out); use wait_ms to queue", req.Lease, resp.Token)
			}
			e.HolderToken = strconv.FormatUint(resp.Token, 10)
			return fail(e)
		}
		e := heldError(req.Lease, shared, resp)
		e.HolderToken = strconv.FormatUint(resp.Token, 10)
		if resp.HolderName != insecureIdentity {
			e.Holder = resp.HolderName
		}
		return fail(e)
	}
	return d.granted(ctx, l, resp, t0)
}

// ownLeaseLocked returns the grant of name that owner id (of uid) holds
// already, valid now: under key (its slot, "" for the name), or as a
// shared grant or an exclusive one, whichever it asks for now (a request
// with other options is then refused). The caller holds d.mu.
func (d *Daemon) ownLeaseLocked(name, key, id string, uid int, now clockwatch.Instant) *lease {
	for _, k := range []string{cmp.Or(key, name), name, slotKey(name, 1, true, id)} {
		if l := d.validLocked(k, now); l != nil && l.ownerID == id && int(l.uid) == uid {
			return l
		}
	}
	return nil
}

// heldError is the lease_held error of an acquire of name (shared, or
// not) that resp refused while others hold the name.
func heldError(name string, shared bool, resp *grantorpb.AcquireResponse) *ipc.Error {
	by := "another owner"
	if resp.HolderName != "" {
		by = "another owner (sidecar " + strconv.Quote(resp.HolderName) + ")"
	}
	switch {
	case resp.Limit > 1:
		return ipc.Errorf(ipc.CodeLeaseHeld, "semaphore %q has all its %d holders; the oldest is %s with token %d", name, resp.Limit, by, resp.Token)
	case resp.Shared && shared:
		// Shared holders and a shared acquire refused: an acquire waits
		// ahead of it, an exclusive one somewhere in the queue.
		return ipc.Errorf(ipc.CodeLeaseHeld, "lease %q is held shared (%d holders, the oldest %s with token %d) and an exclusive acquire waits for it ahead of this one (waiting writers keep new readers out); use wait_ms to queue", name, resp.Holders, by, resp.Token)
	case resp.Shared:
		return ipc.Errorf(ipc.CodeLeaseHeld, "lease %q is held shared by %d holders (the oldest %s with token %d); an exclusive acquire waits until every shared holder is gone", name, resp.Holders, by, resp.Token)
	case shared:
		return ipc.Errorf(ipc.CodeLeaseHeld, "lease %q is held exclusively by %s with token %d", name, by, resp.Token)
	}
	return ipc.Errorf(ipc.CodeLeaseHeld, "lease %q is held by %s with token %d", name, by, resp.Token)
}

// granted enters the grant of resp, whose request left at t0, as lease l
// and answers the acquire. The term is the one the grantor states it
// stored, and rho and epsilon the larger of the daemon's and the
// grantor's (TEAM.md decision 2). A grant's identity is its token: a
// reply for a name whose listed grant has a higher token was superseded
// at the grantor (tokens only grow; the reply came late): when the listed
// grant is another owner's, the acquire is answered lost, never with that
// owner's grant. A grant whose owner ended before it came, or whose
// requester (ctx) left, is given back at once and never listed.
func (d *Daemon) granted(ctx context.Context, l *lease, resp *grantorpb.AcquireResponse, t0 clockwatch.Instant) (*ipc.Grant, *ipc.Error) {
	d.metrics.grants.Add(1)
	d.learnTiming(resp.Rho, resp.EpsilonNs)
	timing := d.timing()
	// Under d.mu: the owner's end (ownerEndedEarly) steps l meanwhile.
	d.mu.Lock()
	timing = d.atLeastFloorLocked(timing) // risen since it was read? (rho.go)
	if resp.TtlNs > 0 {
		l.ttl = time.Duration(resp.TtlNs)
	}
	l.token = resp.Token
	l.holders = resp.Holders
	l.t0 = t0
	l.deadline = timing.HolderDeadline(t0, l.ttl) // rule 3
	l.scheduleRenewal(t0)
	now := d.clock.Now()
	// A grant that came after a wait in the queue, or after slow retries,
	// was made at an unknown point after t0: its deadline may be short or
	// already gone. Such a grant is pending: nobody is told it is valid,
	// and it is not expired, until a renewal sent after the grant gives it
	// a deadline of its own (below).
	short := l.deadline.Sub(now) < 2*l.ttl/3
	switch old := d.leases[l.tableKey()]; {
	case l.state == stateReleasing || ctx.Err() != nil:
		why := l.why
		if why == "" {
			why = "requester_left"
		}
		d.stepLocked(l, evGiveBack, why, now)
		// Nobody was told of it: the grantor ends it, with no lock-delay
		// to keep (ends.go).
		d.queueReleaseLocked(l, "owner ended before the grant came: "+why, false)
		d.mu.Unlock()
		l.stopWatch()
		d.log.Info("ending a grant whose owner ended before it came", "lease", l.name, "token", l.token, "why", why)
		return nil, ipc.Errorf(ipc.CodeLost, "lease %q was granted (token %d) after its owner ended (%s), and was given back", l.name, l.token, why)
	case old != nil && old.token > l.token && old.ownerID != l.ownerID:
		// Another owner's later grant of the name is listed: this reply
		// was held up on the way while its grant ended at the grantor
		// and the name went on. Tokens only grow, so this grant is over
		// (the name is exclusive: a semaphore's slots are per owner),
		// and its holder was never told of it.
		d.stepLocked(l, evNoGrant, "superseded", now)
		d.mu.Unlock()
		l.stopWatch()
		d.log.Warn("an acquire's reply came after its grant was superseded by another owner's", "lease", l.name, "token", l.token, "listed", old.token)
		return nil, ipc.Errorf(ipc.CodeLost, "lease %q was granted (token %d), and token %d was granted since, before this reply came", l.name, l.token, old.token)
	case old != nil && old.token >= l.token:
		// The same grant (a retry of this request got there first), or
		// this owner's later one. Turns keep one owner's acquires of a
		// name one at a time, so the later one cannot come from an
		// acquire in flight beside this one: this reply's grant is the
		// listed one or over.
		d.stepLocked(l, evNoGrant, "", now)
		l.stopWatch()
		l = old
		d.mu.Unlock()
	default:
		if old != nil {
			// A new grant while the old one is still listed: the old one
			// is over (another owner's, or this owner's lost grant).
			d.stepLocked(old, evRevoked, ipc.ReasonRevoked, now)
		}
		ev := evGranted
		if short {
			ev = evGrantedShort
		}
		d.stepLocked(l, ev, "", now)
		d.emitWatchersLocked(l, &ipc.Event{Event: ipc.EventAcquired})
		d.mu.Unlock()
		d.wake()
	}

	d.mu.Lock()
	pending := l.state == statePending // the renew loop settles it, under d.mu
	d.mu.Unlock()
	if pending {
		if err := d.renewNow(ctx, l); err != nil {
			// Nobody was told of this grant: the grantor ends it, with
			// no lock-delay to keep (ends.go).
			d.mu.Lock()
			if l.state.inTable() {
				d.stepLocked(l, evGiveBack, "grant not confirmed", d.clock.Now())
				d.queueReleaseLocked(l, "grant not confirmed", false)
			}
			d.mu.Unlock()
			return nil, ipc.Errorf(ipc.CodeUnavailable, "%q was granted, but the grantor did not confirm it in time, so it was given back: %s", l.name, err.Message)
		}
	}
	now = d.checkSuspend()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.validLocked(l.tableKey(), now) != l {
		return nil, ipc.Errorf(ipc.CodeLost, "lease %q was lost before the reply could be sent", l.name)
	}
	return d.ownGrant(l, now), nil
}

// settleAcquire settles acquire l that got no answer (ua), holding its
// owner's turn for the name (done) until then: a grant it learns was made
// is one nobody was told of, which the grantor ends (ends.go).
func (d *Daemon) settleAcquire(l *lease, ua *unansweredError, done func()) {
	defer d.bg.Done()
	defer done()
	resp, err := ua.settle(d.life)
	if err != nil {
		if d.life.Err() == nil {
			d.log.Warn("an acquire that had given up got no answer while its request id could still be answered; what became of it stays unknown", "lease", l.name, "err", err)
		}
		return
	}
	if !resp.Granted {
		return
	}
	d.mu.Lock()
	d.untoldLocked(l.sess, l.name, resp.Token)
	d.mu.Unlock()
	d.log.Info("ending a grant whose acquire had given up before its answer came", "lease", l.name, "token", resp.Token)
}

// acquireAsk is what an acquire asks the grantor for: name for owner,
// with a semaphore's limit, a value, shared (a read/write lock's shared
// grant, asked with AcquireShared, which a grantor too old for it refuses
// UNIMPLEMENTED) and a lock-delay.
type acquireAsk struct {
	name, owner string
	limit       int
	value       string
	shared      bool
	lockDelay   time.Duration
}

// dropSession forgets s as the session of its term, if it still is, and
// reports whether it did: the next sessionFor of the term makes a new
// one. For a session a grantor refused as another identity's
// (sessionTaken).
func (g *grantorConn) dropSession(s *gsession) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sessions[s.ttl] != s {
		return false
	}
	delete(g.sessions, s.ttl)
	return true
}

// sessionTaken reports whether err is a grantor's refusal of an acquire
// because its session belongs to another identity: PERMISSION_DENIED
// without the detail of a name rule's refusal (a sidecar may call
// Acquire, so no role refuses it).
func sessionTaken(err error) bool {
	return err != nil && status.Code(err) == codes.PermissionDenied && nameNotAllowed(err) == nil
}
