package daemon

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// Lock-delay is the grantor's (issue 22 item 2): the daemon states a
// lease's lock-delay in its acquire, and when the lease's owner ends it
// releases the grant at once, saying so (owner_ended), and keeps nothing.
func TestOwnerEndIsReportedToTheGrantorAtOnce(t *testing.T) {
	r := newRig(t)
	owner, _ := r.client(t)
	const lockDelay = 2 * time.Second
	if _, err := owner.Acquire(ctxT(t), "db/primary", ipc.AcquireOptions{TTL: ttl, LockDelay: lockDelay}); err != nil {
		t.Fatal(err)
	}
	if req := r.waitAcquireRPC(t); time.Duration(req.LockDelayNs) != lockDelay {
		t.Fatalf("acquire sent lock_delay_ns %d, want %d", req.LockDelayNs, lockDelay)
	}
	owner.Close()
	// No clock moves: nothing waits for the delay on this side.
	if ev := r.waitLeaseEvent(t, ipc.EventReleased, "db/primary"); ev.Reason != ipc.ReasonOwnerDisconnected {
		t.Fatalf("released event %+v, want reason %s", ev, ipc.ReasonOwnerDisconnected)
	}
	if rel := r.waitRelease(t); rel.Lease != "db/primary" || !rel.OwnerEnded {
		t.Fatalf("release %v, want db/primary with owner_ended", rel)
	}
	if leases, err := r.c.Status(ctxT(t)); err != nil || len(leases) != 0 {
		t.Fatalf("status after the owner ended: %+v %v", leases, err)
	}
}

