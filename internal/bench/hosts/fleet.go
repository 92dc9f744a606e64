package hosts

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/daemon"
	"github.com/leaseside/leaseside/ipc"
)

// host is one simulated host: a sidecar (the daemon's own code, with its
// socket, grantor sessions and renew loop) and a program on it that holds
// its leases through the socket, bound to its connection.
type host struct {
	i      int
	d      *daemon.Daemon
	c      *ipc.Client
	ran    chan struct{}      // closed when the daemon's Run returned
	stop   context.CancelFunc // ends the daemon's Run
	events chan *ipc.Event
	// leases are the program's leases by name, with the deadline of the
	// latest grant or renewal; under the observer's mu once it watches.
	leases map[string]*held
	// names and tokens are the leases as acquired, in order.
	names, tokens []string
}

// held is one lease of a host.
type held struct {
	token    string
	deadline int64 // CLOCK_BOOTTIME ns
	// renewedAfterKill is set once a renewal sent after the kill came.
	renewedAfterKill bool
}

// daemonConfig is the sidecar configuration of host i: the defaults, the
// cluster's grantors and TLS, and a source address of its own. Two things
// differ from a sidecar on a host of its own, both outside renewal: the
// clock watcher wakes every second, not every 100 ms (its pause
// detection is per host, and N of them in one process would measure this
// process), and stopped owners are not looked for (the owner is this
// process, which is running).
func daemonConfig(cfg Config, i int, creds countingCreds) daemon.Config {
	dc := daemon.DefaultConfig()
	dc.Grantors = cfg.Grantors
	dc.Credentials = creds
	dc.Dialer = sourceDialer(sourceAddr(i, cfg.Sources))
	dc.Watch.Interval = time.Second
	dc.Watch.PauseThreshold = time.Second
	dc.OwnerStoppedLimit = 0
	dc.MaxTTL = max(dc.MaxTTL, cfg.Term)
	dc.MaxLeasesPerUID = max(dc.MaxLeasesPerUID, cfg.LeasesPerHost) // one program holds them all
	return dc
}

// start starts host i's sidecar on a socket in dir, and has its program
// acquire its leases, each with a name of run's and of its try (a grant
// whose reply an earlier try did not get stays with that try's session
// until its term ends).
func start(ctx context.Context, cfg Config, dir, run string, i, try int, creds countingCreds) (*host, error) {
	d, err := daemon.New(daemonConfig(cfg, i, creds))
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, strconv.Itoa(i)+"-"+strconv.Itoa(try)+".sock")
	ln, err := ipc.Listen(path)
	if err != nil {
		return nil, err
	}
	h := &host{i: i, d: d, ran: make(chan struct{}), events: make(chan *ipc.Event, 4*cfg.LeasesPerHost+16), leases: map[string]*held{}}
	go func() {
		defer close(h.ran)
		d.Run(ctx, ln)
	}()
	h.c = &ipc.Client{Socket: path}
	h.c.Notify(h.events)
	for j := range cfg.LeasesPerHost {
		name := fmt.Sprintf("bench/%s/hosts/%d/%d/%d", run, i, try, j)
		l, err := h.c.Acquire(ctx, name, ipc.AcquireOptions{TTL: cfg.Term})
		if err != nil {
			return h, fmt.Errorf("host %d: acquire %s: %w", i, name, err)
		}
		h.leases[name] = &held{token: l.Token, deadline: l.DeadlineBoottimeNs}
		h.names, h.tokens = append(h.names, name), append(h.tokens, l.Token)
	}
	return h, nil
}

// close releases the host's leases (its program closes its connection)
// and waits for its sidecar to stop once ctx, the sidecars' context,
// ends.
func (h *host) close() {
	h.c.Close()
}

// startAll starts the hosts first .. first+count-1, cfg.Concurrency at a
// time, and returns them (nil for those not started after an error).
func startAll(ctx context.Context, cfg Config, first, count int, dir, run string, creds countingCreds, progress func(string, ...any)) ([]*host, error) {
	hosts := make([]*host, count)
	var (
		mu     sync.Mutex
		next   int
		failed error
		wg     sync.WaitGroup
		done   int
		t0     = time.Now()
	)
	for range min(cfg.Concurrency, count) {
		wg.Go(func() {
			for {
				mu.Lock()
				k := next
				next++
				stop := k >= count || failed != nil
				mu.Unlock()
				if stop {
					return
				}
				h, err := startRetrying(ctx, cfg, dir, run, first+k, creds)
				mu.Lock()
				hosts[k] = h
				if err != nil && failed == nil {
					failed = err
				}
				if done++; done%max(1, count/4) == 0 {
					progress("%d of %d hosts hold their leases after %.0fs", done, count, time.Since(t0).Seconds())
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return hosts, failed
}

// startRetrying starts host i, and on a failure that a program would
// retry (the cluster did not answer in time: the machine is loaded while
// thousands of hosts start), stops it and starts it again, a few times.
func startRetrying(ctx context.Context, cfg Config, dir, run string, i int, creds countingCreds) (*host, error) {
	for try := 1; ; try++ {
		hctx, stop := context.WithCancel(ctx)
		h, err := start(hctx, cfg, dir, run, i, try, creds)
		if err == nil {
			h.stop = stop
			return h, nil
		}
		if h != nil {
			h.close()
		}
		stop()
		if h != nil {
			<-h.ran
		}
		var ie *ipc.Error
		if try == startTries || !errors.As(err, &ie) || ie.Code != ipc.CodeUnavailable {
			return nil, err
		}
		t := time.NewTimer(time.Duration(try) * time.Second) // a program's backoff before it tries again
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// startTries is how many times a host is started before its failure to
// reach the cluster fails the run.
const startTries = 8

// raiseFileLimit makes room for the hosts' descriptors: per host its
// socket, its program's connection and the sidecar's end of it, and its
// connections to grantors (one, and one for each grantor it fails over
// to). Root may raise the hard limit; anyone else gets an error naming
// what is needed.
func raiseFileLimit(hosts, grantors int) error {
	need := uint64(hosts*(3+grantors) + 1024)
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return err
	}
	if rl.Cur >= need {
		return nil
	}
	want := unix.Rlimit{Cur: need, Max: max(rl.Max, need)}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &want); err != nil {
		return fmt.Errorf("bench hosts: %d hosts need %d open files, the limit is %d (hard %d) and raising it failed: %w", hosts, need, rl.Cur, rl.Max, err)
	}
	return nil
}

// boottime is now on CLOCK_BOOTTIME, the clock of the sidecars' deadlines.
func boottime() int64 { return clockwatch.System.Now().Nanoseconds() }
