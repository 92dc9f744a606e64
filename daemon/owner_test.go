package daemon

import (
	"context"
	"errors"
	"os/exec"
	"testing"

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
// grant, which nobody was told of, is named untold in the session's next
// keepalive (issue 22 item 3), sent at once; nothing enters the table.
func TestPIDOwnerEndedMidAcquireEndsGrant(t *testing.T) {
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
	r.waitUntold(t, "jobs/orphan")
	leases, err := r.c.Status(ctxT(t))
	if err != nil || len(leases) != 0 {
		t.Fatalf("status after the owner ended: %v %v, want no lease", leases, err)
	}
}

// The same for a connection owner that closes while its acquire waits.
func TestConnectionClosedMidAcquireEndsGrant(t *testing.T) {
	r := newRig(t)
	stall := r.stallAcquires("jobs/orphan")
	owner, _ := r.client(t)
	res := acquireAsync(context.Background(), owner, "jobs/orphan", ipc.AcquireOptions{TTL: ttl, Wait: ttl})
	r.waitAcquireRPC(t)
	owner.Close()
	<-res
	r.waitAcquireRPC(t) // settling
	close(stall)
	r.waitUntold(t, "jobs/orphan")
}

// waitUntold waits for a keepalive that names a grant of lease untold,
// and returns it. The fake clock stands still: the keepalive is sent at
// once.
func (r *rig) waitUntold(t *testing.T, lease string) *grantorpb.LeaseRef {
	t.Helper()
	for {
		select {
		case ka := <-r.g.keepalives:
			for _, s := range ka.Sessions {
				for _, u := range s.Untold {
					if u.Lease == lease {
						return u
					}
				}
			}
		case rel := <-r.g.releases:
			t.Fatalf("a release of %s (token %d, owner_ended %v): a grant nobody was told of is named untold, not released", rel.Lease, rel.Token, rel.OwnerEnded)
		case <-ctxT(t).Done():
			t.Fatalf("no keepalive names a grant of %s untold", lease)
		}
	}
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
