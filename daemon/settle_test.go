package daemon

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// lateProxy relays to a real grantor, but holds the reply to the first
// attempt of every acquire of its lease until the caller gives up: the
// grantor grants, and the sidecar's call never learns of it (chaos
// finding F6). Later attempts of the same request id pass.
type lateProxy struct {
	*faultProxy
	lease string
	token atomic.Uint64 // the grant whose reply was held back
	seen  sync.Map      // request ids (session/seq) that had an attempt
}

func (p *lateProxy) Acquire(ctx context.Context, req *grantorpb.AcquireRequest) (*grantorpb.AcquireResponse, error) {
	resp, err := p.up.Acquire(ctx, req)
	if err != nil || req.GetLease() != p.lease {
		return resp, err
	}
	if _, again := p.seen.LoadOrStore(req.GetId().GetSession()+"/"+strconv.FormatUint(req.GetId().GetSeq(), 10), true); again {
		return resp, err
	}
	if resp.GetGranted() {
		p.token.Store(resp.Token)
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// freeWithin checks that another host gets name within wait: the grant
// standing in its way ended well within its term (a minute).
func freeWithin(t *testing.T, gaddr string, timing clockwatch.Timing, name string, wait time.Duration) {
	t.Helper()
	other := DefaultConfig()
	other.Grantors = []string{gaddr}
	other.Timing = timing
	if _, err := daemonClient(t, other).Acquire(ctxT(t), name, ipc.AcquireOptions{TTL: time.Minute, Wait: wait}); err != nil {
		t.Fatalf("another host's acquire of %s, waiting %v: %v", name, wait, err)
	}
}

// Issue 22 item 3 (chaos finding F6, and seed 506290559812): an acquire
// whose reply never came, with a lock-delay of an hour, was granted all
// the same. Nobody was told of that grant, so it must end without its
// lock-delay: the sidecar settles the acquire (the retry of its request
// id learns the grant) and names the grant untold in its keepalive, and
// the grantor ends it. Before, the sidecar gave back a grant it did not
// know as its owner's end, and the name stayed delayed for the hour:
// refusals named a token no client ever saw. The term is a minute and
// the other host waits 20 s.
func TestUntoldGrantLeavesNoLockDelay(t *testing.T) {
	timing := clockwatch.DefaultTiming()
	gaddr := startGrantor(t, clockwatch.System, timing)
	p := &lateProxy{faultProxy: newFaultProxy(t, gaddr, faults{}, 1), lease: "f6"}
	cfg := DefaultConfig()
	cfg.Grantors = []string{serveGrantorAPI(t, p)}
	cfg.Timing = timing
	cfg.RequestTimeout = 2 * time.Second
	c := daemonClient(t, cfg)

	_, err := c.Acquire(ctxT(t), "f6", ipc.AcquireOptions{TTL: time.Minute, LockDelay: time.Hour})
	var ie *ipc.Error
	if !errors.As(err, &ie) || ie.Code != ipc.CodeUnavailable {
		t.Fatalf("acquire: %v, want unavailable (its reply was held back)", err)
	}
	if p.token.Load() == 0 {
		t.Fatal("the grantor did not grant the acquire whose reply was held back")
	}
	freeWithin(t, gaddr, timing, "f6", 20*time.Second)
}

// ownerLateProxy is a lateProxy for the first owner that asks for its
// lease only: other owners' acquires pass. granted is closed once the
// grantor granted the held-back acquire.
type ownerLateProxy struct {
	*lateProxy
	owner   atomic.Pointer[string]
	granted chan struct{}
}

func (p *ownerLateProxy) Acquire(ctx context.Context, req *grantorpb.AcquireRequest) (*grantorpb.AcquireResponse, error) {
	first := req.Owner
	if req.GetLease() != p.lease || !p.owner.CompareAndSwap(nil, &first) && *p.owner.Load() != req.Owner {
		return p.up.Acquire(ctx, req)
	}
	if _, again := p.seen.LoadOrStore(req.GetId().GetSession()+"/"+strconv.FormatUint(req.GetId().GetSeq(), 10), true); again {
		return p.up.Acquire(ctx, req)
	}
	resp, err := p.up.Acquire(ctx, req)
	if err != nil || !resp.GetGranted() {
		return resp, err
	}
	if p.token.CompareAndSwap(0, resp.Token) {
		close(p.granted)
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// Review R4-2: the grant of an acquire whose reply never came (owner A)
// ends even while another owner B of the same host waits for the name in
// the same grantor session. The term is a minute and B waits 20 s: what
// frees the name is the grantor ending the untold grant.
func TestUnansweredGrantEndsWhileAnotherOwnerWaits(t *testing.T) {
	timing := clockwatch.DefaultTiming()
	p := &ownerLateProxy{lateProxy: &lateProxy{faultProxy: newFaultProxy(t, startGrantor(t, clockwatch.System, timing), faults{}, 1), lease: "orph"},
		granted: make(chan struct{})}
	cfg := DefaultConfig()
	cfg.Grantors = []string{serveGrantorAPI(t, p)}
	cfg.Timing = timing
	cfg.RequestTimeout = 2 * time.Second
	_, sock := startDaemon(t, cfg)
	a, b := &ipc.Client{Socket: sock}, &ipc.Client{Socket: sock}
	t.Cleanup(func() { a.Close(); b.Close() })

	first := acquireAsync(ctxT(t), a, "orph", ipc.AcquireOptions{TTL: time.Minute})
	select {
	case <-p.granted:
	case r := <-first:
		t.Fatalf("A's acquire returned (%v, %v) before the grantor granted it", r.l, r.err)
	case <-ctxT(t).Done():
		t.Fatal("A's acquire was never granted")
	}
	second := acquireAsync(ctxT(t), b, "orph", ipc.AcquireOptions{TTL: time.Minute, Wait: 20 * time.Second})
	r := <-first
	var ie *ipc.Error
	if !errors.As(r.err, &ie) || ie.Code != ipc.CodeUnavailable {
		t.Fatalf("A's acquire: %v, want unavailable (its reply was held back)", r.err)
	}
	if r = <-second; r.err != nil {
		t.Fatalf("B's acquire, waiting behind A's grant %d that nobody holds: %v", p.token.Load(), r.err)
	}
}

// dropProxy relays to a real grantor, and while drop is set answers every
// release Unavailable without passing it on.
type dropProxy struct {
	*faultProxy
	drop atomic.Bool
}

func (p *dropProxy) Release(ctx context.Context, req *grantorpb.ReleaseRequest) (*grantorpb.ReleaseResponse, error) {
	if p.drop.Load() {
		return nil, status.Error(codes.Unavailable, "proxy: release dropped")
	}
	return p.up.Release(ctx, req)
}

// Chaos finding F6, its second grant: a holder's release that never
// reached the grantor, in a session in which the sidecar knew no other
// lease, left the grant standing until the grantor expired the session.
// The sidecar names the grant in its session's keepalives until the
// grantor has ended it, with no lock-delay (its owner released it), well
// within its 60 s term.
func TestFailedReleaseEndsLater(t *testing.T) {
	timing := clockwatch.DefaultTiming()
	gaddr := startGrantor(t, clockwatch.System, timing)
	p := &dropProxy{faultProxy: newFaultProxy(t, gaddr, faults{}, 1)}
	cfg := DefaultConfig()
	cfg.Grantors = []string{serveGrantorAPI(t, p)}
	cfg.Timing = timing
	cfg.RequestTimeout = 2 * time.Second
	c := daemonClient(t, cfg)

	g, err := c.Acquire(ctxT(t), "f6b", ipc.AcquireOptions{TTL: time.Minute, LockDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p.drop.Store(true)
	if err := c.ReleaseToken(ctxT(t), "f6b", g.Token); err == nil {
		t.Fatal("the release succeeded although the proxy dropped it")
	}
	freeWithin(t, gaddr, timing, "f6b", 20*time.Second)
}

// Issue 22 item 3, the race: a grant whose reply is held up past a
// keepalive of its session is no grant nobody was told of. The keepalive
// that left while the reply was on its way names nothing to end; once
// the reply is in, the lease is held, and it is renewed, never ended.
func TestDelayedGrantReplyIsNotEnded(t *testing.T) {
	r := newRig(t)
	if _, err := r.c.Acquire(ctxT(t), "race/keeper", ipc.AcquireOptions{TTL: 9 * time.Second}); err != nil {
		t.Fatal(err)
	}
	r.waitAcquireRPC(t)
	stall := make(chan struct{})
	r.g.set(func() { r.g.stallName, r.g.stall = "race/late", stall })
	late := acquireAsync(ctxT(t), r.c, "race/late", ipc.AcquireOptions{TTL: 9 * time.Second})
	r.waitAcquireRPC(t)
	// The keeper's renewal leaves while the acquire's reply is held up.
	ka, _ := r.advanceUntilKeepAlive(t, 4*time.Second)
	checkNamesNothing(t, ka)
	close(stall)
	got := <-late
	if got.err != nil {
		t.Fatalf("the late acquire: %v", got.err)
	}
	for range 3 {
		ka, _ = r.advanceUntilKeepAlive(t, 4*time.Second)
		checkNamesNothing(t, ka)
	}
	if _, err := r.c.Check(ctxT(t), "race/late", got.l.Token); err != nil {
		t.Fatalf("the late grant after its renewals: %v", err)
	}
}

// checkNamesNothing fails when keepalive ka names a grant to end.
func checkNamesNothing(t *testing.T, ka *grantorpb.KeepAliveRequest) {
	t.Helper()
	for _, s := range ka.Sessions {
		if len(s.Untold)+len(s.OwnerEnded) > 0 {
			t.Fatalf("a keepalive names grants to end: untold %v, owner-ended %v", s.Untold, s.OwnerEnded)
		}
	}
}

// advanceUntilKeepAlive walks the fake clock forward in small steps, at
// most limit, until a keepalive arrives, and returns it with the fake
// time at which it came. A step is taken only once the daemon's loops
// have run at the instant before it: every loop that sleeps on the fake
// clock re-arms its timer when it has done what came due, so the fake
// clock never moves on while the renew loop is behind. A keepalive it
// handed on then reaches the grantor within real-time moments, which
// transitDelay bounds.
func (r *rig) advanceUntilKeepAlive(t *testing.T, limit time.Duration) (*grantorpb.KeepAliveRequest, clockwatch.Instant) {
	t.Helper()
	const (
		step         = 100 * time.Millisecond
		transitDelay = 20 * time.Millisecond
	)
	for walked := time.Duration(0); walked <= limit; walked += step {
		select {
		case ka := <-r.g.keepalives:
			return ka, r.clock.Now()
		case <-time.After(transitDelay):
		}
		timers := r.clock.Timers()
		r.clock.Advance(step)
		if err := r.clock.WaitTimers(ctxT(t), timers); err != nil {
			t.Fatalf("the daemon's loops did not run at %v of the fake clock: %v", r.clock.Now(), err)
		}
	}
	select {
	case ka := <-r.g.keepalives:
		return ka, r.clock.Now()
	case <-ctxT(t).Done():
		t.Fatalf("no keepalive within %v of the fake clock", limit)
	}
	return nil, 0
}

// A release that failed is named in its session's next keepalive, at
// once; while a reply still lists the grant, it is named again, but not
// sooner than endRetryPause after that reply; once a reply shows it gone,
// it is named no more.
func TestFailedReleaseIsNamedUntilGone(t *testing.T) {
	r := newRigWith(t, func(c *Config) { c.RequestTimeout = time.Second })
	g, err := r.c.Acquire(ctxT(t), "f6/rel", ipc.AcquireOptions{TTL: 9 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	token, _ := strconv.ParseUint(g.Token, 10, 64)
	stall := make(chan struct{})
	defer close(stall)
	var listed atomic.Bool
	listed.Store(true)
	r.g.set(func() {
		r.g.releaseStall = stall
		r.g.sessionReply = func(req *grantorpb.SessionRenewal, resp *grantorpb.SessionRenewed) {
			if listed.Load() {
				resp.Listed, resp.LeaseSetVersion = true, req.LeaseSetVersion+1
				resp.Leases = []*grantorpb.LeaseRef{{Lease: "f6/rel", Token: token, TtlNs: int64(9 * time.Second)}}
			}
		}
	})
	if err := r.c.ReleaseToken(ctxT(t), "f6/rel", g.Token); err == nil {
		t.Fatal("the stalled release succeeded")
	}
	named := func(ka *grantorpb.KeepAliveRequest) bool {
		for _, s := range ka.Sessions {
			for _, u := range s.Untold {
				if u.Lease == "f6/rel" && u.Token == token {
					return true
				}
			}
		}
		return false
	}
	ka, at := r.advanceUntilKeepAlive(t, time.Second)
	if !named(ka) {
		t.Fatalf("the keepalive after the failed release does not name its grant: %v", ka.Sessions)
	}
	ka, again := r.advanceUntilKeepAlive(t, endRetryPause+time.Second)
	if !named(ka) || again.Sub(at) < endRetryPause {
		t.Fatalf("the grant, still listed, was named again %v later (named: %v): want once %v are over", again.Sub(at), named(ka), endRetryPause)
	}
	listed.Store(false) // this reply shows the grant gone
	ka, _ = r.advanceUntilKeepAlive(t, endRetryPause+time.Second)
	if !named(ka) {
		t.Fatal("the grant was not named until a reply showed it gone")
	}
	if _, err := r.c.Acquire(ctxT(t), "f6/keeper", ipc.AcquireOptions{TTL: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if ka, _ = r.advanceUntilKeepAlive(t, 2*time.Second); named(ka) {
			t.Fatal("the grant was named again after a reply showed it gone")
		}
	}
}

// Review R5-1 through the real grantor: a detached no_renew lease with a
// one-hour lock-delay lapses at its deadline while another lease of its
// term keeps the session renewed, and another owner of the host waits for
// the name meanwhile. The lost grant stands at the grantor through the
// lock-delay: the waiter is refused after its whole wait, naming it.
func TestLockDelayHoldsWhileAnotherOwnerWaits(t *testing.T) {
	timing := clockwatch.DefaultTiming()
	cfg := DefaultConfig()
	cfg.Grantors = []string{startGrantor(t, clockwatch.System, timing)}
	cfg.Timing = timing
	_, sock := startDaemon(t, cfg)
	a, k, b := &ipc.Client{Socket: sock}, &ipc.Client{Socket: sock}, &ipc.Client{Socket: sock}
	t.Cleanup(func() { a.Close(); k.Close(); b.Close() })

	const ttl = 2 * time.Second
	la, err := a.Acquire(ctxT(t), "ld/db", ipc.AcquireOptions{TTL: ttl, Owner: ipc.OwnerDetached, NoRenew: true, LockDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Acquire(ctxT(t), "ld/keeper", ipc.AcquireOptions{TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	r := <-acquireAsync(ctxT(t), b, "ld/db", ipc.AcquireOptions{TTL: ttl, Wait: 3 * ttl})
	var ie *ipc.Error
	if r.err == nil {
		t.Fatalf("B got ld/db (token %s) within A's one-hour lock-delay (A's token %s)", r.l.Token, la.Token)
	}
	if !errors.As(r.err, &ie) || ie.Code != ipc.CodeLeaseHeld || ie.HolderToken != la.Token {
		t.Fatalf("B's acquire: %v, want lease_held naming A's token %s", r.err, la.Token)
	}
}
