package daemon

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// How the sidecar knows that a grantor still leads. A request that waits
// at a grantor (an acquire queued for a held lease) gets no answer until
// the wait is over; a grantor cut off by a partition sends no error
// either. So while a request to a grantor is in flight longer than the
// confirm timeout (about an election timeout), the sidecar asks that
// grantor who leads (Members with leader_only, which every grantor
// answers from its own view, no raft round, with the leader's entry and
// its own whatever the number of gossip members; an older grantor lists
// everyone, read the same way); a grantor that does not answer within
// the confirm timeout, or no longer names itself leader, is abandoned for
// the others, and the request is retried there with the same request id.
// An acquire so keeps its wait_ms whatever the old leader does.

// errUnconfirmed is the failure of an attempt whose grantor did not
// confirm that it leads.
var errUnconfirmed = status.Error(codes.Unavailable, "the grantor did not confirm that it leads")

// leaderProbe is the last confirmation asked of one grantor, shared by
// the requests in flight to it.
type leaderProbe struct {
	mu sync.Mutex // held during a probe: concurrent askers wait for it
	at clockwatch.Instant
	ok bool
}

// confirmWhile watches an attempt to addr that runs under ctx: every
// confirm timeout it has to confirm that it leads, or the attempt is
// cancelled. stop ends the watch and reports whether it cancelled the
// attempt.
func (g *grantorConn) confirmWhile(ctx context.Context, cancel context.CancelFunc, addr string, api grantorpb.GrantorClient) (stop func() bool) {
	if g.confirmAfter <= 0 {
		return func() bool { return false }
	}
	done, finished := make(chan struct{}), make(chan struct{})
	var unconfirmed atomic.Bool
	go func() {
		defer close(finished)
		// A wake-up (see backOff): the grantor's answer decides.
		t := time.NewTimer(g.confirmAfter)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if _, err := g.confirm(ctx, addr, api); err != nil {
				unconfirmed.Store(true)
				cancel()
				return
			}
			t.Reset(g.confirmAfter)
		}
	}()
	return func() bool {
		close(done)
		<-finished
		return unconfirmed.Load()
	}
}

// confirm asks the grantor at addr who leads, unless it confirmed within
// half a confirm timeout. It returns the answer, and an error unless the
// grantor answered in time naming itself leader.
func (g *grantorConn) confirm(ctx context.Context, addr string, api grantorpb.GrantorClient) (*grantorpb.MembersResponse, error) {
	g.mu.Lock()
	p := g.probes[addr]
	if p == nil {
		p = &leaderProbe{}
		g.probes[addr] = p
	}
	g.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ok && g.clock.Now().Sub(p.at) < g.confirmAfter/2 {
		return nil, nil
	}
	pctx, cancel := context.WithTimeout(ctx, g.confirmAfter)
	defer cancel()
	resp, err := api.Members(pctx, &grantorpb.MembersRequest{LeaderOnly: true})
	switch {
	case err != nil:
	case resp.LeaderId == "":
		err = errors.New("the grantor knows no leader")
	case resp.LeaderId != resp.AnsweredBy:
		err = errors.New("the grantor does not lead: " + resp.LeaderId + " does")
	}
	p.at, p.ok = g.clock.Now(), err == nil
	g.contacted(addr, err)
	return resp, err
}

// contacted reports an exchange with the grantor at addr that needed a
// leader: nil when one answered.
func (g *grantorConn) contacted(addr string, err error) {
	if g.onContact != nil {
		g.onContact(addr, err)
	}
}

// probeLeader asks the likely leader whether it leads; a grantor that
// names another leader redirects the next request there.
func (g *grantorConn) probeLeader(ctx context.Context) error {
	api, addr, err := g.client()
	if err != nil {
		g.contacted("", err)
		return err
	}
	resp, err := g.confirm(ctx, addr, api)
	if err == nil {
		return nil
	}
	g.failed(addr, errSilent)
	if resp != nil && resp.LeaderId != "" {
		for _, m := range resp.Members {
			if m.NodeId == resp.LeaderId && m.RpcAddr != "" {
				g.mu.Lock()
				g.leader = m.RpcAddr
				g.mu.Unlock()
			}
		}
	}
	return err
}

// reach is what the daemon knows of its way to the grantor leader: the
// last exchange a leader answered, and the last that failed.
type reach struct {
	mu      sync.Mutex
	okAt    clockwatch.Instant
	okAddr  string
	failAt  clockwatch.Instant
	failErr string
	// sentAt is the send of the latest keepalive (renewalSent).
	sentAt clockwatch.Instant
	// down: the latest exchange failed, and every one since downSince;
	// lastErr is the latest failure.
	down      bool
	downSince clockwatch.Instant
	lastErr   error
	// firstOK is closed when a leader first answered.
	firstOK chan struct{}
	once    sync.Once
}

