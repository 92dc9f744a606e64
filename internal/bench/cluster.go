package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// cluster is the bench's client of a grantor cluster: a pool of gRPC
// connections per grantor (one HTTP/2 connection serialises much of the
// work, so load is spread over several), and the leader, which it follows
// as grantors redirect it. Safe for concurrent use.
type cluster struct {
	conns int // connections per grantor
	creds credentials.TransportCredentials

	mu     sync.Mutex
	addrs  []string
	leader string // best guess; "" means try addrs in turn
	next   int
	pools  map[string][]*grpc.ClientConn

	redirects atomic.Uint64 // NotLeader answers followed
	retries   atomic.Uint64 // calls repeated after UNAVAILABLE and the like
}

func newCluster(addrs []string, conns int, creds credentials.TransportCredentials) *cluster {
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	return &cluster{conns: conns, creds: creds, addrs: append([]string(nil), addrs...), pools: map[string][]*grpc.ClientConn{}}
}

// close closes every connection.
func (c *cluster) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pool := range c.pools {
		for _, cc := range pool {
			cc.Close()
		}
	}
	c.pools = map[string][]*grpc.ClientConn{}
}

// leaderAddr is the grantor the last successful call went to, as far as
// the cluster knows; "" before any call.
func (c *cluster) leaderAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

// client returns a client on connection i (modulo the pool size) of the
// grantor most likely to lead, and that grantor's address.
func (c *cluster) client(i int) (grantorpb.GrantorClient, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	addr := c.leader
	if addr == "" {
		addr = c.addrs[c.next%len(c.addrs)]
	}
	pool := c.pools[addr]
	if pool == nil {
		pool = make([]*grpc.ClientConn, c.conns)
		for k := range pool {
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(c.creds))
			if err != nil {
				for _, done := range pool[:k] {
					done.Close()
				}
				return nil, "", fmt.Errorf("grantor %s: %w", addr, err)
			}
			pool[k] = cc
		}
		c.pools[addr] = pool
	}
	return grantorpb.NewGrantorClient(pool[i%len(pool)]), addr, nil
}

// answered records that addr answered a call: it leads.
func (c *cluster) answered(addr string) {
	c.mu.Lock()
	c.leader = addr
	c.mu.Unlock()
}

// failed learns from err, which addr answered. It reports whether err
// named another grantor as leader (a redirect, to follow at once).
func (c *cluster) failed(addr string, err error) (redirected bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader != addr && c.leader != "" {
		return true // another call moved on already
	}
	if nl := notLeader(err); nl != nil && nl.LeaderRpcAddr != "" && nl.LeaderRpcAddr != addr {
		c.leader = nl.LeaderRpcAddr
		c.redirects.Add(1)
		return true
	}
	c.leader = ""
	c.next++
	return false
}

// notLeader returns the NotLeader detail of a FAILED_PRECONDITION, or nil.
func notLeader(err error) *grantorpb.NotLeader {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		return nil
	}
	for _, d := range st.Details() {
		if nl, ok := d.(*grantorpb.NotLeader); ok {
			return nl
		}
	}
	return nil
}

// retryable reports whether a call may be repeated, with the same request
// id, on the leader or another grantor.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.FailedPrecondition:
		return true
	}
	return false
}

// maxUnavailable is how long call keeps retrying a cluster that answers
// nothing useful before it gives up: a benchmark does not wait out an
// outage.
const maxUnavailable = 30 * time.Second

// call runs f on connection i of the leader, following redirects and
// retrying unavailability with backoff, until f succeeds, fails for a
// reason a retry cannot mend, ctx ends, or maxUnavailable has passed. f
// must send the same request each time: the grantor applies a request id
// once.
func call[T any](ctx context.Context, c *cluster, i int, f func(context.Context, grantorpb.GrantorClient) (T, error)) (T, error) {
	backoff := 10 * time.Millisecond
	giveUp := time.Now().Add(maxUnavailable)
	for {
		api, addr, err := c.client(i)
		var v T
		if err != nil {
			return v, err
		}
		v, err = f(ctx, api)
		if err == nil {
			c.answered(addr)
			return v, nil
		}
		if !retryable(err) || ctx.Err() != nil {
			return v, err
		}
		if time.Now().After(giveUp) {
			return v, fmt.Errorf("no leader answered for %v: %w", maxUnavailable, err)
		}
		if c.failed(addr, err) {
			continue
		}
		c.retries.Add(1)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-t.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// session numbers the mutating requests of one grantor session. Safe for
// concurrent use; first_unacked is kept current, so the grantor forgets
// each outcome once its reply is in.
type session struct {
	id string

	mu       sync.Mutex
	seq      uint64
	inflight map[uint64]struct{}
}

// newSession returns a session whose id is run-kind-n (at most 64 bytes
// for the run ids and kinds this package uses).
func newSession(run, kind string, n int) *session {
	return &session{id: fmt.Sprintf("bench-%s-%s-%d", run, kind, n), inflight: map[uint64]struct{}{}}
}

// newID numbers a request; done must be called once its reply (or final
// failure) is in.
func (s *session) newID() (id *grantorpb.RequestID, done func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	seq := s.seq
	s.inflight[seq] = struct{}{}
	first := seq
	for q := range s.inflight {
		first = min(first, q)
	}
	return &grantorpb.RequestID{Session: s.id, Seq: seq, FirstUnacked: first}, func() {
		s.mu.Lock()
		delete(s.inflight, seq)
		s.mu.Unlock()
	}
}

// acquire sends one Acquire on connection i for (s, owner).
func (c *cluster) acquire(ctx context.Context, i int, s *session, lease, owner string, ttl, wait time.Duration) (*grantorpb.AcquireResponse, error) {
	id, done := s.newID()
	defer done()
	req := &grantorpb.AcquireRequest{Id: id, Lease: lease, Owner: owner, TtlNs: int64(ttl), WaitNs: int64(wait)}
	resp, err := call(ctx, c, i, func(ctx context.Context, api grantorpb.GrantorClient) (*grantorpb.AcquireResponse, error) {
		return api.Acquire(ctx, req)
	})
	if err != nil {
		return nil, fmt.Errorf("acquire %s: %w", lease, err)
	}
	return resp, nil
}

// release sends one Release on connection i and fails unless the grantor
// released the lease: the bench only releases what it holds.
func (c *cluster) release(ctx context.Context, i int, s *session, lease, owner string, token uint64) error {
	id, done := s.newID()
	defer done()
	req := &grantorpb.ReleaseRequest{Id: id, Lease: lease, Owner: owner, Token: token}
	resp, err := call(ctx, c, i, func(ctx context.Context, api grantorpb.GrantorClient) (*grantorpb.ReleaseResponse, error) {
		return api.Release(ctx, req)
	})
	if err != nil {
		return fmt.Errorf("release %s: %w", lease, err)
	}
	if !resp.Released {
		return fmt.Errorf("%w: release of %s token %d by its holder was refused", ErrViolation, lease, token)
	}
	return nil
}

// newRunID returns a short random id that keeps one run's sessions and
// lease names apart from another's.
func newRunID() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
