package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// standingGrants is what the scripted grantor of listAll holds.
type standingGrants struct {
	mu   sync.Mutex
	refs []*grantorpb.LeaseRef
}

// add registers a grant as standing.
func (g *standingGrants) add(ref *grantorpb.LeaseRef) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refs = append(g.refs, ref)
}

// drop ends the standing grants of name.
func (g *standingGrants) drop(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refs = slices.DeleteFunc(g.refs, func(ref *grantorpb.LeaseRef) bool { return ref.Lease == name })
}

// listAll makes the scripted grantor answer every keepalive as the real
// one does when the digests differ (grantor/keepalive.go): renewed,
// listing every grant standing in the session.
func listAll(r *rig) *standingGrants {
	g := &standingGrants{}
	r.g.set(func() {
		r.g.sessionReply = func(req *grantorpb.SessionRenewal, res *grantorpb.SessionRenewed) {
			g.mu.Lock()
			defer g.mu.Unlock()
			res.Listed, res.Leases = true, slices.Clone(g.refs)
		}
	})
	return g
}

// standing registers the lease the daemon holds as name with the
// scripted grantor of listAll.
func (r *rig) standing(t *testing.T, g *standingGrants, name string, l *ipc.Lease) {
	t.Helper()
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	g.add(&grantorpb.LeaseRef{Lease: name, Token: tokenOf(t, l), TtlNs: int64(ttl), Owner: r.d.leases[name].ownerID})
}

// lapse walks the fake clock one term in thirds, each third a renewal of
// "keep" (whose reply lists every standing grant), so that a no_renew
// lease acquired at the start has lapsed by the end.
func lapse(t *testing.T, r *rig) {
	t.Helper()
	for i := 0; i < 3; i++ {
		r.clock.Advance(ttl / 3)
		r.waitLeaseEvent(t, ipc.EventRenewed, "keep")
		<-r.g.keepalives // keep the scripted grantor's channel from filling
	}
	r.d.mu.Lock() // the last reply is applied
	r.d.mu.Unlock()
	r.d.bg.Wait()
}