// A lost lease is released as its owner's end (its owner may still act on
// a resource that does not check tokens: the grantor keeps its
// lock-delay); an explicit release is not.
func TestLostLeaseIsReleasedAsOwnerEndedAndExplicitReleaseIsNot(t *testing.T) {
	r := newRig(t)
	kept, err := r.c.Acquire(ctxT(t), "kept", ipc.AcquireOptions{TTL: ttl, Owner: ipc.OwnerDetached, LockDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.c.ReleaseToken(ctxT(t), "kept", kept.Token); err != nil {
		t.Fatal(err)
	}
	if rel := r.waitRelease(t); rel.Lease != "kept" || rel.OwnerEnded {
		t.Fatalf("explicit release %v, want kept without owner_ended", rel)
	}
	if _, err := r.c.Acquire(ctxT(t), "db/primary", ipc.AcquireOptions{TTL: ttl, Owner: ipc.OwnerDetached, LockDelay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	r.g.set(func() { r.g.silent = true })
	r.clock.Advance(ttl)
	r.waitLeaseEvent(t, ipc.EventLost, "db/primary")
	if rel := r.waitRelease(t); rel.Lease != "db/primary" || !rel.OwnerEnded {
		t.Fatalf("release of the lost lease %v, want owner_ended", rel)
	}
}

// Issue 22: a lease with a lock-delay lost while another lease keeps its
// grantor session renewed (here: a detached no_renew lease whose deadline
// passed), against the real grantor. The name stays held for
// the whole lock-delay, counted from the owner's end, and the waiter
// queued meanwhile gets it once the grantor ends the delay. Before the
// grantor kept lock-delays, the daemon kept this one, and the next
// keepalive listing of the session gave the grant back early.
func TestLeaseLostDuringLockDelayKeepsTheNameForTheWholeDelay(t *testing.T) {
	timing := clockwatch.DefaultTiming()
	cfg := DefaultConfig()
	cfg.Grantors = []string{startGrantor(t, clockwatch.System, timing)}
	cfg.Timing = timing
	_, sock := startDaemon(t, cfg)
	a, k, b := &ipc.Client{Socket: sock}, &ipc.Client{Socket: sock}, &ipc.Client{Socket: sock}
	t.Cleanup(func() { a.Close(); k.Close(); b.Close() })

	const term, lockDelay = 2 * time.Second, 4 * time.Second
	if _, err := k.Acquire(ctxT(t), "ld/keeper", ipc.AcquireOptions{TTL: term}); err != nil {
		t.Fatal(err)
	}
	la, err := a.Acquire(ctxT(t), "ld/db", ipc.AcquireOptions{TTL: term, Owner: ipc.OwnerDetached, NoRenew: true, LockDelay: lockDelay})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	// It is lost at its deadline, not before: the delay counts from no
	// earlier than that.
	ended := clockwatch.Instant(la.DeadlineBoottimeNs)
	_, err = b.Acquire(ctxT(t), "ld/db", ipc.AcquireOptions{TTL: term})
	var ie *ipc.Error
	if !errors.As(err, &ie) || ie.Code != ipc.CodeLeaseHeld || ie.HolderToken != la.Token {
		t.Fatalf("acquire during the lease or its lock-delay: %v, want lease_held naming grant %s", err, la.Token)
	}
	r := <-acquireAsync(ctxT(t), b, "ld/db", ipc.AcquireOptions{TTL: term, Wait: 5 * lockDelay})
	got := clockwatch.System.Now()
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	if d := got.Sub(ended); d < lockDelay {
		t.Fatalf("the waiter got ld/db %v after its owner ended, within the lock-delay of %v", d, lockDelay)
	}
	if r.l.Token == la.Token {
		t.Fatalf("the waiter was handed the ended grant's token %s", la.Token)
	}
	if leases, err := k.Status(ctxT(t)); err != nil || len(leases) != 2 {
		t.Fatalf("status: %+v %v, want ld/keeper and the waiter's ld/db", leases, err)
	}
}

// cutProxy relays to a real grantor until cut, then answers nothing: the
// sidecar behind it is cut off from the grantors (its keepalive streams
// end, every call fails Unavailable).
type cutProxy struct {
	*faultProxy
	cutOnce sync.Once
	cut     chan struct{}
}

func (p *cutProxy) isCut() bool {
	select {
	case <-p.cut:
		return true
	default:
		return false
	}
}

var errCut = status.Error(codes.Unavailable, "cut proxy: cut off")

func (p *cutProxy) Acquire(ctx context.Context, req *grantorpb.AcquireRequest) (*grantorpb.AcquireResponse, error) {
	if p.isCut() {
		return nil, errCut
	}
	return p.faultProxy.Acquire(ctx, req)
}

func (p *cutProxy) Release(ctx context.Context, req *grantorpb.ReleaseRequest) (*grantorpb.ReleaseResponse, error) {
	if p.isCut() {
		return nil, errCut
	}
	return p.faultProxy.Release(ctx, req)
}

func (p *cutProxy) Members(ctx context.Context, req *grantorpb.MembersRequest) (*grantorpb.MembersResponse, error) {
	if p.isCut() {
		return nil, errCut
	}
	return p.faultProxy.Members(ctx, req)
}

func (p *cutProxy) KeepAlive(down grantorpb.Grantor_KeepAliveServer) error {
	if p.isCut() {
		return errCut
	}
	done := make(chan error, 1)
	go func() { done <- p.faultProxy.KeepAlive(down) }()
	select {
	case err := <-done:
		return err
	case <-p.cut:
		return errCut
	}
}

// Issue 22: a lease with a lock-delay whose owner ended is lost during its
// lock-delay, in a session with another lease: its sidecar is cut off
// from the grantors, so both are lost and the grantor expires the
// session. The name stays held for the whole lock-delay from the owner's
// end: another host's waiter gets it no sooner. Before the grantor kept
// lock-delays, the sidecar kept this one, and the grantor's expiry of the
// session (a term after the cut) handed the name on.
func TestLeaseLostDuringLockDelayOfEndedOwnerKeepsTheNameForTheWholeDelay(t *testing.T) {
	timing := clockwatch.DefaultTiming()
	gaddr := startGrantor(t, clockwatch.System, timing)
	p := &cutProxy{faultProxy: newFaultProxy(t, gaddr, faults{}, 1), cut: make(chan struct{})}
	cfgA, cfgB := DefaultConfig(), DefaultConfig()
	cfgA.Grantors, cfgB.Grantors = []string{serveGrantorAPI(t, p)}, []string{gaddr}
	cfgA.Timing, cfgB.Timing = timing, timing
	_, sockA := startDaemon(t, cfgA)
	_, sockB := startDaemon(t, cfgB)
	a, k, b := &ipc.Client{Socket: sockA}, &ipc.Client{Socket: sockA}, &ipc.Client{Socket: sockB}
	t.Cleanup(func() { a.Close(); k.Close(); b.Close() })
	events := make(chan *ipc.Event, 64)
	k.Notify(events)

	const term, lockDelay = 2 * time.Second, 6 * time.Second
	if _, err := k.Acquire(ctxT(t), "ld/keeper", ipc.AcquireOptions{TTL: term}); err != nil {
		t.Fatal(err)
	}
	la, err := a.Acquire(ctxT(t), "ld/db", ipc.AcquireOptions{TTL: term, LockDelay: lockDelay})
	if err != nil {
		t.Fatal(err)
	}
	ended := clockwatch.System.Now() // before the owner's end: a lower bound
	a.Close()
	p.cutOnce.Do(func() { close(p.cut) })
	if ev := waitEventOn(t, events, ipc.EventLost); ev.Lease != "ld/keeper" {
		t.Fatalf("lost %+v, want ld/keeper", ev)
	}
	r := <-acquireAsync(ctxT(t), b, "ld/db", ipc.AcquireOptions{TTL: term, Wait: 4 * lockDelay})
	got := clockwatch.System.Now()
	if r.err != nil {
		t.Fatalf("the other host's waiter: %v", r.err)
	}
	if d := got.Sub(ended); d < lockDelay {
		t.Fatalf("the other host got ld/db (token %s) %v after its owner ended, within the lock-delay of %v (token %s)", r.l.Token, d, lockDelay, la.Token)
	}
}
