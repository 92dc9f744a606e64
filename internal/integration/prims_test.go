package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/internal/netlab"
	"github.com/leaseside/leaseside/ipc"
)

// The coordination primitives of issue 12 on real processes: three
// grantors and two sidecars (two hosts: daemons with sessions of their
// own), driven through the socket with the Go client. Every instant is
// CLOCK_BOOTTIME, which all the processes share.

// primsCluster starts three loopback grantors, each with a metrics
// address (the lessor reports its queue only as a gauge), and sidecars A
// and B that know all three. It returns once the cluster applies
// semaphores and election values: a new cluster does once every
// follower has registered with the leader what it applies
// (grantor/versions.go), which nothing announces, so it asks until then.
func primsCluster(t *testing.T) (c *cluster, metrics []string, a, b *sidecar) {
	t.Helper()
	c = newLoopbackCluster(t, 3)
	for _, n := range c.nodes {
		// A port of the grantor's own choosing, read from its log: a
		// free port picked here was taken by another process
		// before the grantor bound it, beside the other parallel tests
		// ("bind: address already in use", and the grantor exited).
		n.extra = []string{"--metrics-addr", "127.0.0.1:0"}
	}
	c.startAll()
	for _, n := range c.nodes {
		metrics = append(metrics, servedMetricsAddr(t, n.proc))
	}
	a = startSidecar(t, "sidecar A", nil, "--grantors", c.rpcAddrs())
	b = startSidecar(t, "sidecar B", nil, "--grantors", c.rpcAddrs())
	probe := a.client(t)
	poll(t, "every grantor applies semaphores", func() (bool, string) {
		l, err := probe.Acquire(tctx(t), "probe/semaphores", ipc.AcquireOptions{TTL: 5 * time.Second, Limit: 2})
		switch {
		case errors.Is(err, &ipc.Error{Code: ipc.CodeNotSupported}):
			return false, err.Error()
		case err != nil:
			t.Fatalf("probe: %v", err)
		}
		if err := probe.Release(tctx(t), l.Lease); err != nil {
			t.Fatalf("probe: %v", err)
		}
		return true, ""
	})
	return c, metrics, a, b
}

// held is one contender's time as a holder, as it believed it: from the
// moment its acquire returned to the moment it decided to release (or its
// deadline, if earlier).
type held struct {
	who      int
	token    string
	from, to clockwatch.Instant
	holders  int
}

