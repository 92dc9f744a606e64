package daemon

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// Cluster-wide holder watches and observers (issue 12).
//
// The daemon keeps one Watch stream to the grantor leader for the whole
// host, however many local subscribers there are, and adds and removes
// names on it as subscribers come and go. The leader sends each name's
// holders first, then every change it applies; the daemon keeps the last
// holders of each name and fans each change out to the name's
// subscribers: `watch` with holders gets holder events, `observe` gets
// leader and no_leader events when the oldest holder (the leader) or its
// value changes. A subscriber's first event is the holders as they are
// (change sync; for an observer, leader or no_leader).
//
// When the stream ends (the leader left office, the daemon read too
// slowly, the grantor went silent), the daemon opens a new one to the
// leader it knows, which starts again from the holders at that moment;
// subscribers whose holders changed meanwhile get one sync event (an
// observer: one leader or no_leader event if the leader changed). A
// local subscriber that does not read its events is disconnected by the
// socket server like any slow client, and can watch again.
//
// Bounds: a connection watches at most maxConnWatches names, a local user
// other than root and the daemon's own at most maxUIDWatches over all its
// connections (so that no one user takes the whole host's share), the
// daemon at most maxWatchedNames (the grantor's limit for one stream).

const (
	// maxConnWatches is the most names one connection may watch or
	// observe.
	maxConnWatches = 1024
	// maxUIDWatches is the most names one local user other than root
	// and the daemon's own uid may watch or observe over all its
	// connections: a quarter of the daemon's, so that one user filling
	// its share leaves the others theirs.
	maxUIDWatches = maxWatchedNames / 4
	// maxWatchedNames is the most names the daemon watches at once.
	maxWatchedNames = 4096
	// leaderCheckInterval is how often the stream loop checks that its
	// grantor is still the one the daemon believes leads: a grantor cut
	// off by a partition sends no end of stream.
	leaderCheckInterval = time.Second
)

// holderWatch is the daemon's side of cluster-wide watches.
type holderWatch struct {
	g     *grantorConn
	clock clockwatch.Clock
	log   *slog.Logger

	mu      sync.Mutex
	names   map[string]*watchedName
	perConn map[*ipc.Conn]int
	// perUID counts the subscriptions of each capped local user (see
	// maxUIDWatches).
	perUID map[int]int
	// ownUID is the daemon's own uid, which is not capped per user.
	ownUID int
	// removed are names no longer watched that the current stream still
	// carries.
	removed []string
	wake    chan struct{} // 1-buffered: names were added or removed
}

// watchedName is one name some local subscriber watches.
type watchedName struct {
	// subs are the subscribers; the value says whether one was told the
	// holders yet.
	subs map[watchSub]bool
	// known is set once the holders came from a grantor; synced while
	// they come from the current stream.
	known, synced bool
	// onStream is set once the current stream was asked for the name.
	onStream bool
	limit    int
	shared   bool // the holders are shared grants of a read/write lock
	holders  []ipc.Holder
}

// watchSub is one subscriber: a connection, as an observer or a holder
// watcher.
type watchSub struct {
	c       *ipc.Conn
	observe bool
}

func newHolderWatch(g *grantorConn, clock clockwatch.Clock, log *slog.Logger) *holderWatch {
	return &holderWatch{g: g, clock: clock, log: log, names: map[string]*watchedName{}, perConn: map[*ipc.Conn]int{}, perUID: map[int]int{}, ownUID: os.Geteuid(), wake: make(chan struct{}, 1)}
}

// subscribe makes c a subscriber of name; it is told the holders at once
// if they are known from the current stream, else when they come.
func (hw *holderWatch) subscribe(c *ipc.Conn, name string, observe bool) *ipc.Error {
	hw.mu.Lock()
	defer hw.mu.Unlock()
	sub := watchSub{c, observe}
	wn := hw.names[name]
	if wn != nil {
		if _, dup := wn.subs[sub]; dup {
			return nil
		}
	}
	if hw.perConn[c] >= maxConnWatches {
		return ipc.Errorf(ipc.CodeResourceExhausted, "this connection watches %d names, the most one may", maxConnWatches)
	}
	capped := hw.cappedUID(c)
	if capped && hw.perUID[c.Cred.UID] >= maxUIDWatches {
		return ipc.Errorf(ipc.CodeResourceExhausted, "uid %d watches %d names over its connections, the most one user may (a quarter of the host's %d)", c.Cred.UID, maxUIDWatches, maxWatchedNames)
	}
	if wn == nil {
		if len(hw.names) >= maxWatchedNames {
			return ipc.Errorf(ipc.CodeResourceExhausted, "this host watches %d names, the most a daemon may", maxWatchedNames)
		}
		wn = &watchedName{subs: map[watchSub]bool{}}
		hw.names[name] = wn
		poke(hw.wake)
	}
	hw.perConn[c]++
	if capped {
		hw.perUID[c.Cred.UID]++
	}
	wn.subs[sub] = false
	if wn.synced {
		hw.tellLocked(name, wn, sub)
	}
	return nil
}