// A lost lease sitting out its lock-delay still stands at the grantor, so
// it counts against its user's max_leases_per_uid until the delay is
// over: a user cannot keep names standing without bound by letting
// no_renew leases with a lock-delay lapse.
func TestLostLeaseInLockDelayCountsAgainstTheUsersLimit(t *testing.T) {
	const limit = 3
	r := newRigWith(t, func(c *Config) { c.MaxLeasesPerUID = limit })
	grants := listAll(r)
	keep, err := r.c.Acquire(ctxT(t), "keep", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	r.standing(t, grants, "keep", keep)
	owner, _ := r.client(t)
	standing := 1 // keep
	for i := 0; i < 2*limit; i++ {
		name := fmt.Sprintf("ld/%d", i)
		l, err := owner.Acquire(ctxT(t), name, ipc.AcquireOptions{TTL: ttl, Owner: ipc.OwnerDetached, NoRenew: true, LockDelay: time.Hour})
		if err != nil {
			if !errors.Is(err, &ipc.Error{Code: ipc.CodeResourceExhausted}) || standing < limit {
				t.Fatalf("acquire %d with %d grants standing: %v, want resource_exhausted at %d", i, standing, err, limit)
			}
			return
		}
		r.standing(t, grants, name, l)
		standing++
		lapse(t, r)
		if len(r.g.releases) > 0 {
			t.Fatalf("a grant was released within its lock-delay: %v", <-r.g.releases)
		}
	}
	t.Fatalf("%d grants standing at the grantor for one user, max_leases_per_uid %d", standing, limit)
}

// While a lost grant sits out its lock-delay in a session another lease
// keeps renewed, the session's digest counts it, so that the grantor's
// replies do not list the whole session at every renewal (renewals cost
// per host, not per lease: DESIGN.md section 2, Sessions).
func TestKeepaliveDigestCountsTheDelayedGrant(t *testing.T) {
	r := newRig(t)
	grants := listAll(r)
	keep, err := r.c.Acquire(ctxT(t), "keep", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	owner, _ := r.client(t)
	db, err := owner.Acquire(ctxT(t), "db/primary", ipc.AcquireOptions{TTL: ttl, Owner: ipc.OwnerDetached, NoRenew: true, LockDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r.standing(t, grants, "keep", keep)
	r.standing(t, grants, "db/primary", db)
	lapse(t, r)
	r.d.mu.Lock()
	_, known := r.d.leases["db/primary"]
	r.d.mu.Unlock()
	if known {
		t.Fatal("db/primary did not lapse")
	}
	r.clock.Advance(ttl / 3)
	ka := r.waitKeepAlive(t)
	want := grantorpb.TokenDigest(tokenOf(t, keep)) + grantorpb.TokenDigest(tokenOf(t, db))
	if len(ka.Sessions) != 1 || ka.Sessions[0].LeaseSetVersion != want {
		t.Fatalf("keepalive during db/primary's lock-delay: %v, want one session with digest %d (keep and the lost grant the grantor holds)", ka.Sessions, want)
	}
	// The grantor no longer holds it (an operator revoked it, say): once
	// a reply lists the session without it, the digest leaves it out.
	r.waitLeaseEvent(t, ipc.EventRenewed, "keep")
	grants.drop("db/primary")
	r.clock.Advance(ttl / 3)
	r.waitKeepAlive(t)
	r.waitLeaseEvent(t, ipc.EventRenewed, "keep") // its reply listed keep alone
	r.clock.Advance(ttl / 3)
	ka = r.waitKeepAlive(t)
	if want := grantorpb.TokenDigest(tokenOf(t, keep)); len(ka.Sessions) != 1 || ka.Sessions[0].LeaseSetVersion != want {
		t.Fatalf("keepalive after the grantor listed the session without the lost grant: %v, want digest %d (keep alone)", ka.Sessions, want)
	}
}

// The owner of a lost grant asks for the name again during its own
// lock-delay, and crashes before the answer comes (the case a lock-delay
// is for). The grantor ends the lost grant when its owner asks again, and
// the new grant holds the name in its place: nobody was told of it, but
// it is kept until the lost grant's lock-delay is over, then given back.
func TestReacquireDuringOwnLockDelayKeepsTheName(t *testing.T) {
	r := newRig(t)
	const lockDelay = time.Hour
	owner, _ := r.client(t)
	db, err := owner.Acquire(ctxT(t), "db/primary", ipc.AcquireOptions{TTL: ttl, LockDelay: lockDelay})
	if err != nil {
		t.Fatal(err)
	}
	r.d.mu.Lock()
	lost := r.d.leases["db/primary"]
	r.d.mu.Unlock()
	// Renewals fail past its deadline: lost, and kept for its lock-delay.
	r.g.set(func() { r.g.silent = true })
	r.clock.Advance(ttl)
	r.waitLeaseEvent(t, ipc.EventLost, "db/primary")
	until := r.clock.Now().Add(lockDelay)
	r.d.bg.Wait()
	if len(r.g.releases) > 0 {
		t.Fatalf("released within the lock-delay before the re-acquire: %v", <-r.g.releases)
	}

	for len(r.g.acquires) > 0 {
		<-r.g.acquires // the first grant's
	}
	stall := r.stallAcquires("db/primary")
	res := acquireAsync(context.Background(), owner, "db/primary", ipc.AcquireOptions{TTL: ttl, Wait: ttl})
	r.waitAcquireRPC(t)
	owner.Close() // the owner crashes while its acquire is on the way
	<-res
	r.waitAcquireRPC(t) // the abandoned acquire asks what became of it
	r.g.set(func() { r.g.silent = false })
	close(stall)
	// The abandoned acquire is over once its turn is free.
	done, err := r.d.turns.take(ctxT(t), lost.ownerID, "db/primary")
	if err != nil {
		t.Fatal(err)
	}
	done()
	r.d.bg.Wait()
	r.d.mu.Lock()
	dl := r.d.delayed[lost.sess][delayKey{"db/primary", lost.ownerID}]
	queued := len(r.d.unreleased[turnKey{lost.ownerID, "db/primary"}])
	r.d.mu.Unlock()
	if len(r.g.releases) > 0 || queued > 0 {
		t.Fatalf("the owner's new grant of db/primary, which ended its lost grant %d at the grantor, was given back within the lock-delay", tokenOf(t, db))
	}
	if dl == nil || dl.token <= tokenOf(t, db) {
		t.Fatalf("the lock-delay does not stand on the new grant: %+v", dl)
	}

	// Once the lock-delay is over, the new grant is given back when a
	// keepalive reply lists it.
	newToken := dl.token
	r.g.set(func() {
		r.g.sessionReply = func(req *grantorpb.SessionRenewal, res *grantorpb.SessionRenewed) {
			res.Listed = true
			res.Leases = []*grantorpb.LeaseRef{{Lease: "db/primary", Token: newToken, TtlNs: int64(ttl), Owner: lost.ownerID}}
		}
	})
	r.clock.Advance(until.Sub(r.clock.Now()))
	// The keepalives of the delay's session that went unanswered time
	// out, and the session is asked after.
	if rel := r.advanceUntilRelease(t, 2*r.d.cfg.RenewTimeout); rel.Lease != "db/primary" || rel.Token != newToken {
		t.Fatalf("release %v, want db/primary token %d", rel, newToken)
	}
}

// waitLeaseEvents returns the next event about the named lease of one of
// the given kinds, dropping the others about it.
func (r *rig) waitLeaseEvents(t *testing.T, lease string, kinds ...string) *ipc.Event {
	t.Helper()
	ctx := ctxT(t)
	for {
		select {
		case ev := <-r.events:
			if ev.Lease == lease && slices.Contains(kinds, ev.Event) {
				return ev
			}
		case <-ctx.Done():
			t.Fatalf("no %v event about %s", kinds, lease)
		}
	}
}

// loseWithLockDelay has owner acquire db/primary with opt (a lock-delay),
// lets its renewals go unanswered past its deadline, and returns it once
// it is lost and kept for its lock-delay, with the instant of the loss.
func loseWithLockDelay(t *testing.T, r *rig, owner *ipc.Client, opt ipc.AcquireOptions) (*ipc.Lease, clockwatch.Instant) {
	t.Helper()
	db, err := owner.Acquire(ctxT(t), "db/primary", opt)
	if err != nil {
		t.Fatal(err)
	}
	r.g.set(func() { r.g.silent = true })
	r.clock.Advance(ttl)
	r.waitLeaseEvent(t, ipc.EventLost, "db/primary")
	r.d.bg.Wait()
	if len(r.g.releases) > 0 {
		t.Fatalf("released within the lock-delay: %v", <-r.g.releases)
	}
	return db, r.clock.Now()
}

// advanceUntilRelease walks the fake clock forward in small steps, at
// most limit, until a release arrives, and returns it (as
// advanceUntilKeepAlive does for keepalives).
func (r *rig) advanceUntilRelease(t *testing.T, limit time.Duration) *grantorpb.ReleaseRequest {
	t.Helper()
	const step = 100 * time.Millisecond
	for walked := time.Duration(0); walked <= limit; walked += step {
		select {
		case rel := <-r.g.releases:
			return rel
		case <-time.After(20 * time.Millisecond):
		}
		r.clock.Advance(step)
	}
	return r.waitRelease(t)
}

// noReleaseWithin fails the test if the daemon sent or queued a release
// of name. The caller waited for the request that could have.
func (r *rig) noReleaseWithin(t *testing.T, name string, why string) {
	t.Helper()
	r.d.bg.Wait()
	r.d.mu.Lock()
	queued := 0
	for k, qs := range r.d.unreleased {
		if k.name == name {
			queued += len(qs)
		}
	}
	r.d.mu.Unlock()
	if len(r.g.releases) > 0 || queued > 0 {
		t.Fatalf("%s: released within the lost grant's lock-delay (%d queued)", why, queued)
	}
}

// Review R7-1: a pid owner's lease with a lock-delay is lost, and the same
// process asks for the name again in that time. Its new grant comes late,
// so it is pending (nobody is told of it until a renewal confirms it),
// and the process dies before that. The new grant holds the name in the
// lost one's place, so its owner's end must not free it before the lost
// grant's lock-delay is over.
func TestPendingReacquireOfDeadPIDOwnerKeepsTheLockDelay(t *testing.T) {
	r := newRig(t)
	owner := startSleeper(t)
	opt := ipc.AcquireOptions{TTL: ttl, Owner: ipc.OwnerPID, OwnerPID: owner.Process.Pid, LockDelay: time.Hour}
	db, _ := loseWithLockDelay(t, r, r.c, opt)

	// The same pid asks again from a connection of its own; the grant
	// comes late (pending), and its confirming renewal goes unanswered.
	r.g.set(func() { r.g.acquireDelay = 2 * ttl })
	requester, _ := r.client(t)
	res := acquireAsync(context.Background(), requester, "db/primary", opt)
	r.waitLeaseEvent(t, ipc.EventAcquired, "db/primary") // pending in the table
	r.d.mu.Lock()
	l := r.d.leases["db/primary"]
	r.d.mu.Unlock()
	if l == nil || !l.pending {
		t.Fatalf("the re-acquire's grant is not pending: %+v", l)
	}
	owner.Process.Kill() // dies before it is told of the new grant
	owner.Wait()
	r.waitLeaseEvent(t, ipc.EventReleased, "db/primary")
	requester.Close()
	<-res
	done, err := r.d.turns.take(ctxT(t), l.ownerID, "db/primary") // the acquire is over
	if err != nil {
		t.Fatal(err)
	}
	done()
	r.noReleaseWithin(t, "db/primary", "the pending re-acquire of a pid owner that died")
	r.d.mu.Lock()
	dl := r.d.delayed[l.sess][delayKey{"db/primary", l.ownerID}]
	r.d.mu.Unlock()
	if dl == nil || dl.token != l.token || l.token <= tokenOf(t, db) {
		t.Fatalf("the lock-delay does not stand on the new grant %d: %+v", l.token, dl)
	}
}

// Review R7-5: the same with a connection owner whose re-acquire's grant
// is never confirmed: the acquire answers unavailable, and the grant is
// kept for the lost grant's lock-delay.
func TestUnconfirmedReacquireKeepsTheLockDelay(t *testing.T) {
	r := newRig(t)
	owner, _ := r.client(t)
	db, _ := loseWithLockDelay(t, r, owner, ipc.AcquireOptions{TTL: ttl, LockDelay: time.Hour})
	r.g.set(func() { r.g.acquireDelay = 2 * ttl })
	for len(r.g.keepalives) > 0 {
		<-r.g.keepalives
	}
	res := acquireAsync(ctxT(t), owner, "db/primary", ipc.AcquireOptions{TTL: ttl})
	for ev := r.waitLeaseEvent(t, ipc.EventAcquired, "db/primary"); ev.Token == db.Token; {
		ev = r.waitLeaseEvent(t, ipc.EventAcquired, "db/primary") // the new grant, pending in the table
	}
	r.d.mu.Lock()
	l := r.d.leases["db/primary"]
	r.d.mu.Unlock()
	if l == nil || !l.pending {
		t.Fatalf("the re-acquire's grant is not pending: %+v", l)
	}
	// Its renewal goes unanswered (as do the keepalives kept for the
	// lost grant's delay in the same session, before and with it).
	var a acquired
	for answered := false; !answered; {
		r.advanceUntilKeepAlive(t, 2*r.d.cfg.RenewTimeout)
		r.clock.Advance(r.d.cfg.RenewTimeout)
		select {
		case a = <-res:
			answered = true
		case <-time.After(100 * time.Millisecond):
		}
	}
	if !errors.Is(a.err, &ipc.Error{Code: ipc.CodeUnavailable}) {
		t.Fatalf("re-acquire whose grant was not confirmed: %v, %v; want unavailable", a.l, a.err)
	}
	r.noReleaseWithin(t, "db/primary", "an unconfirmed re-acquire")
	r.d.mu.Lock()
	dl := r.d.delayed[l.sess][delayKey{"db/primary", l.ownerID}]
	r.d.mu.Unlock()
	if dl == nil || dl.token != l.token || l.token <= tokenOf(t, db) {
		t.Fatalf("the lock-delay does not stand on the new grant %d: %+v", l.token, dl)
	}
}

// Review R7-2: an owner whose lease with a lock-delay was lost asks for
// the name again with no lock-delay, is told the new grant, and ends. The
// new grant took over the lost grant's lock-delay: the name stays held
// until that is over, and is released then.
func TestToldReacquireKeepsTheLostGrantsLockDelay(t *testing.T) {
	r := newRig(t)
	const lockDelay = time.Hour
	owner, _ := r.client(t)
	_, lostAt := loseWithLockDelay(t, r, owner, ipc.AcquireOptions{TTL: ttl, LockDelay: lockDelay})
	r.g.set(func() { r.g.silent = false })
	again, err := owner.Acquire(ctxT(t), "db/primary", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	owner.Close()
	if ev := r.waitLeaseEvents(t, "db/primary", ipc.EventOwnerGone, ipc.EventReleased); ev.Event != ipc.EventOwnerGone {
		t.Fatalf("the re-acquired lease's owner ended %v after the loss of a grant with a lock-delay of %v: %s, want %s",
			r.clock.Now().Sub(lostAt), lockDelay, ev.Event, ipc.EventOwnerGone)
	}
	r.noReleaseWithin(t, "db/primary", "a told re-acquire whose owner ended")
	r.clock.Advance(lostAt.Add(lockDelay).Sub(r.clock.Now()))
	if rel := r.waitRelease(t); rel.Lease != "db/primary" || rel.Token != tokenOf(t, again) {
		t.Fatalf("release %v after the lock-delay, want db/primary token %s", rel, again.Token)
	}
}

// Review R7-3: a pid owner ends while its acquire's grant is pending. The
// acquire is answered (not left waiting on a renewal for as long as the
// requesting connection stays), and the grant is given back.
func TestPendingGrantOfEndedPIDOwnerIsAnsweredAndGivenBack(t *testing.T) {
	r := newRig(t)
	owner := startSleeper(t)
	opt := ipc.AcquireOptions{TTL: ttl, Owner: ipc.OwnerPID, OwnerPID: owner.Process.Pid}
	r.g.set(func() { r.g.acquireDelay, r.g.silent = 2*ttl, true })
	requester, _ := r.client(t)
	res := acquireAsync(ctxT(t), requester, "jobs/x", opt)
	r.waitLeaseEvent(t, ipc.EventAcquired, "jobs/x")
	owner.Process.Kill()
	owner.Wait()
	r.waitLeaseEvent(t, ipc.EventReleased, "jobs/x")
	if a := <-res; a.err == nil {
		t.Fatalf("the acquire of an owner that ended before its grant was confirmed succeeded: %v", a.l)
	}
	if rel := r.waitRelease(t); rel.Lease != "jobs/x" {
		t.Fatalf("released %q, want jobs/x", rel.Lease)
	}
}

// Review R8-1: an owner whose lease with a lock-delay of an hour was lost
// asks for the name again with a lock-delay of a second. Its new grant is
// not pending, so granted() lists it and only then, after d.mu was let go,
// tells it (toldLocked). The owner ends in that window (its connection
// closes, or its process dies): ownerEnded sets releaseAt from the grant's
// own lock-delay, as delayFloor is still zero. toldLocked then ends the
// lost grant's delay and raises delayFloor, but not releaseAt: expire
// releases the name a second later, an hour early (R7-2 in a window).
// The steps below are granted()'s and ownerEnded's, in that interleaving.
func TestOwnerEndBetweenListingAndTellingKeepsTheLostGrantsLockDelay(t *testing.T) {
	r := newRig(t)
	owner, _ := r.client(t)
	_, lostAt := loseWithLockDelay(t, r, owner, ipc.AcquireOptions{TTL: ttl, LockDelay: time.Hour})

	r.d.mu.Lock()
	var b *lease
	for s, m := range r.d.delayed {
		for k, dl := range m {
			now := r.clock.Now()
			// the re-acquire's grant, as granted() lists it (not pending)
			b = &lease{name: k.name, ttl: ttl, sess: s, owner: ipc.OwnerConnection, ownerID: k.owner, uid: dl.uid,
				token: dl.token + 1, t0: now, deadline: now.Add(ttl / 2), lockDelay: time.Second,
				releaseAt: never, renewed: make(chan struct{}), stopWatch: func() {}}
		}
	}
	if b == nil {
		r.d.mu.Unlock()
		t.Fatal("no delay kept for the lost lease")
	}
	r.d.listLocked(b)
	r.d.mu.Unlock()

	r.d.ownerEnded(b, ipc.ReasonOwnerDisconnected) // before the acquire tells it

	r.d.mu.Lock()
	r.d.toldLocked(b) // the acquire's answer
	releaseAt := b.releaseAt
	r.d.mu.Unlock()
	if want := lostAt.Add(time.Hour); releaseAt.Before(want) {
		t.Fatalf("the re-acquired grant is released %v after the loss, want no earlier than the lost grant's lock-delay (%v)",
			releaseAt.Sub(lostAt), time.Hour)
	}
}

// reacquired lists, as granted() does before it tells it, the owner's new
// grant of the name of its one lost grant sitting out a lock-delay, with
// the lock-delay of its own given.
func reacquired(t *testing.T, r *rig, lockDelay time.Duration) *lease {
	t.Helper()
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	var b *lease
	for s, m := range r.d.delayed {
		for k, dl := range m {
			now := r.clock.Now()
			b = &lease{name: k.name, ttl: ttl, sess: s, owner: ipc.OwnerConnection, ownerID: k.owner, uid: dl.uid,
				token: dl.token + 1, t0: now, deadline: now.Add(ttl / 2), lockDelay: lockDelay,
				releaseAt: never, renewed: make(chan struct{}), stopWatch: func() {}}
		}
	}
	if b == nil {
		t.Fatal("no delay kept for the lost lease")
	}
	r.d.listLocked(b)
	r.g.set(func() { r.g.silent = false }) // releases get through
	return b
}

// Review 17, D1: the R8-1 window the other way round. An owner whose
// lost lease has a lock-delay of an hour asks for the name again with no
// lock-delay of its own; granted() lists the new grant, lets d.mu go and
// tells it (toldLocked raises its delayFloor); the owner ends around the
// telling. ownerEnded read, under d.mu, that the grant had nothing to
// hold for, let d.mu go and released it by that stale reading, an hour
// early. It now decides and acts in one critical section
// (ownerEndedLocked; the expire path likewise), so a telling comes
// wholly before or after; this test runs the "after" order, and
// TestOwnerEndBetweenListingAndTellingKeepsTheLostGrantsLockDelay the
// "before".
func TestOwnerEndRacingTheTellingKeepsTheLostGrantsLockDelay(t *testing.T) {
	r := newRig(t)
	owner, _ := r.client(t)
	loseWithLockDelay(t, r, owner, ipc.AcquireOptions{TTL: ttl, LockDelay: time.Hour})
	b := reacquired(t, r, 0)
	r.d.mu.Lock() // granted(), once b is listed and valid
	r.d.toldLocked(b)
	r.d.mu.Unlock()
	r.d.ownerEnded(b, ipc.ReasonOwnerDisconnected)
	r.noReleaseWithin(t, "db/primary", "a re-acquire whose owner ended once it was told")
}

// Review 17, D2: PROTOCOL.md says of an owner told a new grant during its
// lost grant's lock-delay that "when the new grant ends, the name stays
// held until it is over". An explicit release of the new grant ends it at
// the grantor at once. (For a pid owner any process of its uid may
// acquire as that pid and release, so a stopped owner's lock-delay is one
// acquire+release long.)
func TestReleaseOfToldReacquireKeepsTheLostGrantsLockDelay(t *testing.T) {
	r := newRig(t)
	owner, _ := r.client(t)
	loseWithLockDelay(t, r, owner, ipc.AcquireOptions{TTL: ttl, LockDelay: time.Hour})
	r.g.set(func() { r.g.silent = false })
	if _, err := owner.Acquire(ctxT(t), "db/primary", ipc.AcquireOptions{TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	if err := owner.Release(ctxT(t), "db/primary"); err != nil {
		t.Fatal(err)
	}
	r.noReleaseWithin(t, "db/primary", "an explicit release of a told re-acquire")
}

// Review 17, D3 (liveness): the owner of a lost grant in its lock-delay
// asks for the name again. Its new grant would take the lost grant's
// place at the grantor (same session and owner: nothing more stands),
// but reserveLease counts the delay and the acquire both: a user at
// max_leases_per_uid cannot take back its own name until the delay is
// over.
func TestReacquireDuringOwnLockDelayAtTheUsersLimit(t *testing.T) {
	r := newRigWith(t, func(c *Config) { c.MaxLeasesPerUID = 1 })
	owner, _ := r.client(t)
	loseWithLockDelay(t, r, owner, ipc.AcquireOptions{TTL: ttl, LockDelay: time.Hour})
	r.g.set(func() { r.g.silent = false })
	if _, err := owner.Acquire(ctxT(t), "db/primary", ipc.AcquireOptions{TTL: ttl}); err != nil {
		t.Fatalf("the owner's re-acquire of its own name during its lock-delay, at max_leases_per_uid 1: %v", err)
	}
}

// Review 17, D4: a lost lease with a lock-delay stays held at the grantor
// only while its session is renewed. Sessions are per term (sessionFor):
// a lease of another ttl_ms on the host rides another session, so the
// lost grant's session was renewed by nothing while the delay ran, and
// the grantor freed the name a term after the loss. The daemon now keeps
// a session with delays renewed itself.
func TestOtherLeaseOfTheHostKeepsTheDelayedGrantsSessionRenewed(t *testing.T) {
	r := newRig(t)
	if _, err := r.c.Acquire(ctxT(t), "keep", ipc.AcquireOptions{TTL: 2 * ttl}); err != nil {
		t.Fatal(err)
	}
	owner, _ := r.client(t)
	if _, err := owner.Acquire(ctxT(t), "db/primary", ipc.AcquireOptions{TTL: ttl, Owner: ipc.OwnerDetached, NoRenew: true, LockDelay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	r.d.mu.Lock()
	lost := r.d.leases["db/primary"].sess
	r.d.mu.Unlock()
	// keep is renewed every 2ttl/3; db/primary lapses after ttl and sits
	// out its lock-delay of an hour.
	sent := 0
	for i := 0; i < 6; i++ {
		r.clock.Advance(2 * ttl / 3)
		r.waitLeaseEvent(t, ipc.EventRenewed, "keep")
		for len(r.g.keepalives) > 0 {
			for _, s := range (<-r.g.keepalives).Sessions {
				if s.Session == lost.id && i >= 2 {
					sent++
				}
			}
		}
	}
	r.d.mu.Lock()
	_, held := r.d.leases["db/primary"]
	delays := len(r.d.delayed[lost])
	r.d.mu.Unlock()
	if held || delays != 1 {
		t.Fatalf("db/primary did not lapse into its lock-delay (held %v, delays %d)", held, delays)
	}
	if sent == 0 {
		t.Fatalf("keep (ttl %v) was renewed four times after db/primary (ttl %v) lapsed, its session %s (lock-delay of an hour) not once: the grantor frees the name a term after the loss", 2*ttl, ttl, lost.id)
	}
}

// Review 18, finding D-a (liveness): since D4 a session whose only
// content is a lost grant sitting out its lock-delay is put in every
// keepalive batch at a third of its term (delaysDueLocked), and
// batchTimeout gives a batch the smallest ttl/4 of its sessions. A lost
// lease of the shortest term (MinTTL 1 s: 250 ms) with a lock-delay of an
// hour thus makes every keepalive of the host, the live leases' too,
// time out after 250 ms for that hour, instead of RenewTimeout (2 s):
// with a grantor answering in 300 ms (the slowness that lost the short
// lease in the first place) no live lease of any user on the host is
// renewed again, and all are lost at their deadlines. Before D4 the dead
// session left the batches when its lease was lost.
func TestDelayedShortTermSessionDoesNotShortenLiveRenewals(t *testing.T) {
	r := newRig(t)
	if _, err := r.c.Acquire(ctxT(t), "keep", ipc.AcquireOptions{TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	const short = time.Second // MinTTL
	loseShortLeaseIntoLockDelay(t, r, short)

	r.d.mu.Lock()
	keep := r.d.leases["keep"]
	at := keep.renewAt
	delays := 0
	for _, m := range r.d.delayed {
		for _, dl := range m {
			delays++
			at = max(at, dl.renewAt)
		}
	}
	r.d.mu.Unlock()
	if delays != 1 {
		t.Fatalf("%d delays, want db/primary's", delays)
	}
	at = max(at, r.clock.Now()).Add(time.Millisecond)
	due := r.d.dueSessions(at) // what the renew loop sends at keep's next renewal
	carriesKeep := false
	for _, sb := range due {
		for _, l := range sb.leases {
			carriesKeep = carriesKeep || l == keep
		}
	}
	if !carriesKeep {
		t.Fatalf("keep's renewal is not due at %v", at)
	}
	want := min(r.d.cfg.RenewTimeout, ttl/4)
	if got := batchTimeout(r.d.cfg.RenewTimeout, due); got < want {
		t.Fatalf("the keepalive renewing keep (ttl %v) times out after %v, not %v: a lost lease's session (ttl %v) kept for its lock-delay rides with it", ttl, got, want, short)
	}
}

// Review 19, D-a': since 2a2c7e8 a keepalive that carries only a session
// kept for a lost grant's lock-delay times out after RenewTimeout (2 s),
// not a quarter of the session's term: for a 1 s session renewed every
// 333 ms one unanswered keepalive (a lost reply, a leader change) is not
// retried before the grantor's expiry of the session (~1.1 s), which
// frees the name in the middle of its lock-delay though the grantor could
// be reached. At 2cd0b4f this batch timed out after 250 ms.
func TestDelayedSessionAloneKeepsAKeepaliveTimeoutWithinItsTerm(t *testing.T) {
	r := newRig(t)
	const short = time.Second // MinTTL
	loseShortLeaseIntoLockDelay(t, r, short)

	r.d.mu.Lock()
	at := r.clock.Now()
	delays := 0
	for _, m := range r.d.delayed {
		for _, dl := range m {
			delays++
			at = max(at, dl.renewAt)
		}
	}
	r.d.mu.Unlock()
	if delays != 1 {
		t.Fatalf("%d delays, want db/primary's", delays)
	}
	due := r.d.dueSessions(at.Add(time.Millisecond))
	if len(due) == 0 {
		t.Fatalf("the delayed session is not due at %v", at)
	}
	if got := batchTimeout(r.d.cfg.RenewTimeout, due); got > short/4 {
		t.Fatalf("a keepalive carrying only the delayed session (ttl %v) times out after %v: one lost reply and the grantor frees the name within its lock-delay", short, got)
	}
}

// loseShortLeaseIntoLockDelay has a detached, unrenewed db/primary of term
// short and a lock-delay of an hour lapse, and returns once it is lost
// and kept for its lock-delay.
func loseShortLeaseIntoLockDelay(t *testing.T, r *rig, short time.Duration) {
	t.Helper()
	owner, _ := r.client(t)
	if _, err := owner.Acquire(ctxT(t), "db/primary", ipc.AcquireOptions{TTL: short, Owner: ipc.OwnerDetached, NoRenew: true, LockDelay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(short)
	r.waitLeaseEvent(t, ipc.EventLost, "db/primary")
	r.d.bg.Wait()
}