// contact records an exchange; the first one a leader answered is
// logged, and so is every change of the grantor that answers as leader
// (a failover).
func (d *Daemon) contact(addr string, err error) {
	now := d.clock.Now()
	r := &d.reach
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if !r.down {
			r.down, r.downSince = true, now
		}
		r.failAt, r.failErr, r.lastErr = now, err.Error(), err
		return
	}
	r.down = false
	if r.okAddr != "" && addr != r.okAddr {
		d.log.Info("the grantor leader changed", "grantor", addr, "previous", r.okAddr)
	}
	r.okAt, r.okAddr = now, addr
	r.once.Do(func() {
		close(r.firstOK)
		d.log.Info("reached the grantor leader", "grantor", addr)
	})
}

// probeInterval is the probe loop's tick: every tick it keeps the
// connections to every grantor warm, and while the latest exchange with
// the leader failed (or none was answered yet) it asks the leader again,
// so that the sidecar finds a new leader as soon as one answers.
const probeInterval = time.Second

// probeAfterQuiet is how long the exchanges with a leader that answered
// may go quiet before the sidecar asks it whether it still leads (issue
// 25 item 1). Renewals stand for the probe: a keepalive is an exchange
// with the leader, sent every d/3 of a session's term, and its failure
// tells the sidecar as much as a failed probe. So the bound is d/3 of
// the default term (15 s) plus one tick: a host renewing leases of that
// term or a shorter one never probes, however its renewals and the ticks
// fall; a host with longer terms, or with no lease, probes every 6 s (it
// probed every second, about 4 calls to the leader for each keepalive at
// d = 15 s). It is a constant rather than d/3 of the host's own terms so
// that what status says, and how soon an acquire that may not wait fails
// fast, stay bounded whatever the terms: a dead leader is noticed within
// probeAfterQuiet plus a tick and the confirm timeout.
const probeAfterQuiet = 5*time.Second + probeInterval

// probeLoop keeps the daemon's view of the leader fresh while nothing
// else talks to it, and its connections to every grantor open (warm),
// until ctx ends.
func (d *Daemon) probeLoop(ctx context.Context) {
	t := d.clock.NewTimer(probeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		d.g.warm()
		if d.probeDue(d.clock.Now()) {
			d.g.probeLeader(ctx)
		}
		t.Reset(probeInterval)
	}
}

// probeDue says whether the probe loop asks the leader at now: after
// probeAfterQuiet without an exchange with it, or after a tick while the
// latest exchange failed or no leader ever answered. A keepalive handed
// on counts from its send: its answer, its failure or its timeout
// (renewer.go) ends the quiet.
func (d *Daemon) probeDue(now clockwatch.Instant) bool {
	r := &d.reach
	r.mu.Lock()
	defer r.mu.Unlock()
	quiet := now.Sub(max(r.okAt, r.failAt, r.sentAt))
	if r.down || r.okAt == 0 {
		return quiet >= probeInterval
	}
	return quiet >= probeAfterQuiet
}

// renewalSent records that a keepalive was handed on at t0: an exchange
// with the leader began, which stands for the probe until it ends.
func (d *Daemon) renewalSent(t0 clockwatch.Instant) {
	d.reach.mu.Lock()
	d.reach.sentAt = max(d.reach.sentAt, t0)
	d.reach.mu.Unlock()
}

// failFastAfter is how long no grantor leader may have answered the
// daemon before an acquire that may not wait is refused at once, rather
// than tried for the request timeout (as an etcd client fails once its
// endpoints are down). A failover takes less while any grantor answers.
const failFastAfter = 3 * probeInterval

// leaderUnreachable refuses, with unavailable, an acquire that may not
// wait while no grantor leader has answered for failFastAfter: every
// exchange since has failed. It returns nil otherwise.
func (d *Daemon) leaderUnreachable(now clockwatch.Instant) *ipc.Error {
	r := &d.reach
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.down || now.Sub(r.downSince) < failFastAfter {
		return nil
	}
	return ipc.Errorf(ipc.CodeUnavailable, "no grantor leader has answered this sidecar for %v (lately: %s); "+
		"'leaseside status' shows its way to the grantors, and an acquire with a wait keeps trying",
		now.Sub(r.downSince).Round(100*time.Millisecond), grantorError(r.lastErr).Message)
}

// reachableWithin is how recent the latest exchange a leader answered
// must be for status to call the leader reachable: the probe's quiet, a
// tick and a confirm timeout of the default second (leader.go).
const reachableWithin = probeAfterQuiet + 2*probeInterval

// grantorStatus sets *gs to the status op's view of the way to the
// leader, with the grantors known appended to known: a leader is
// reachable when the latest exchange that needed one succeeded, within
// reachableWithin.
func (d *Daemon) grantorStatus(gs *ipc.GrantorStatus, known []string, now clockwatch.Instant) {
	r := &d.reach
	r.mu.Lock()
	defer r.mu.Unlock()
	*gs = ipc.GrantorStatus{Known: d.g.appendKnown(known), FoundBy: "grantors", SinceContactMs: -1}
	if d.cfg.Gossip != nil {
		gs.FoundBy = "gossip"
	}
	if r.okAt != 0 {
		gs.Leader = r.okAddr
		gs.SinceContactMs = now.Sub(r.okAt).Milliseconds()
		gs.LeaderReachable = r.okAt >= r.failAt && now.Sub(r.okAt) < reachableWithin
	}
	if r.failAt > r.okAt {
		gs.Error = r.failErr
	}
}
