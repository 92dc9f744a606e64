package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// listAll makes the scripted grantor answer every keepalive as the real
// one does when the digests differ (grantor/keepalive.go): renewed,
// listing every grant standing in the session. add registers a grant as
// standing.
func listAll(r *rig) (add func(ref *grantorpb.LeaseRef)) {
	var mu sync.Mutex
	var refs []*grantorpb.LeaseRef
	r.g.set(func() {
		r.g.sessionReply = func(req *grantorpb.SessionRenewal, res *grantorpb.SessionRenewed) {
			mu.Lock()
			defer mu.Unlock()
			res.Listed, res.Leases = true, append([]*grantorpb.LeaseRef(nil), refs...)
		}
	})
	return func(ref *grantorpb.LeaseRef) {
		mu.Lock()
		defer mu.Unlock()
		refs = append(refs, ref)
	}
}

// standing registers the lease the daemon holds as name with the
// scripted grantor of listAll.
func (r *rig) standing(t *testing.T, add func(*grantorpb.LeaseRef), name string, g *ipc.Lease) {
	t.Helper()
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	add(&grantorpb.LeaseRef{Lease: name, Token: tokenOf(t, g), TtlNs: int64(ttl), Owner: r.d.leases[name].ownerID})
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
	add := listAll(r)
	keep, err := r.c.Acquire(ctxT(t), "keep", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	r.standing(t, add, "keep", keep)
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
		r.standing(t, add, name, l)
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
	add := listAll(r)
	keep, err := r.c.Acquire(ctxT(t), "keep", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	owner, _ := r.client(t)
	db, err := owner.Acquire(ctxT(t), "db/primary", ipc.AcquireOptions{TTL: ttl, Owner: ipc.OwnerDetached, NoRenew: true, LockDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r.standing(t, add, "keep", keep)
	r.standing(t, add, "db/primary", db)
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
	if rel := r.waitRelease(t); rel.Lease != "db/primary" || rel.Token != newToken {
		t.Fatalf("release %v, want db/primary token %d", rel, newToken)
	}
}
