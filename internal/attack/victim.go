package attack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// VictimStats is what the well-behaved sidecar saw.
type VictimStats struct {
	// Renewals and Acquires counted; Failures lists the calls that
	// failed, with their errors.
	Renewals, Acquires int
	Failures           []string
	// Slowest is the longest a renewal or acquire took, retries at a new
	// leader included.
	Slowest time.Duration
	// LeaderMoves counts the times a grantor answered that it does not
	// lead and named the leader, which the victim then followed.
	LeaderMoves int
}

// victimRetry is the pause before the victim asks again a grantor that
// knows no leader, or that it could not reach.
const victimRetry = 100 * time.Millisecond

// Victim acts as a well-behaved sidecar until ctx ends: it holds one
// lease of term ttl in session, renewed by a keepalive every ttl/3, and
// every period acquires and releases a fresh name in that session. It
// starts at the grantor at addr, and follows the leader as the daemon
// does: a grantor that answers NotLeader naming the leader's address has
// the call made again there (dial gives a client for an address), with
// the same request id; one that knows no leader, or cannot be reached,
// is asked again after a pause, until a term ttl has passed since the
// call began. Its stats come on the returned channel when it stops.
func Victim(ctx context.Context, dial func(addr string) (grantorpb.GrantorClient, error), addr, session string, ttl, period time.Duration) <-chan VictimStats {
	out := make(chan VictimStats, 1)
	go func() {
		v := &victim{ctx: ctx, dial: dial, addr: addr, ttl: ttl}
		defer func() { out <- v.st }()
		var err error
		if v.c, err = dial(addr); err != nil {
			v.st.Failures = append(v.st.Failures, fmt.Sprintf("dialing %s: %v", addr, err))
			return
		}
		v.run(session, period)
	}()
	return out
}

// victim is Victim's state, used from its one goroutine.
type victim struct {
	ctx  context.Context
	dial func(string) (grantorpb.GrantorClient, error)
	addr string
	c    grantorpb.GrantorClient
	ttl  time.Duration
	ka   grantorpb.Grantor_KeepAliveClient // nil: open one at the next renewal
	st   VictimStats
}

// call makes f at the leader, following NotLeader answers (see Victim),
// and returns its last error.
func (v *victim) call(f func(grantorpb.GrantorClient) error) error {
	t0 := time.Now()
	defer func() { v.st.Slowest = max(v.st.Slowest, time.Since(t0)) }()
	for {
		err := f(v.c)
		st := status.Convert(err)
		switch {
		case err == nil || v.ctx.Err() != nil:
			return err
		case st.Code() == codes.FailedPrecondition:
			if to := leaderAddr(st); to != "" && to != v.addr {
				c, derr := v.dial(to)
				if derr != nil {
					return fmt.Errorf("%w; dialing the leader it names: %v", err, derr)
				}
				v.addr, v.c, v.ka = to, c, nil
				v.st.LeaderMoves++
				continue
			}
			if len(st.Details()) == 0 {
				return err // not a NotLeader
			}
		case st.Code() != codes.Unavailable:
			return err
		}
		if time.Since(t0) > v.ttl {
			return err
		}
		t := time.NewTimer(victimRetry)
		select {
		case <-t.C:
		case <-v.ctx.Done():
			t.Stop()
			return err
		}
	}
}

// leaderAddr is the leader's address a NotLeader detail of st names.
func leaderAddr(st *status.Status) string {
	for _, d := range st.Details() {
		if nl, ok := d.(*grantorpb.NotLeader); ok {
			return nl.GetLeaderRpcAddr()
		}
	}
	return ""
}

func (v *victim) run(session string, period time.Duration) {
	fail := func(what string, err error) { v.st.Failures = append(v.st.Failures, fmt.Sprintf("%s: %v", what, err)) }
	seq := uint64(0)
	next := func() *grantorpb.RequestID {
		seq++
		return &grantorpb.RequestID{Session: session, Seq: seq, FirstUnacked: seq}
	}
	var held *grantorpb.AcquireResponse
	heldID := next()
	if err := v.call(func(c grantorpb.GrantorClient) (err error) {
		held, err = c.Acquire(v.ctx, &grantorpb.AcquireRequest{Id: heldID, Lease: session + "/held", Owner: "o", TtlNs: int64(v.ttl)})
		if err == nil && !held.Granted {
			err = errors.New("not granted")
		}
		return err
	}); err != nil {
		fail("first acquire", err)
		return
	}
	digest := grantorpb.TokenDigest(held.Token)
	renew := time.NewTicker(v.ttl / 3)
	defer renew.Stop()
	churn := time.NewTicker(period)
	defer churn.Stop()
	for i := 0; ; i++ {
		select {
		case <-v.ctx.Done():
			return
		case <-renew.C:
			req := &grantorpb.KeepAliveRequest{Session: session, Batch: uint64(i + 1), Sessions: []*grantorpb.SessionRenewal{{Session: session, TtlNs: int64(v.ttl), LeaseSetVersion: digest}}}
			err := v.call(func(c grantorpb.GrantorClient) error {
				err := v.renew(c, req)
				if err != nil {
					v.ka = nil // the stream ended: the next try opens another
				}
				return err
			})
			if v.ctx.Err() != nil {
				return
			}
			v.st.Renewals++
			if err != nil {
				fail("renewal", err)
			}
		case <-churn.C:
			lease := fmt.Sprintf("%s/churn-%d", session, i)
			acqID, relID := next(), next()
			err := v.call(func(c grantorpb.GrantorClient) error {
				a, err := c.Acquire(v.ctx, &grantorpb.AcquireRequest{Id: acqID, Lease: lease, Owner: "o", TtlNs: int64(v.ttl)})
				if err == nil && !a.Granted {
					err = errors.New("not granted")
				}
				if err != nil {
					return err
				}
				_, err = c.Release(v.ctx, &grantorpb.ReleaseRequest{Id: relID, Lease: lease, Owner: "o", Token: a.Token})
				return err
			})
			if v.ctx.Err() != nil {
				return
			}
			v.st.Acquires++
			if err != nil && !errors.Is(err, io.EOF) {
				fail("acquire "+lease, err)
			}
		}
	}
}

// renew sends req on the keepalive stream to c (opened first when there
// is none) and reads its answer.
func (v *victim) renew(c grantorpb.GrantorClient, req *grantorpb.KeepAliveRequest) error {
	if v.ka == nil {
		ka, err := c.KeepAlive(v.ctx)
		if err != nil {
			return err
		}
		v.ka = ka
	}
	if err := v.ka.Send(req); err != nil {
		// The stream's own error comes with its Recv.
		if _, rerr := v.ka.Recv(); rerr != nil {
			return rerr
		}
		return err
	}
	r, err := v.ka.Recv()
	if err == nil && (len(r.Sessions) != 1 || !r.Sessions[0].Renewed) {
		err = fmt.Errorf("not renewed: %v", r)
	}
	return err
}