// cappedUID says whether c's user is held to maxUIDWatches: every user
// but root and the daemon's own.
func (hw *holderWatch) cappedUID(c *ipc.Conn) bool {
	return c.Cred.UID != 0 && c.Cred.UID != hw.ownUID
}

// uncountLocked takes n ended subscriptions of c off its user's count.
// The caller holds hw.mu.
func (hw *holderWatch) uncountLocked(c *ipc.Conn, n int) {
	if !hw.cappedUID(c) {
		return
	}
	if hw.perUID[c.Cred.UID] -= n; hw.perUID[c.Cred.UID] <= 0 {
		delete(hw.perUID, c.Cred.UID)
	}
}

// dropConn ends every subscription of c (its connection closed).
func (hw *holderWatch) dropConn(c *ipc.Conn) {
	hw.mu.Lock()
	defer hw.mu.Unlock()
	if hw.perConn[c] == 0 {
		return
	}
	hw.uncountLocked(c, hw.perConn[c])
	delete(hw.perConn, c)
	for name, wn := range hw.names {
		delete(wn.subs, watchSub{c, true})
		delete(wn.subs, watchSub{c, false})
		if len(wn.subs) == 0 {
			delete(hw.names, name)
			if wn.onStream {
				hw.removed = append(hw.removed, name)
			}
			poke(hw.wake)
		}
	}
}

// run keeps the stream up while anything is watched, until ctx ends.
func (hw *holderWatch) run(ctx context.Context) {
	backoff := 50 * time.Millisecond
	for {
		if !hw.waitForNames(ctx) {
			return
		}
		began := hw.clock.Now()
		err := hw.stream(ctx)
		hw.unsync()
		if ctx.Err() != nil {
			return
		}
		hw.log.Debug("holder watch stream ended; opening another", "err", err)
		if hw.clock.Now().Sub(began) > 10*time.Second {
			backoff = 50 * time.Millisecond // it served a while: not a loop of failures
		}
		if !backOff(ctx, jitter(backoff)) {
			return
		}
		backoff = min(2*backoff, time.Second)
	}
}

// waitForNames waits until some name is watched.
func (hw *holderWatch) waitForNames(ctx context.Context) bool {
	for {
		hw.mu.Lock()
		n := len(hw.names)
		hw.mu.Unlock()
		if n > 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-hw.wake:
		}
	}
}

// unsync marks every name as not on a stream: its holders may be stale.
func (hw *holderWatch) unsync() {
	hw.mu.Lock()
	defer hw.mu.Unlock()
	for _, wn := range hw.names {
		wn.synced, wn.onStream = false, false
	}
	hw.removed = nil
}

