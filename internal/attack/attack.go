// Package attack floods a grantor the ways issue 21 found, as the holder
// of one certificate would, so that the tests of the accounts
// (internal/integration) can show what each flood costs the grantors and
// measure it at full scale: Watch streams adding distinct names, Releases
// of unheld names under fresh sessions, and Releases under sessions that
// never existed. Victim is the well-behaved sidecar that goes on
// renewing and acquiring meanwhile, following the leader (victim.go). Impostor is the red team's grantor
// that is no member: a grantor certificate and the gossip key, serving
// sidecars; UnfinishedCalls opens calls past the calls limit as fast as a
// grantor takes them. The operator's floods (operator.go): SendUnread
// sends whole calls whose answers it never reads, OperatorCalls makes
// every call that changes nothing, Fill holds names for them to list.
// HoldAnswers (unread.go) has the grantor answer calls one at a time into
// streams that never open a window, keeping each answer unsent.
package attack

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// Result counts what a flood sent and how it was answered.
type Result struct {
	// Sent is the calls (or, for Watch, the names) sent; OK those
	// answered without an error.
	Sent, OK int64
	// Refused counts the errors by code; Limits the RESOURCE_EXHAUSTED
	// ones by the limit their message names ("" when none).
	Refused map[codes.Code]int64
	Limits  map[string]int64
	Elapsed time.Duration
}

// String sums r up on one line.
func (r Result) String() string {
	return fmt.Sprintf("sent %d, ok %d, refused %v (limits %v) in %v", r.Sent, r.OK, r.Refused, r.Limits, r.Elapsed.Round(time.Millisecond))
}

// counter collects a Result from many goroutines.
type counter struct {
	sent, ok atomic.Int64
	limited  atomic.Bool // a call was refused at an account limit
	mu       sync.Mutex
	refused  map[codes.Code]int64
	limits   map[string]int64
	start    time.Time
}

func newCounter() *counter {
	return &counter{refused: map[codes.Code]int64{}, limits: map[string]int64{}, start: time.Now()}
}

// limitNames are the account limits a refusal may name (docs/limits.md).
var limitNames = []string{"conns", "calls", "sessions", "outcomes", "leases", "value_bytes", "waiters",
	"watch_streams", "watch_names", "queued_bytes", "unchanged_calls_per_sec"}

// add counts one answer.
func (c *counter) add(err error) {
	if err == nil {
		c.ok.Add(1)
		return
	}
	code := status.Code(err)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refused[code]++
	if code == codes.ResourceExhausted {
		c.limited.Store(true)
		limit := ""
		for _, l := range limitNames {
			if strings.Contains(err.Error(), "limit of "+l+" ") {
				limit = l
			}
		}
		c.limits[limit]++
	}
}

func (c *counter) result() Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Result{Sent: c.sent.Load(), OK: c.ok.Load(), Refused: c.refused, Limits: c.limits, Elapsed: time.Since(c.start)}
}

// watchAnswered bounds how long WatchNames waits for the grantor to
// answer every name a stream added (a SNAPSHOT or DENIED event each) or
// to end the stream; past it the stream counts as holding its names. The
// wait ends on those events: it used to be a fixed 2 s after the last
// request, which a leader under the race detector on a loaded machine
// took longer than to read them, and a stream over the limit counted as
// holding its names.
const watchAnswered = time.Minute

// name returns a distinct lease name of n bytes (at least 16).
func name(prefix string, i, n int) string {
	s := fmt.Sprintf("%s/%d/", prefix, i)
	return s + strings.Repeat("x", max(0, n-len(s)))
}

