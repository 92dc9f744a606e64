package integration

import (
	"flag"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// The benchmark of issue 12's token check and holder watch, on the same
// real cluster as TestClusterSemaphoreOfThree (three grantors, sidecars A
// and B on loopback). Not part of `make test`: its figures depend on the
// machine. Run it with:
//
//	go test ./internal/integration -run TestMeasurePrims -v -timeout 30m -args -measure.prims
//
// It reports check_token answers per second against renewals per second
// (the renew op, each one a keepalive round trip to the leader and a
// verify round), each alone and both at once, from -measure.prims.callers
// callers split over the two hosts; and the latency from a release on
// host A to host B's holder watch event (the goal: 50 ms).
var (
	measurePrims        = flag.Bool("measure.prims", false, "run TestMeasurePrims")
	measurePrimsCallers = flag.Int("measure.prims.callers", 16, "concurrent callers of check_token and renew")
	measurePrimsWindow  = flag.Duration("measure.prims.window", 10*time.Second, "how long each throughput phase runs")
	measurePrimsRelease = flag.Int("measure.prims.releases", 100, "releases timed for the holder watch")
)

func TestMeasurePrims(t *testing.T) {
	if !*measurePrims {
		t.Skip("a measurement: run with -args -measure.prims")
	}
	const term = 15 * time.Second
	_, _, a, b := primsCluster(t)
	ctx := tctx(t)
	hosts := []*sidecar{a, b}
	callers := *measurePrimsCallers

	// Every caller holds a lease of its own, which it renews, and checks
	// the token of a lease B holds.
	checked, err := b.client(t).Acquire(ctx, "fence/checked", ipc.AcquireOptions{TTL: term})
	if err != nil {
		t.Fatal(err)
	}
	type caller struct {
		c *ipc.Client
		l *ipc.Lease
	}
	cs := make([]caller, callers)
	for i := range cs {
		c := hosts[i%2].client(t)
		l, err := c.Acquire(ctx, fmt.Sprintf("bench/renew-%d", i), ipc.AcquireOptions{TTL: term})
		if err != nil {
			t.Fatal(err)
		}
		cs[i] = caller{c, l}
	}
	check := func(cl caller) error {
		live, _, err := cl.c.CheckToken(ctx, checked.Lease, checked.Token)
		if err == nil && !live {
			err = fmt.Errorf("check_token says B's live token %s is not live", checked.Token)
		}
		return err
	}
	renew := func(cl caller) error {
		_, err := cl.c.RenewToken(ctx, cl.l.Lease, cl.l.Token)
		return err
	}
	// phase runs the given operations from every caller (caller i does
	// ops[i%len(ops)]) for the window and returns how many of each
	// completed per second.
	phase := func(ops ...func(caller) error) []float64 {
		counts := make([]atomic.Int64, len(ops))
		stop := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, callers)
		for i, cl := range cs {
			wg.Go(func() {
				k := i % len(ops)
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := ops[k](cl); err != nil {
						errs <- err
						return
					}
					counts[k].Add(1)
				}
			})
		}
		start := boottime()
		<-time.After(*measurePrimsWindow) // the measured window
		close(stop)
		wg.Wait()
		secs := boottime().Sub(start).Seconds()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		rates := make([]float64, len(ops))
		for k := range counts {
			rates[k] = float64(counts[k].Load()) / secs
		}
		return rates
	}
	checks := phase(check)[0]
	renews := phase(renew)[0]
	both := phase(check, renew)

	// Holder watch latency: A's holder releases, B's watch tells it.
	const name = "svc/timed"
	watcher := newHolderWatcher(t, b, name)
	ca := a.client(t)
	var lat []time.Duration
	for range *measurePrimsRelease {
		if _, err := ca.Acquire(ctx, name, ipc.AcquireOptions{TTL: term}); err != nil {
			t.Fatal(err)
		}
		if ev := watcher.next(t); ev.Change != ipc.ChangeAcquired {
			t.Fatalf("after a grant: %+v", ev)
		}
		d, _ := watcher.release(t, ca, name)
		lat = append(lat, d)
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	within := 0
	for _, d := range lat {
		if d <= 50*time.Millisecond {
			within++
		}
	}
	t.Logf("%d callers over 2 hosts, %s per phase, load average %s\n"+
		"| phase | check_token per second | renewals per second |\n| --- | --- | --- |\n"+
		"| check_token alone | %.0f | |\n| renew alone | | %.0f |\n| both at once (half the callers each) | %.0f | %.0f |\n"+
		"release on A to B's holder event, %d releases: median %s, p90 %s, p99 %s, max %s; %d within 50ms",
		callers, *measurePrimsWindow, loadAvg(), checks, renews, both[0], both[1],
		len(lat), ms1(pct(0.5)), ms1(pct(0.9)), ms1(pct(0.99)), ms1(lat[len(lat)-1]), within)
}

// ms1 renders a duration in milliseconds with one decimal.
func ms1(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