// stream runs one Watch stream to the likely leader until it fails.
func (hw *holderWatch) stream(ctx context.Context) error {
	api, addr, err := hw.g.client()
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := api.Watch(sctx)
	if err != nil {
		hw.g.failed(addr, err)
		return err
	}
	evs := make(chan *grantorpb.WatchEvent, 64)
	errc := make(chan error, 1)
	go func() {
		for {
			ev, err := st.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case evs <- ev:
			case <-sctx.Done():
				return
			}
		}
	}()
	// A wake-up (see backOff): a grantor that another replaced as leader
	// is left within a second of real time, whatever a fake clock does.
	tick := time.NewTicker(leaderCheckInterval)
	defer tick.Stop()
	for {
		if req := hw.changes(); req != nil {
			if err := st.Send(req); err != nil {
				return <-errc // the receiver reports why the stream ended
			}
		}
		select {
		case <-hw.wake:
		case ev := <-evs:
			hw.apply(ev)
		case err := <-errc:
			switch status.Code(err) {
			case codes.FailedPrecondition, codes.Unavailable:
				hw.g.failed(addr, err) // not (or no longer) the leader
			case codes.Unimplemented:
				hw.log.Warn("the grantor leader does not serve holder watches: upgrade every grantor", "grantor", addr, "err", err)
			}
			return err
		case <-tick.C:
			if l := hw.g.likelyLeader(); l != "" && l != addr {
				return nil // the daemon follows another leader now
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// changes returns the request that brings the stream in line with the
// watched names, nil when it is: names newly watched are added, names no
// longer watched removed (the grantor applies removals first).
func (hw *holderWatch) changes() *grantorpb.WatchRequest {
	hw.mu.Lock()
	defer hw.mu.Unlock()
	req := grantorpb.WatchRequest{Remove: hw.removed}
	hw.removed = nil
	gone := make(map[string]bool, len(req.Remove))
	for _, name := range req.Remove {
		gone[name] = true
	}
	for name, wn := range hw.names {
		switch {
		case wn.onStream:
		case gone[name]:
			// Watched again since it was removed: the grantor takes a
			// request that removes and adds a name as no change, and
			// would send no holders for the new subscriber to be told.
			// The next request adds it.
			poke(hw.wake)
		default:
			wn.onStream = true
			req.Add = append(req.Add, name)
		}
	}
	if len(req.Add)+len(req.Remove) == 0 {
		return nil
	}
	return &req
}

// apply takes in one event of the stream and tells the subscribers.
func (hw *holderWatch) apply(ev *grantorpb.WatchEvent) {
	hw.mu.Lock()
	defer hw.mu.Unlock()
	wn := hw.names[ev.Lease]
	if wn == nil {
		return // nobody watches it any more
	}
	if ev.Kind == grantorpb.WatchEvent_DENIED {
		hw.refusedLocked(ev.Lease, wn)
		return
	}
	prev, wasKnown := wn.holders, wn.known
	wn.limit, wn.shared, wn.holders = int(ev.Limit), ev.Shared, toHolders(ev.Holders)
	wn.known, wn.synced = true, true
	for sub, told := range wn.subs {
		switch {
		case !told:
			hw.tellLocked(ev.Lease, wn, sub)
		case ev.Kind == grantorpb.WatchEvent_SNAPSHOT:
			// A new stream: tell only what changed while there was none.
			if !wasKnown || (sub.observe && leaderOf(prev) != leaderOf(wn.holders)) || (!sub.observe && !slices.Equal(prev, wn.holders)) {
				hw.tellLocked(ev.Lease, wn, sub)
			}
		case sub.observe:
			if leaderOf(prev) != leaderOf(wn.holders) {
				hw.tellLocked(ev.Lease, wn, sub)
			}
		default:
			sub.c.Send(&ipc.Event{Event: ipc.EventHolder, Lease: ev.Lease, Change: changeName(ev.Kind),
				Token: strconv.FormatUint(ev.Token, 10), Holder: ev.HolderName, Value: ev.Value,
				Holders: wn.holders, Limit: wn.limit, Shared: wn.shared})
		}
	}
}

// refusedLocked ends every subscription of name, which the grantors'
// name rules do not let this host watch (the stream no longer carries
// it), telling each subscriber.
func (hw *holderWatch) refusedLocked(name string, wn *watchedName) {
	delete(hw.names, name)
	for sub := range wn.subs {
		hw.uncountLocked(sub.c, 1)
		if hw.perConn[sub.c]--; hw.perConn[sub.c] <= 0 {
			delete(hw.perConn, sub.c)
		}
		sub.c.Send(&ipc.Event{Event: ipc.EventWatchRefused, Lease: name, Reason: ipc.CodeNameNotAllowed})
	}
	hw.log.Warn("the grantors' name rules do not let this sidecar watch a name; its watchers were told", "lease", name, "watchers", len(wn.subs))
}

// tellLocked tells sub the holders of name as they are now: a holder
// event with change sync, or for an observer the leader (or none).
func (hw *holderWatch) tellLocked(name string, wn *watchedName, sub watchSub) {
	wn.subs[sub] = true
	if !sub.observe {
		sub.c.Send(&ipc.Event{Event: ipc.EventHolder, Lease: name, Change: ipc.ChangeSync, Holders: wn.holders, Limit: wn.limit, Shared: wn.shared})
		return
	}
	sub.c.Send(leaderEvent(name, wn.holders))
}

// leaderEvent is an observer's event for holders: the leader (the oldest
// holder) or no_leader.
func leaderEvent(name string, holders []ipc.Holder) *ipc.Event {
	if len(holders) == 0 {
		return &ipc.Event{Event: ipc.EventNoLeader, Lease: name}
	}
	h := holders[0]
	return &ipc.Event{Event: ipc.EventLeader, Lease: name, Token: h.Token, Holder: h.Holder, Value: h.Value}
}

// leaderOf is the leader of holders (the oldest), the zero Holder when
// none.
func leaderOf(holders []ipc.Holder) ipc.Holder {
	if len(holders) == 0 {
		return ipc.Holder{}
	}
	return holders[0]
}

func toHolders(hs []*grantorpb.Holder) []ipc.Holder {
	out := make([]ipc.Holder, len(hs))
	for i, h := range hs {
		out[i] = ipc.Holder{Token: strconv.FormatUint(h.Token, 10), Holder: h.HolderName, Value: h.Value}
	}
	return out
}

func changeName(k grantorpb.WatchEvent_Kind) string {
	switch k {
	case grantorpb.WatchEvent_ACQUIRED:
		return ipc.ChangeAcquired
	case grantorpb.WatchEvent_RELEASED:
		return ipc.ChangeReleased
	case grantorpb.WatchEvent_EXPIRED:
		return ipc.ChangeExpired
	case grantorpb.WatchEvent_PROCLAIMED:
		return ipc.ChangeProclaimed
	}
	return ipc.ChangeSync
}

// likelyLeader is the grantor the daemon believes leads ("" when it does
// not know).
func (g *grantorConn) likelyLeader() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.leader
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
