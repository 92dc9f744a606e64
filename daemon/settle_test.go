package daemon

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// lateProxy relays to a real grantor, but holds the reply to every
// acquire of its lease until the caller gives up: the grantor grants, and
// the sidecar never learns of it (chaos finding F6). It reports the
// releases of that lease that pass through.
type lateProxy struct {
	*faultProxy
	lease    string
	token    atomic.Uint64 // the grant whose reply was held back
	released chan uint64   // tokens of releases of lease, as they pass
}

func (p *lateProxy) Acquire(ctx context.Context, req *grantorpb.AcquireRequest) (*grantorpb.AcquireResponse, error) {
	resp, err := p.up.Acquire(ctx, req)
	if err != nil || req.GetLease() != p.lease {
		return resp, err
	}
	if resp.GetGranted() {
		p.token.Store(resp.Token)
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func (p *lateProxy) Release(ctx context.Context, req *grantorpb.ReleaseRequest) (*grantorpb.ReleaseResponse, error) {
	resp, err := p.up.Release(ctx, req)
	if err == nil && req.GetLease() == p.lease {
		select {
		case p.released <- req.Token:
		default:
		}
	}
	return resp, err
}

// Chaos finding F6: an acquire whose reply came too late, after the
// sidecar had given up on it (here: never, within the request's time),
// left a grant the sidecar did not know in a grantor session in which it
// knew nothing else. No keepalive ever named that session, so no reply
// listed the grant, and it stood until the grantor expired the session: a
// term in one office, minutes under a flapping leader. The sidecar must
// ask after such a session and give the grant back. The term is 60 s and
// the test waits at most 30: what frees the name is the sidecar's
// release, not the grantor's expiry.
func TestUnansweredAcquireGrantIsGivenBack(t *testing.T) {
	timing := clockwatch.DefaultTiming()
	gaddr := startGrantor(t, clockwatch.System, timing)
	p := &lateProxy{faultProxy: newFaultProxy(t, gaddr, faults{}, 1), lease: "f6", released: make(chan uint64, 16)}
	addr := serveGrantorAPI(t, p)
	cfg := DefaultConfig()
	cfg.Grantors = []string{addr}
	cfg.Timing = timing
	cfg.RequestTimeout = 500 * time.Millisecond
	c := daemonClient(t, cfg)

	_, err := c.Acquire(ctxT(t), "f6", ipc.AcquireOptions{TTL: time.Minute})
	var ie *ipc.Error
	if !errors.As(err, &ie) || ie.Code != ipc.CodeUnavailable {
		t.Fatalf("acquire: %v, want unavailable (its reply was held back)", err)
	}
	token := p.token.Load()
	if token == 0 {
		t.Fatal("the grantor did not grant the acquire whose reply was held back")
	}
	ctx := ctxT(t)
	for {
		select {
		case got := <-p.released:
			if got != token {
				continue
			}
		case <-ctx.Done():
			t.Fatalf("grant %d, whose reply never came, was not given back (its term is 60 s)", token)
		}
		break
	}
	// The name is free for another host now, well within the term.
	other := DefaultConfig()
	other.Grantors = []string{gaddr}
	other.Timing = timing
	if _, err := daemonClient(t, other).Acquire(ctxT(t), "f6", ipc.AcquireOptions{TTL: time.Minute}); err != nil {
		t.Fatalf("another host's acquire of f6 after the give-back: %v", err)
	}
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
// is given back even while another owner B of the same host waits for
// the name in the same grantor session. (B's acquire in flight counted
// as accounting for A's grant, since acquires were counted per session
// and name: the grant, which nobody holds, stood through B's whole wait,
// and B was refused naming it.) The term is a minute and B waits 20 s:
// what frees the name is the give-back.
func TestUnansweredGrantIsGivenBackWhileAnotherOwnerWaits(t *testing.T) {
	timing := clockwatch.DefaultTiming()
	p := &ownerLateProxy{lateProxy: &lateProxy{faultProxy: newFaultProxy(t, startGrantor(t, clockwatch.System, timing), faults{}, 1), lease: "orph",
		released: make(chan uint64, 16)}, granted: make(chan struct{})}
	cfg := DefaultConfig()
	cfg.Grantors = []string{serveGrantorAPI(t, p)}
	cfg.Timing = timing
	cfg.RequestTimeout = 500 * time.Millisecond
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
// release Unavailable without passing it on. It reports the releases it
// passes on.
type dropProxy struct {
	*faultProxy
	drop     atomic.Bool
	released chan *grantorpb.ReleaseRequest
}

func (p *dropProxy) Release(ctx context.Context, req *grantorpb.ReleaseRequest) (*grantorpb.ReleaseResponse, error) {
	if p.drop.Load() {
		return nil, status.Error(codes.Unavailable, "proxy: release dropped")
	}
	resp, err := p.up.Release(ctx, req)
	if err == nil {
		select {
		case p.released <- req:
		default:
		}
	}
	return resp, err
}

// Chaos finding F6, its second grant: a holder's release that never
// reached the grantor, in a session in which the sidecar knew no other
// lease, left the grant standing until the grantor expired the session
// (and past a kill -9 of the sidecar, whose new process has a session of
// its own). Once the grantor answers again, the sidecar asks after the
// session and gives the grant back, well within its 60 s term.
func TestFailedReleaseIsGivenBackLater(t *testing.T) {
	timing := clockwatch.DefaultTiming()
	gaddr := startGrantor(t, clockwatch.System, timing)
	p := &dropProxy{faultProxy: newFaultProxy(t, gaddr, faults{}, 1), released: make(chan *grantorpb.ReleaseRequest, 16)}
	cfg := DefaultConfig()
	cfg.Grantors = []string{serveGrantorAPI(t, p)}
	cfg.Timing = timing
	cfg.RequestTimeout = 500 * time.Millisecond
	c := daemonClient(t, cfg)

	g, err := c.Acquire(ctxT(t), "f6b", ipc.AcquireOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	p.drop.Store(true)
	if err := c.ReleaseToken(ctxT(t), "f6b", g.Token); err == nil {
		t.Fatal("the release succeeded although the proxy dropped it")
	}
	p.drop.Store(false)
	ctx := ctxT(t)
	for {
		select {
		case rel := <-p.released:
			if rel.Lease != "f6b" || strconv.FormatUint(rel.Token, 10) != g.Token {
				continue
			}
		case <-ctx.Done():
			t.Fatalf("grant %s, whose release failed, was not given back (its term is 60 s)", g.Token)
		}
		break
	}
	other := DefaultConfig()
	other.Grantors = []string{gaddr}
	other.Timing = timing
	if _, err := daemonClient(t, other).Acquire(ctxT(t), "f6b", ipc.AcquireOptions{TTL: time.Minute}); err != nil {
		t.Fatalf("another host's acquire of f6b after the give-back: %v", err)
	}
}

// The settling rule on the fake clock: a session whose acquire went
// unanswered is asked after at once; a clean reply to a keepalive sent
// less than settleMargin after the acquire ended does not settle it (the
// grant may still be applied), one sent after does, and the session is
// asked after no more.
func TestSettlingSessionIsAskedAfterUntilTheMargin(t *testing.T) {
	r := newRigWith(t, func(c *Config) { c.RequestTimeout = 300 * time.Millisecond })
	stall := make(chan struct{})
	defer close(stall)
	r.g.set(func() { r.g.stallName, r.g.stall = "f6/stuck", stall })
	ended := r.clock.Now() // the fake clock stands still until the acquire ends
	if _, err := r.c.Acquire(ctxT(t), "f6/stuck", ipc.AcquireOptions{TTL: 9 * time.Second}); err == nil {
		t.Fatal("the stalled acquire was answered")
	}
	settling := r.d.g.sessionFor(9 * time.Second).id
	names := func(ka *grantorpb.KeepAliveRequest) map[string]bool {
		m := map[string]bool{}
		for _, s := range ka.Sessions {
			m[s.Session] = true
		}
		return m
	}
	if ka := r.waitKeepAlive(t); !names(ka)[settling] {
		t.Fatalf("the first keepalive after the unanswered acquire names %v, not its session %s", names(ka), settling)
	}
	// Its clean reply came at once, before the margin: asked again
	// once the margin is over, not before.
	ka, at := r.advanceUntilKeepAlive(t, settleMargin+time.Second)
	if !names(ka)[settling] || at.Before(ended.Add(settleMargin)) {
		t.Fatalf("the next keepalive names %v at %v after the acquire ended: want the settling session %s, once %v are over",
			names(ka), at.Sub(ended), settling, settleMargin)
	}
	// Settled now: a lease of another term is renewed every second, and
	// for longer than the settling session would take to come due again,
	// its keepalives name its own session only.
	if _, err := r.c.Acquire(ctxT(t), "f6/other", ipc.AcquireOptions{TTL: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	for until := r.clock.Now().Add(settleMargin + renewInterval(9*time.Second)); r.clock.Now().Before(until); {
		ka, _ = r.advanceUntilKeepAlive(t, 2*time.Second)
		if got := names(ka); got[settling] || !got[r.d.g.sessionFor(3*time.Second).id] {
			t.Fatalf("a renewal names %v: want the 3 s session only, the settled one (%s) asked after no more", got, settling)
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

// A release that failed is tried again through its session's keepalive
// reply, but not sooner than a second (releasePause) after it failed: a
// release that keeps failing does not spin keepalives and releases.
func TestFailedReleaseIsAskedAfterOncePaused(t *testing.T) {
	r := newRigWith(t, func(c *Config) { c.RequestTimeout = 200 * time.Millisecond })
	g, err := r.c.Acquire(ctxT(t), "f6/rel", ipc.AcquireOptions{TTL: 9 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	stall := make(chan struct{})
	defer close(stall)
	r.g.set(func() { r.g.releaseStall = stall })
	if err := r.c.ReleaseToken(ctxT(t), "f6/rel", g.Token); err == nil {
		t.Fatal("the stalled release succeeded")
	}
	failed := r.clock.Now() // the fake clock stood still since
	ka, at := r.advanceUntilKeepAlive(t, releasePause+time.Second)
	names := map[string]bool{}
	for _, s := range ka.Sessions {
		names[s.Session] = true
	}
	if pause := time.Second; !names[r.d.g.sessionFor(9*time.Second).id] || at.Before(failed.Add(pause)) {
		t.Fatalf("the keepalive after the failed release names %v, %v after it: want its session, once %v are over", names, at.Sub(failed), pause)
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
