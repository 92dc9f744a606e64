package daemon

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// acquired is the outcome of an Acquire run in the background.
type acquired struct {
	l   *ipc.Lease
	err error
}

func acquireAsync(ctx context.Context, c *ipc.Client, name string, opt ipc.AcquireOptions) chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		l, err := c.Acquire(ctx, name, opt)
		ch <- acquired{l, err}
	}()
	return ch
}

func (r *rig) stallAcquires(name string) chan struct{} {
	stall := make(chan struct{})
	r.g.set(func() { r.g.stallName, r.g.stall = name, stall })
	return stall
}

// turnWaits reports every request that has to wait for its owner's turn.
func (r *rig) turnWaits() chan string {
	ch := make(chan string, 16)
	r.d.turns.mu.Lock()
	r.d.turns.waiting = func(owner, name string) { ch <- owner + " " + name }
	r.d.turns.mu.Unlock()
	return ch
}

func (r *rig) waitAcquireRPC(t *testing.T) *grantorpb.AcquireRequest {
	t.Helper()
	select {
	case req := <-r.g.acquires:
		return req
	case <-ctxT(t).Done():
		t.Fatal("no acquire reached the grantor")
	}
	return nil
}

// secondWaitsItsTurn fails the test if a second acquire reaches the
// grantor while the first is still in flight, and returns once the
// daemon holds the second back.
func (r *rig) secondWaitsItsTurn(t *testing.T, waits chan string) {
	t.Helper()
	select {
	case <-waits:
	case req := <-r.g.acquires:
		t.Fatalf("an acquire of %q by owner %s reached the grantor while an earlier request of that owner for the name was in flight", req.Lease, req.Owner)
	case <-ctxT(t).Done():
		t.Fatal("the second acquire neither waited nor reached the grantor")
	}
}

// Issue 9, item 1: acquires of one name by one owner on one connection
// take turns. The second, with another term, is held back while the first
// is at the grantor, then finds the first's lease and is refused for its
// other options: the grantor never sees two terms for one grant.
func TestAcquiresOfOneOwnerTakeTurnsOnOneConnection(t *testing.T) {
	r := newRig(t)
	waits := r.turnWaits()
	stall := r.stallAcquires("jobs/a")
	first := acquireAsync(ctxT(t), r.c, "jobs/a", ipc.AcquireOptions{TTL: ttl})
	r.waitAcquireRPC(t)
	second := acquireAsync(ctxT(t), r.c, "jobs/a", ipc.AcquireOptions{TTL: 2 * ttl})
	r.secondWaitsItsTurn(t, waits)
	close(stall)
	a := <-first
	if a.err != nil {
		t.Fatal(a.err)
	}
	b := <-second
	if !errors.Is(b.err, &ipc.Error{Code: ipc.CodeBadRequest}) {
		t.Fatalf("second acquire with another ttl: %v, want bad_request (this owner holds it already)", b.err)
	}
	select {
	case req := <-r.g.acquires:
		t.Fatalf("the second acquire went to the grantor after all: %v", req)
	default:
	}
	if n := r.d.turns.size(); n != 0 {
		t.Fatalf("%d turns left behind", n)
	}
}

// The same across connections: a pid owner is one owner whichever
// connection asks for it. The second acquire waits, then returns the
// first's grant.
func TestAcquiresOfOnePIDOwnerTakeTurnsAcrossConnections(t *testing.T) {
	r := newRig(t)
	owner := startSleeper(t)
	waits := r.turnWaits()
	stall := r.stallAcquires("jobs/p")
	opt := ipc.AcquireOptions{TTL: ttl, Owner: ipc.OwnerPID, OwnerPID: owner.Process.Pid}
	first := acquireAsync(ctxT(t), r.c, "jobs/p", opt)
	r.waitAcquireRPC(t)
	other, _ := r.client(t)
	second := acquireAsync(ctxT(t), other, "jobs/p", opt)
	r.secondWaitsItsTurn(t, waits)
	close(stall)
	a, b := <-first, <-second
	if a.err != nil || b.err != nil {
		t.Fatalf("acquires: %v, %v", a.err, b.err)
	}
	if a.l.Token != b.l.Token {
		t.Fatalf("one owner got two grants: tokens %s and %s", a.l.Token, b.l.Token)
	}
}