// A semaphore of 3 with 8 contenders on two hosts (four connections each,
// so several slots of one name are held on one host): no instant has more
// than 3 believed holders, and waiters are served first come first served,
// which the tokens show (the grantor's counter orders its grants). The
// first three take the slots at once; the five others queue one by one,
// each after the leader's lessor counts the one before in its queue;
// then every holder holds a little while and releases. Not parallel: a
// waiter keeps its place only while its sidecar keeps its connection (a
// sidecar whose keepalive goes unanswered on a starved machine moves to
// another connection, and its waiters' calls queue again at the tail).
func TestClusterSemaphoreOfThree(t *testing.T) {
	const (
		limit      = 3
		contenders = 8
		term       = 10 * time.Second
		hold       = 300 * time.Millisecond // each holder's work
		name       = "render/slots"
	)
	c, metrics, a, b := primsCluster(t)
	ctx := tctx(t)
	leaderMetrics := metrics[c.currentLeader().node]
	hosts := []*sidecar{a, b}

	var (
		mu   sync.Mutex
		log  []held
		errs = make(chan error, contenders)
	)
	// run holds a slot granted at from for hold, then releases it.
	run := func(i int, cl *ipc.Client, l *ipc.Lease, from clockwatch.Instant) {
		<-time.After(hold) // the holder's work
		to := min(boottime(), clockwatch.Instant(l.DeadlineBoottimeNs))
		mu.Lock()
		log = append(log, held{who: i, token: l.Token, from: from, to: to, holders: l.Holders})
		mu.Unlock()
		errs <- cl.Release(ctx, name)
	}
	clients := make([]*ipc.Client, contenders)
	for i := range clients {
		clients[i] = hosts[i%2].client(t)
	}
	first := make([]*ipc.Lease, limit)
	firstAt := make([]clockwatch.Instant, limit)
	for i := range limit {
		l, err := clients[i].Acquire(ctx, name, ipc.AcquireOptions{TTL: term, Limit: limit})
		if err != nil {
			t.Fatalf("contender %d: %v", i, err)
		}
		first[i], firstAt[i] = l, boottime()
	}
	// The others queue in order: each one's acquire is at the grantor
	// before the next is sent.
	for i := limit; i < contenders; i++ {
		go func() {
			l, err := clients[i].Acquire(ctx, name, ipc.AcquireOptions{TTL: term, Limit: limit, Wait: timeout / 2})
			if err != nil {
				errs <- fmt.Errorf("contender %d: %w", i, err)
				return
			}
			run(i, clients[i], l, boottime())
		}()
		want := float64(i - limit + 1)
		poll(t, fmt.Sprintf("contender %d queued", i), func() (bool, string) {
			n := metric(t, leaderMetrics, "leaseside_grantor_waiters")
			return n == want, fmt.Sprintf("%v waiters, want %v", n, want)
		})
	}
	for i, l := range first {
		go run(i, clients[i], l, firstAt[i])
	}
	for range contenders {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	// At most limit believed holders at any instant: sweep the intervals'
	// ends in time order (an end before a start at the same instant).
	type edge struct {
		at    clockwatch.Instant
		delta int
	}
	var edges []edge
	for _, h := range log {
		if h.holders > limit {
			t.Errorf("contender %d's grant (token %s) says %d holders, over the limit %d", h.who, h.token, h.holders, limit)
		}
		edges = append(edges, edge{h.from, +1}, edge{h.to, -1})
	}
	slices.SortFunc(edges, func(x, y edge) int {
		if x.at != y.at {
			return int(x.at - y.at)
		}
		return x.delta - y.delta
	})
	most, now := 0, 0
	for _, e := range edges {
		now += e.delta
		if now > limit {
			t.Errorf("%d believed holders at boot+%v, over the limit %d", now, time.Duration(e.at), limit)
		}
		most = max(most, now)
	}
	if most != limit {
		t.Errorf("at most %d believed holders at once: the first %d should have held together", most, limit)
	}
	// First come first served: the waiters' tokens grow in the order they
	// queued.
	byWho := map[int]uint64{}
	for _, h := range log {
		byWho[h.who] = token(t, h.token)
	}
	for i := limit + 1; i < contenders; i++ {
		if byWho[i] <= byWho[i-1] {
			t.Errorf("contender %d (queued after %d) got token %d, not after %d's %d: not first come first served", i, i-1, byWho[i], i-1, byWho[i-1])
		}
	}
	t.Logf("%d grants, at most %d believed holders at once; tokens by queue position: %v", len(log), most, byWho)
}

// A holder watch on host B sees host A's grant and release, pushed by the
// grantor leader, with the release's latency from the moment A's holder
// asked (the 50 ms goal is BenchmarkClusterHolderWatch's to state).
// check_token, asked through either host, is false for a superseded token
// and true for the live one.
func TestClusterHolderWatchAndCheckToken(t *testing.T) {
	t.Parallel()
	const (
		term = 10 * time.Second
		name = "svc/standby"
	)
	_, _, a, b := primsCluster(t)
	ctx := tctx(t)
	watcher := newHolderWatcher(t, b, name)

	ca := a.client(t)
	first, err := ca.Acquire(ctx, name, ipc.AcquireOptions{TTL: term})
	if err != nil {
		t.Fatal(err)
	}
	if ev := watcher.next(t); ev.Change != ipc.ChangeAcquired || ev.Token != first.Token || len(ev.Holders) != 1 {
		t.Fatalf("after A's grant: %+v", ev)
	}
	latency, ev := watcher.release(t, ca, name)
	if ev.Token != first.Token || len(ev.Holders) != 0 {
		t.Fatalf("after A's release: %+v", ev)
	}
	t.Logf("host B's watch saw host A's release %s after A asked for it", ms(latency))

	// B takes the name: A's token is superseded.
	live, err := b.client(t).Acquire(ctx, name, ipc.AcquireOptions{TTL: term})
	if err != nil {
		t.Fatal(err)
	}
	if ev := watcher.next(t); ev.Change != ipc.ChangeAcquired || ev.Token != live.Token {
		t.Fatalf("after B's grant: %+v", ev)
	}
	for _, s := range []*sidecar{a, b} {
		for _, tc := range []struct {
			token string
			live  bool
		}{{first.Token, false}, {live.Token, true}} {
			got, tokens, err := s.client(t).CheckToken(ctx, name, tc.token)
			if err != nil {
				t.Fatalf("%s: check_token %s: %v", s.name, tc.token, err)
			}
			if got != tc.live || !slices.Equal(tokens, []string{live.Token}) {
				t.Fatalf("%s: check_token %s: live %v, tokens %v; want live %v, tokens [%s]", s.name, tc.token, got, tokens, tc.live, live.Token)
			}
		}
	}
}

// holderWatcher is a connection that watches one name's holders.
type holderWatcher struct {
	c   *ipc.Client
	evs chan *ipc.Event
}

func newHolderWatcher(t *testing.T, s *sidecar, name string) *holderWatcher {
	t.Helper()
	w := &holderWatcher{c: s.client(t), evs: make(chan *ipc.Event, 1024)}
	w.c.Notify(w.evs)
	if err := w.c.WatchHolders(tctx(t), name); err != nil {
		t.Fatal(err)
	}
	if ev := w.next(t); ev.Change != ipc.ChangeSync {
		t.Fatalf("first holder event %+v, want the holders (sync)", ev)
	}
	return w
}

// next is the next holder event.
func (w *holderWatcher) next(t testing.TB) *ipc.Event {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case ev := <-w.evs:
			if ev.Event == ipc.EventHolder {
				return ev
			}
		case <-deadline.C:
			t.Fatal("no holder event")
		}
	}
}

