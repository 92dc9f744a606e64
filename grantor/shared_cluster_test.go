package grantor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// Randomized, on a real 3-grantor raft cluster over gRPC: readers and
// writers (random kinds, with and without waits) take turns on one name
// while a watcher on the leader checks every change it applies, in log
// order: never an exclusive holder beside another holder, and every new
// grant's token above every earlier one's. Every waiter (an hour's wait
// on a clock that does not move) must be served once the holders before
// it release.
func TestSharedRandomizedOnACluster(t *testing.T) {
	c := startCluster(t, 3)
	li := c.leader()
	api := c.nodes[li].client
	for _, id := range []string{"n1", "n2", "n3"} { // shared grants need every grantor registered
		c.events[li].wait(t, 0, id+" registered", func(e testEvent) bool { return e.what == "registered" && e.lease == id })
	}
	const name = "rw/cluster"
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
	defer cancel()
	ws, err := api.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Send(&grantorpb.WatchRequest{Add: []string{name}}); err != nil {
		t.Fatal(err)
	}
	if ev, err := ws.Recv(); err != nil || ev.Kind != grantorpb.WatchEvent_SNAPSHOT {
		t.Fatalf("watch snapshot: %v %v", ev, err)
	}
	checked := make(chan error, 1)
	var shared, exclusive int
	go func() {
		var last uint64
		for {
			ev, err := ws.Recv()
			if err != nil {
				checked <- nil // the stream ends with the test
				return
			}
			if !ev.Shared && len(ev.Holders) > 1 {
				checked <- fmt.Errorf("index %d: %d holders, not shared: %v", ev.Index, len(ev.Holders), ev.Holders)
				return
			}
			if ev.Kind == grantorpb.WatchEvent_ACQUIRED {
				if ev.Token <= last {
					checked <- fmt.Errorf("index %d: token %d not above the earlier grant %d", ev.Index, ev.Token, last)
					return
				}
				last = ev.Token
				if ev.Shared {
					shared++
				} else {
					exclusive++
				}
			}
		}
	}()
	const actors, rounds = 8, 12
	var wg sync.WaitGroup
	errs := make(chan error, actors)
	for a := range actors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(a), 42))
			session := fmt.Sprintf("actor-%d", a)
			seq := uint64(0)
			for range rounds {
				seq++
				req := acqReq(session, seq, name)
				req.TtlNs = int64(time.Hour)
				if rng.IntN(3) > 0 {
					req.WaitNs = int64(time.Hour)
				}
				call := api.Acquire
				isShared := rng.IntN(3) > 0
				if isShared {
					call = api.AcquireShared
				}
				resp, err := call(ctx, req)
				if err != nil {
					errs <- fmt.Errorf("%s/%d: %v", session, seq, err)
					return
				}
				if req.WaitNs > 0 && !resp.Granted {
					errs <- fmt.Errorf("%s/%d: a waiter of an hour was refused: %v", session, seq, resp)
					return
				}
				if !resp.Granted {
					continue
				}
				if resp.Shared != isShared {
					errs <- fmt.Errorf("%s/%d: asked shared %v, granted %v", session, seq, isShared, resp.Shared)
					return
				}
				seq++
				rel, err := api.Release(ctx, &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: session, Seq: seq}, Lease: name, Owner: "o", Token: resp.Token})
				if err != nil || !rel.Released {
					errs <- fmt.Errorf("%s/%d: release: %v %v", session, seq, rel, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ws.CloseSend()
	cancel()
	if err := <-checked; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d shared and %d exclusive grants", shared, exclusive)
	if shared == 0 || exclusive == 0 {
		t.Fatalf("%d shared and %d exclusive grants: the run tested nothing", shared, exclusive)
	}
}