// The second path of issue 9, item 1: the first acquire's grant came late
// and is pending (invisible, waiting for its first renewal). A second
// acquire of the same owner does not go to the grantor beside it.
func TestAcquireWaitsForPendingGrantOfSameOwner(t *testing.T) {
	r := newRig(t)
	waits := r.turnWaits()
	r.g.set(func() { r.g.acquireDelay, r.g.silent = 2*ttl, true })
	first := acquireAsync(ctxT(t), r.c, "jobs/late", ipc.AcquireOptions{TTL: ttl, Wait: ttl})
	r.waitAcquireRPC(t)
	r.waitKeepAlive(t) // the pending grant's renewal, unanswered
	second := acquireAsync(ctxT(t), r.c, "jobs/late", ipc.AcquireOptions{TTL: ttl, Wait: ttl})
	r.secondWaitsItsTurn(t, waits)
	r.g.set(func() { r.g.acquireDelay, r.g.silent = 0, false })
	r.clock.Advance(r.d.cfg.RenewTimeout) // the renewal times out: the grant is given back
	if a := <-first; !errors.Is(a.err, ipc.ErrUnavailable) {
		t.Fatalf("first acquire: %v, want unavailable (its grant was not confirmed)", a.err)
	}
	if b := <-second; b.err != nil {
		t.Fatalf("second acquire, after the first gave its grant back: %v", b.err)
	}
}

func startSleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// Issue 9, item 3: a pid owner that ends while its acquire waits at the
// grantor does not leave a lease behind: the acquire is called off, what
// the grantor made of it is settled with the same request id, and that
// grant is released at once; nothing enters the table.
func TestPIDOwnerEndedMidAcquireGivesGrantBack(t *testing.T) {
	r := newRig(t)
	owner := startSleeper(t)
	stall := r.stallAcquires("jobs/orphan")
	res := acquireAsync(ctxT(t), r.c, "jobs/orphan", ipc.AcquireOptions{TTL: ttl, Owner: ipc.OwnerPID, OwnerPID: owner.Process.Pid, Wait: ttl})
	r.waitAcquireRPC(t)
	owner.Process.Kill()
	owner.Wait()
	settle := r.waitAcquireRPC(t) // the owner's end called the first attempt off
	if settle.WaitNs != 0 {
		t.Errorf("the settling attempt waits %dns; it should not queue", settle.WaitNs)
	}
	close(stall)
	a := <-res
	if !errors.Is(a.err, &ipc.Error{Code: ipc.CodeLost}) {
		t.Fatalf("acquire for an owner that ended: %v, want a lost error", a.err)
	}
	rel := r.waitRelease(t)
	if rel.Lease != "jobs/orphan" || rel.Owner != settle.Owner {
		t.Fatalf("released %q for %q, want jobs/orphan for %q", rel.Lease, rel.Owner, settle.Owner)
	}
	leases, err := r.c.Status(ctxT(t))
	if err != nil || len(leases) != 0 {
		t.Fatalf("status after the owner ended: %v %v, want no lease", leases, err)
	}
}

// The same for a connection owner that closes while its acquire waits.
func TestConnectionClosedMidAcquireGivesGrantBack(t *testing.T) {
	r := newRig(t)
	stall := r.stallAcquires("jobs/orphan")
	owner, _ := r.client(t)
	res := acquireAsync(context.Background(), owner, "jobs/orphan", ipc.AcquireOptions{TTL: ttl, Wait: ttl})
	r.waitAcquireRPC(t)
	owner.Close()
	<-res
	r.waitAcquireRPC(t) // settling
	close(stall)
	if rel := r.waitRelease(t); rel.Lease != "jobs/orphan" {
		t.Fatalf("released %q", rel.Lease)
	}
}