// release releases name through c and waits for the watch to tell it; it
// returns the time from the request to the event.
func (w *holderWatcher) release(t testing.TB, c *ipc.Client, name string) (time.Duration, *ipc.Event) {
	t.Helper()
	asked := boottime()
	if err := c.Release(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	ev := w.next(t)
	seen := boottime()
	if ev.Change != ipc.ChangeReleased {
		t.Fatalf("after a release: %+v", ev)
	}
	return seen.Sub(asked), ev
}

// When host A is cut off from every grantor, its holder is told jeopardy
// once no renewal has succeeded for two thirds of the term (t0 + 2d/3),
// before lost, with valid_ms the time left to the deadline it holds; the
// lease is then lost at that deadline, and host B's holder watch sees the
// grant expire at the grantor.
func TestClusterJeopardyBeforeLost(t *testing.T) {
	t.Parallel()
	const (
		term = 6 * time.Second
		name = "jobs/jeopardy"
	)
	// Hosts 0-2: grantors; 3: sidecar A; 4: sidecar B.
	lab := netlab.New(t, 5)
	c := newLabCluster(t, lab, 0, 1, 2)
	c.startAll()
	a := startSidecar(t, "sidecar A", lab.Host(3), "--grantors", c.rpcAddrs())
	b := startSidecar(t, "sidecar B", lab.Host(4), "--grantors", c.rpcAddrs())
	ctx := tctx(t)
	watcher := newHolderWatcher(t, b, name)

	mark := a.events.mark()
	l, err := a.client(t).Acquire(ctx, name, ipc.AcquireOptions{TTL: term})
	if err != nil {
		t.Fatal(err)
	}
	if ev := watcher.next(t); ev.Change != ipc.ChangeAcquired || ev.Token != l.Token {
		t.Fatalf("B's watch after A's grant: %+v", ev)
	}
	a.waitEvent(t, mark, ipc.EventRenewed, name) // keepalives flow
	// The states A's Go client goes through (jeopardy and lost come
	// about d/3 apart).
	states := make(chan []ipc.State, 1)
	go func() {
		var seen []ipc.State
		for {
			s, changed := l.State()
			seen = append(seen, s)
			if s == ipc.Lost {
				states <- seen
				return
			}
			<-changed
		}
	}()
	lag := ownLag(t)
	lab.Isolate(3)
	cut := boottime()

	li, lev := a.waitEvent(t, mark, ipc.EventLost, name)
	// The deadline A held at the cut: the grant's or its last renewal's.
	deadline := a.lastDeadline(name, l.Token, l.DeadlineBoottimeNs)
	// The renewal behind it left at t0 = deadline - (d(1-rho) - eps).
	t0 := deadline.Add(-clusterTiming.HolderDeadline(0, term).Sub(0))
	due := t0.Add(2 * term / 3)
	// The jeopardy before lost.
	var jev stamped[*ipc.Event]
	for _, e := range a.events.all()[mark:li] {
		if e.v.Event == ipc.EventJeopardy && e.v.Lease == name {
			jev = e
		}
	}
	want := []ipc.State{ipc.Safe, ipc.Jeopardy, ipc.Lost}
	if jev.v == nil {
		// Only a daemon that stalled from before t0 + 2d/3 to the
		// deadline may skip jeopardy (a lease past its deadline is
		// lost, not in jeopardy); it reports such a stall itself (a
		// pause clock event), and what follows the lost must hold all
		// the same.
		if p := longestPause(a.process); p < deadline.Sub(due) {
			t.Fatalf("no jeopardy before lost, and sidecar A reported no stall through the jeopardy window of %s (longest %s)", ms(deadline.Sub(due)), ms(p))
		}
		t.Logf("no jeopardy: sidecar A reported a stall of %s, through the jeopardy window of %s", ms(longestPause(a.process)), ms(deadline.Sub(due)))
		want = []ipc.State{ipc.Safe, ipc.Lost}
	} else {
		valid := time.Duration(jev.v.ValidMs) * time.Millisecond
		t.Logf("cut %s after the last renewal's t0; jeopardy seen %s after the cut with valid_ms %d (the rule gives at most %s); lost seen %s after the cut, %s after the deadline",
			ms(cut.Sub(t0)), ms(jev.at.Sub(cut)), jev.v.ValidMs, ms(deadline.Sub(due)), ms(lev.at.Sub(cut)), ms(lev.at.Sub(deadline)))

		switch {
		case jev.v.Token != l.Token || clockwatch.Instant(jev.v.DeadlineBoottimeNs) != deadline:
			t.Fatalf("jeopardy %+v, want token %s and the deadline A held, %v", jev.v, l.Token, deadline)
		case valid <= 0:
			t.Fatalf("jeopardy with valid_ms %d", jev.v.ValidMs)
		case valid > deadline.Sub(due):
			// valid_ms is deadline - the instant of the jeopardy, rounded
			// down: more than deadline - (t0 + 2d/3) means it came early.
			t.Fatalf("jeopardy with valid_ms %d: told before t0 + 2d/3 (valid then: %s)", jev.v.ValidMs, ms(deadline.Sub(due)))
		case deadline.Sub(jev.at) > valid+time.Millisecond:
			t.Fatalf("jeopardy seen with %s left, more than its valid_ms %d: valid_ms understates the time left", ms(deadline.Sub(jev.at)), jev.v.ValidMs)
		case lev.v.Reason != ipc.ReasonRenewFailed:
			t.Fatalf("lost %+v, want reason %s", lev.v, ipc.ReasonRenewFailed)
		}
		if late := jev.at.Sub(due); late > term/3 {
			// Only a stall of the daemon or of this test makes it this late;
			// the deadline was still ahead, so report rather than fail
			// unless nobody stalled.
			if l := max(lag(), longestPause(a.process)); l < late-term/6 {
				t.Errorf("jeopardy seen %s after t0 + 2d/3, and this test and sidecar A stalled only %s", ms(late), ms(l))
			}
		}
	}
	select {
	case seen := <-states:
		if !slices.Equal(seen, want) {
			t.Fatalf("A's Go client went through %v, want %v", seen, want)
		}
	case <-ctx.Done():
		t.Fatal("A's Go client still holds the lease after lost")
	}
	// The grantors let the grant expire: B's watch sees it.
	if ev := watcher.next(t); ev.Change != ipc.ChangeExpired || ev.Token != l.Token || len(ev.Holders) != 0 {
		t.Fatalf("B's watch after A was cut off: %+v", ev)
	}
}