// WatchNames opens streams Watch streams on c and adds names distinct
// names of nameLen bytes to each, in requests of batch names, reading
// every event; it returns once every stream has added its names or ended,
// and keeps the open ones until ctx ends. Sent counts names; a stream
// ended by an error counts that error, one whose every name the grantor
// answered holds its names.
func WatchNames(ctx context.Context, c grantorpb.GrantorClient, prefix string, streams, names, nameLen, batch int) Result {
	cnt := newCounter()
	var wg sync.WaitGroup
	for s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := c.Watch(ctx)
			if err != nil {
				cnt.add(err)
				return
			}
			ended := make(chan error, 1)
			answered := make(chan struct{}) // closed once every name is
			go func() {
				n := 0
				for {
					ev, err := st.Recv()
					if err != nil {
						ended <- err
						return
					}
					if k := ev.GetKind(); k == grantorpb.WatchEvent_SNAPSHOT || k == grantorpb.WatchEvent_DENIED {
						if n++; n == names {
							close(answered)
						}
					}
				}
			}()
			for i := 0; i < names; i += batch {
				req := &grantorpb.WatchRequest{}
				for j := i; j < min(i+batch, names); j++ {
					req.Add = append(req.Add, name(fmt.Sprintf("%s/%d", prefix, s), j, nameLen))
				}
				cnt.sent.Add(int64(len(req.Add)))
				if err := st.Send(req); err != nil {
					break // the stream ended: Recv says why
				}
			}
			select {
			case err := <-ended:
				cnt.add(err)
			case <-answered: // the stream holds its names
				cnt.add(nil)
			case <-time.After(watchAnswered):
				cnt.add(nil)
			}
		}()
	}
	wg.Wait()
	return cnt.result()
}

// ReleasesUnderFreshSessions floods for d with workers goroutines: each
// opens a session of its own (an Acquire of a free name with a term of an
// hour, so that the session is kept as long as it may be, granted, and
// its Release), releases perSession names it does not hold under it, each
// a raft entry whose outcome the session remembers, then takes a fresh
// session. Sent and the answers count every call. With untilLimited the
// flood ends early, once a call is refused at an account limit: a test
// then waits on that event, however slowly a loaded machine's raft goes.
func ReleasesUnderFreshSessions(ctx context.Context, c grantorpb.GrantorClient, prefix string, d time.Duration, workers, perSession int, untilLimited bool) Result {
	cnt := newCounter()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if untilLimited && cnt.limited.Load() {
					cancel()
				}
			}()
			for s := 0; ctx.Err() == nil && !(untilLimited && cnt.limited.Load()); s++ {
				session := fmt.Sprintf("%s-%d-%d", prefix, w, s)
				lease := name(prefix+"/own", w*1_000_000+s, 64)
				cnt.sent.Add(1)
				a, err := c.Acquire(ctx, &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: session, Seq: 1},
					Lease: lease, Owner: "o", TtlNs: int64(time.Hour)})
				if ctx.Err() != nil {
					return
				}
				cnt.add(err)
				if err != nil {
					continue
				}
				for seq := uint64(2); seq < uint64(perSession+2) && ctx.Err() == nil && !(untilLimited && cnt.limited.Load()); seq++ {
					req := &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: session, Seq: seq},
						Lease: name(prefix+"/unheld", int(seq), 250), Owner: "o", Token: 1}
					if seq == 2 {
						req.Lease, req.Token = lease, a.GetToken()
					}
					cnt.sent.Add(1)
					_, err := c.Release(ctx, req)
					if ctx.Err() != nil {
						return
					}
					cnt.add(err)
				}
			}
		}()
	}
	wg.Wait()
	return cnt.result()
}

// ReleasesUnderUnknownSessions floods for d with workers goroutines of
// Releases under session ids that never existed: no raft entry, but an
// audit line each unless the identity's account limits them.
func ReleasesUnderUnknownSessions(ctx context.Context, c grantorpb.GrantorClient, prefix string, d time.Duration, workers int) Result {
	cnt := newCounter()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				cnt.sent.Add(1)
				_, err := c.Release(ctx, &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: fmt.Sprintf("%s-never-%d-%d", prefix, w, i), Seq: 1},
					Lease: name(prefix, i, 250), Owner: "o", Token: 1})
				if ctx.Err() != nil {
					return
				}
				cnt.add(err)
			}
		}()
	}
	wg.Wait()
	return cnt.result()
}