// Issue 9, item 4: a lease sitting out its lock-delay that is then lost
// (here: renewals fail past its deadline) is not released at the grantor:
// that would hand it to the next owner before the lock-delay is over. It
// lapses at the grantor's own expiry.
func TestLostLeaseKeepsItsLockDelay(t *testing.T) {
	r := newRig(t)
	owner, _ := r.client(t)
	if _, err := owner.Acquire(ctxT(t), "db/primary", ipc.AcquireOptions{TTL: ttl, LockDelay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	owner.Close()
	r.waitEvent(t, ipc.EventOwnerGone)
	r.g.set(func() { r.g.silent = true })
	r.clock.Advance(ttl)
	r.waitEvent(t, ipc.EventLost)
	// Every release the daemon started runs under d.bg: once that is
	// empty, a release of the lost lease would have reached the grantor.
	r.d.bg.Wait()
	select {
	case rel := <-r.g.releases:
		t.Fatalf("the lost lease was released at the grantor during its lock-delay: %v", rel)
	default:
	}
}

// Review R5-1: a lease lost while another lease keeps this host's grantor
// session renewed. The grantor renews sessions as a whole, so it keeps the
// lost grant, and the keepalive replies list it. The daemon must not give
// it back as a grant it does not know (another owner would get the name
// during the lock-delay) until the lock-delay, counted from the loss, is
// over; then it does. The same holds when the list shows a later grant of
// the same owner in its place, one that the owner was never told of (an
// acquire whose answer never came: review R6-C).
func TestLostLeaseInRenewedSessionKeepsItsLockDelay(t *testing.T) {
	for _, later := range []uint64{0, 100} {
		t.Run(fmt.Sprintf("token+%d", later), func(t *testing.T) { lostLeaseKeepsItsLockDelay(t, later) })
	}
}

// lostLeaseKeepsItsLockDelay is TestLostLeaseInRenewedSessionKeepsItsLockDelay
// with the lost grant listed as token+later.
func lostLeaseKeepsItsLockDelay(t *testing.T, later uint64) {
	r := newRig(t)
	const lockDelay = 2 * ttl
	keep, err := r.c.Acquire(ctxT(t), "keep", ipc.AcquireOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	owner, _ := r.client(t)
	db, err := owner.Acquire(ctxT(t), "db/primary", ipc.AcquireOptions{TTL: ttl, Owner: ipc.OwnerDetached, LockDelay: lockDelay, NoRenew: true})
	if err != nil {
		t.Fatal(err)
	}
	r.d.mu.Lock()
	refs := []*grantorpb.LeaseRef{
		{Lease: "keep", Token: tokenOf(t, keep), TtlNs: int64(ttl), Owner: r.d.leases["keep"].ownerID},
		{Lease: "db/primary", Token: tokenOf(t, db), TtlNs: int64(ttl), Owner: r.d.leases["db/primary"].ownerID},
	}
	r.d.mu.Unlock()
	var mu sync.Mutex
	r.g.set(func() {
		r.g.sessionReply = func(req *grantorpb.SessionRenewal, res *grantorpb.SessionRenewed) {
			mu.Lock()
			defer mu.Unlock()
			res.Listed, res.Leases = true, append([]*grantorpb.LeaseRef(nil), refs...)
		}
	})
	var lostAt time.Duration = -1 // since start, once db/primary was lost
	for step := 0; step < 3*int(lockDelay/(ttl/3)); step++ {
		// A third of the term: keep's renewal is due, and its reply
		// lists both grants.
		r.clock.Advance(ttl / 3)
		r.waitLeaseEvent(t, ipc.EventRenewed, "keep")
		r.d.mu.Lock() // the reply is applied: a give-back is queued by now
		r.d.mu.Unlock()
		r.d.bg.Wait() // and sent
		if lostAt < 0 {
			for _, ev := range r.backlog {
				if ev.Event == ipc.EventLost && ev.Lease == "db/primary" {
					lostAt = r.clock.Now().Sub(start)
				}
			}
			if lostAt >= 0 && later > 0 {
				// The owner asked again: the later grant stands in the
				// lost one's place.
				mu.Lock()
				refs[1] = &grantorpb.LeaseRef{Lease: "db/primary", Token: tokenOf(t, db) + later, TtlNs: int64(ttl), Owner: refs[1].Owner}
				mu.Unlock()
			}
		}
		select {
		case rel := <-r.g.releases:
			if rel.Lease != "db/primary" || rel.Token != tokenOf(t, db)+later {
				t.Fatalf("release %v, want db/primary's lost grant", rel)
			}
			if lostAt < 0 || r.clock.Now().Sub(start)-lostAt < lockDelay {
				t.Fatalf("db/primary's lost grant was given back %v after its loss (at %v), within its lock-delay of %v",
					r.clock.Now().Sub(start)-lostAt, lostAt, lockDelay)
			}
			return
		default:
		}
	}
	t.Fatalf("db/primary's lost grant (lost at %v) was not given back after its lock-delay of %v", lostAt, lockDelay)
}

// Issue 9, item 2, on the sidecar's side: the release of a lost lease is a
// request of its owner for the name, and takes the owner's turn. While it
// is still on its way (here: the grantor holds its answer), the same
// owner's next acquire of the name waits, so the release can never land
// after that new grant and end it.
func TestReleaseOfLostLeaseGoesBeforeTheOwnersNextAcquire(t *testing.T) {
	r := newRig(t)
	waits := r.turnWaits()
	if _, err := r.c.Acquire(ctxT(t), "jobs/again", ipc.AcquireOptions{TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	r.waitAcquireRPC(t)
	hold := make(chan struct{})
	r.g.set(func() { r.g.silent, r.g.releaseStall = true, hold })
	r.clock.Advance(ttl)
	r.waitLeaseEvent(t, ipc.EventLost, "jobs/again")
	r.waitRelease(t) // on its way, unanswered
	r.g.set(func() { r.g.silent = false })
	again := acquireAsync(ctxT(t), r.c, "jobs/again", ipc.AcquireOptions{TTL: ttl})
	r.secondWaitsItsTurn(t, waits)
	close(hold)
	r.waitAcquireRPC(t) // only now
	if a := <-again; a.err != nil {
		t.Fatal(a.err)
	}
}
