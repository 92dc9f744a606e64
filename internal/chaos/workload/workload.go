// Package workload is what the clients of the chaos suite do: real
// processes on the sidecar hosts that use the daemon's socket the way
// users do. A client contends for a few lease names with random terms and
// waits, holds what it gets for a random time, checks the lease and
// writes to a fenced register with its token right before and after each
// check, and lets go by releasing, by closing its connection, or by
// exiting (as the lease's owner process); now and then it runs a command
// under `leaseside run` instead, which does the same from inside.
//
// Everything a client does or sees is a Record on its standard output,
// stamped with CLOCK_BOOTTIME, for the suite's checkers.
package workload

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// Environment variables that make a program a client (or a command of
// run): the chaos client binary calls Main, which reads them.
const (
	// EnvConfig holds the client's Config as JSON.
	EnvConfig = "CHAOS_WORKLOAD"
	// EnvRunOp is set for the command that a client runs under
	// `leaseside run`: the Op of that run.
	EnvRunOp = "CHAOS_RUN_OP"
)

// Config says what a client does.
type Config struct {
	// Client names the client ("s1c2"); Incarnation counts its restarts.
	Client      string `json:"client"`
	Incarnation int    `json:"incarnation"`
	// Socket is the daemon's socket, Register the fenced register's.
	Socket   string `json:"socket"`
	Register string `json:"register"`
	// Names are the leases to contend for, TTLs the terms to pick from.
	Names []string        `json:"names"`
	TTLs  []time.Duration `json:"ttls"`
	// MaxWait and MaxHold bound the random wait of an acquire and how
	// long a grant is held.
	MaxWait time.Duration `json:"max_wait"`
	MaxHold time.Duration `json:"max_hold"`
	// Seed seeds the client's choices (with Incarnation).
	Seed uint64 `json:"seed"`
	// Leaseside is the leaseside binary, for run; Self this program.
	Leaseside string `json:"leaseside"`
	Self      string `json:"self"`
	// RunShare is the share of acquisitions made through `leaseside run`.
	RunShare float64 `json:"run_share"`
	// Prims makes the client take turns, instead of Names, on the
	// semaphore Semaphore (of Limit holders) and the election Election
	// (elect with a value, proclaim new ones, resign).
	Prims     bool   `json:"prims,omitempty"`
	Semaphore string `json:"semaphore,omitempty"`
	Limit     int    `json:"limit,omitempty"`
	Election  string `json:"election,omitempty"`
}

// Main runs the program as what its environment says: a client, or the
// command of a client's run. It does not return.
func Main() {
	var cfg Config
	if err := json.Unmarshal([]byte(os.Getenv(EnvConfig)), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "chaos client: %s: %v\n", EnvConfig, err)
		os.Exit(2)
	}
	if op := os.Getenv(EnvRunOp); op != "" {
		runChild(cfg, op)
	} else {
		runClient(cfg)
	}
	os.Exit(0)
}

// client is one client process.
type client struct {
	cfg      Config
	rng      *rand.Rand
	rec      *recorder
	reg      *register
	seq      int
	stopping atomic.Bool // SIGTERM: let go of what is held and exit
}

// callTimeout bounds a socket call beyond its wait: the daemon answers
// within the wait plus its request timeout.
const callTimeout = 15 * time.Second

func runClient(cfg Config) {
	c := &client{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Incarnation))),
		rec: &recorder{client: cfg.Client}, reg: &register{path: cfg.Register}}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	go func() {
		<-sigs
		c.stopping.Store(true)
	}()
	c.rec.add(Record{Kind: KindStart, Pid: os.Getpid(), At: now()})
	for !c.stopping.Load() {
		switch {
		case cfg.Prims && c.rng.IntN(2) == 0:
			c.hold(cfg.Semaphore, cfg.Limit, false)
		case cfg.Prims:
			c.hold(cfg.Election, 1, true)
		case c.rng.Float64() < cfg.RunShare:
			c.run()
		default:
			c.hold(pick(c.rng, c.cfg.Names), 1, false)
		}
		c.pause(0, 300*time.Millisecond)
	}
}

// nextOp names the next call.
func (c *client) nextOp() string {
	c.seq++
	return c.cfg.Client + "." + strconv.Itoa(c.cfg.Incarnation) + "." + strconv.Itoa(c.seq)
}

// pause sleeps a random time in [lo, hi): think time between actions.
func (c *client) pause(lo, hi time.Duration) {
	time.Sleep(lo + time.Duration(c.rng.Int64N(int64(hi-lo))))
}

// pick returns a random element.
func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// Ways a client lets go of a lease.
const (
	endRelease = iota
	endClose
	endExit
)

// hold acquires a lease (a semaphore's when limit is above 1; as an
// election's leader when elect), uses it for a while and lets it go. The
// holders of a semaphore write nothing to the fenced register: several
// hold it at once, each with its own token. A leader proclaims new values
// now and then, and lets go by resigning.
func (c *client) hold(name string, limit int, elect bool) {
	ttl := pick(c.rng, c.cfg.TTLs)
	wait := time.Duration(c.rng.Int64N(int64(c.cfg.MaxWait)))
	owner := ipc.OwnerConnection
	if c.rng.IntN(5) < 2 {
		owner = ipc.OwnerPID
	}
	end := endRelease
	switch r := c.rng.IntN(20); {
	case r < 5:
		end = endExit
	case r < 10 && owner == ipc.OwnerConnection:
		end = endClose
	}
	holdFor := time.Duration(c.rng.Int64N(int64(c.cfg.MaxHold)))

	cl := &ipc.Client{Socket: c.cfg.Socket}
	defer cl.Close()
	opts := ipc.AcquireOptions{TTL: ttl, Wait: wait, Owner: owner}
	if owner == ipc.OwnerPID {
		opts.OwnerPID = os.Getpid()
	}
	if limit > 1 {
		opts.Limit = limit
	}
	get := func() (string, *ipc.Lease) {
		if elect {
			return c.campaign(cl, name, opts)
		}
		return c.acquire(cl, name, opts)
	}
	op, lease := get()
	if lease == nil {
		return
	}
	defer c.recordEvents(cl, op)()
	fenced := limit <= 1
	proclaims := 0
	token, _ := strconv.ParseUint(lease.Token, 10, 64)
	until := now() + holdFor.Nanoseconds()
	for !c.stopping.Load() {
		if !lease.Valid() {
			c.rec.add(Record{Kind: KindGone, Op: op, Name: name, Token: token, Code: CodeDeadline, Err: reasonOf(lease), At: now()})
			c.giveUp(cl, op, name, token, owner)
			return
		}
		if fenced {
			c.reg.write(Write{Name: name, Holder: op, Token: token, Deadline: lease.Deadline(), Kind: "pre"})
		}
		dl, ok := c.check(cl, op, name, token)
		if !ok {
			c.giveUp(cl, op, name, token, owner)
			return
		}
		if fenced {
			c.reg.write(Write{Name: name, Holder: op, Token: token, Deadline: dl, Kind: "post"})
		}
		if now() > until {
			break
		}
		c.pause(20*time.Millisecond, 300*time.Millisecond)
		if elect && c.rng.IntN(3) == 0 {
			proclaims++
			c.proclaim(cl, op, lease, op+"/"+strconv.Itoa(proclaims))
		}
		if !elect && c.rng.IntN(25) == 0 {
			// The same owner asks again for what it holds (a leader's
			// elect again with another value is refused: not tried).
			op2, l2 := get()
			if l2 == nil {
				// It stops using the grant it had, and says so.
				c.rec.add(Record{Kind: KindGone, Op: op, Name: name, Token: token, Code: CodeReacquire, At: now()})
				c.giveUp(cl, op, name, token, owner)
				return
			}
			op, lease = op2, l2
			token, _ = strconv.ParseUint(lease.Token, 10, 64)
		}
	}
	if c.stopping.Load() {
		end = endRelease
	}
	switch {
	case end == endRelease && elect:
		c.resign(cl, op, lease)
	case end == endRelease:
		c.release(cl, op, name, token)
	case end == endClose:
		c.rec.add(Record{Kind: KindClose, Op: op, Name: name, Token: token, At: now()})
		cl.Close()
	case end == endExit:
		c.rec.add(Record{Kind: KindExit, Op: op, Name: name, Token: token, At: now()})
		os.Exit(0)
	}
}

// recordEvents records the events of its grants the holder reads on its
// own connection cl (op names the holder: any op of this incarnation),
// after its client applied them to the lease, until the returned func is
// called. An event the client drops (its channel full) is not recorded.
func (c *client) recordEvents(cl *ipc.Client, op string) (stop func()) {
	ch := make(chan *ipc.Event, 256)
	done := make(chan struct{})
	cl.Notify(ch)
	go func() {
		for {
			select {
			case <-done:
				return
			case ev := <-ch:
				switch ev.Event {
				case ipc.EventRenewed, ipc.EventShortened, ipc.EventLost, ipc.EventReleased:
				default:
					continue
				}
				token, err := strconv.ParseUint(ev.Token, 10, 64)
				if err != nil {
					continue
				}
				c.rec.add(Record{Kind: KindEvent, Op: op, Name: ev.Lease, Token: token, Code: ev.Event,
					Deadline: ev.DeadlineBoottimeNs, Err: ev.Reason, At: now()})
			}
		}
	}()
	return func() { close(done) }
}

// release records and makes a release of the grant.
func (c *client) release(cl *ipc.Client, op, name string, token uint64) {
	c.rec.add(Record{Kind: KindRelease, Op: op, Name: name, Token: token, At: now()})
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := cl.ReleaseToken(ctx, name, strconv.FormatUint(token, 10)); err != nil {
		c.rec.add(Record{Kind: KindReleaseFailed, Op: op, Name: name, Token: token, Code: code(err, ctx.Err() != nil), Err: err.Error(), At: now()})
		return
	}
	c.rec.add(Record{Kind: KindReleased, Op: op, Name: name, Token: token, At: now()})
}

// resign records and makes a resignation of the leader's grant (a
// release, for the checkers).
func (c *client) resign(cl *ipc.Client, op string, l *ipc.Lease) {
	token, _ := strconv.ParseUint(l.Token, 10, 64)
	c.rec.add(Record{Kind: KindRelease, Op: op, Name: l.Lease, Token: token, At: now()})
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := cl.Resign(ctx, l); err != nil {
		c.rec.add(Record{Kind: KindReleaseFailed, Op: op, Name: l.Lease, Token: token, Code: code(err, ctx.Err() != nil), Err: err.Error(), At: now()})
		return
	}
	c.rec.add(Record{Kind: KindReleased, Op: op, Name: l.Lease, Token: token, At: now()})
}

// proclaim records and makes a proclamation of a new value by the
// leader's grant.
func (c *client) proclaim(cl *ipc.Client, op string, l *ipc.Lease, value string) {
	token, _ := strconv.ParseUint(l.Token, 10, 64)
	c.rec.add(Record{Kind: KindProclaim, Op: op, Name: l.Lease, Token: token, Value: value, At: now()})
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := cl.Proclaim(ctx, l, value); err != nil {
		c.rec.add(Record{Kind: KindProclaimFailed, Op: op, Name: l.Lease, Token: token, Code: code(err, ctx.Err() != nil), Err: err.Error(), At: now()})
		return
	}
	c.rec.add(Record{Kind: KindProclaimed, Op: op, Name: l.Lease, Token: token, Value: value, At: now()})
}

// giveUp lets go of a grant the client found gone, as a careful user
// does: a lease bound to the process outlives the connection the client
// is about to close, and the daemon may still hold it (the client's own
// clock ran out first, or the check failed on the way), so it is
// released; one bound to the connection goes with the connection.
func (c *client) giveUp(cl *ipc.Client, op, name string, token uint64, owner string) {
	if owner == ipc.OwnerPID {
		c.release(cl, op, name, token)
	}
}

// acquire records and makes an acquire; it returns the grant's Op and
// lease, or a nil lease when it failed.
func (c *client) acquire(cl *ipc.Client, name string, opts ipc.AcquireOptions) (string, *ipc.Lease) {
	return c.get(name, opts, false, func(ctx context.Context, _ string) (*ipc.Lease, error) { return cl.Acquire(ctx, name, opts) })
}

// campaign records and makes an elect, the candidate's value its Op; it
// returns the grant's Op and lease, or a nil lease when it failed.
func (c *client) campaign(cl *ipc.Client, name string, opts ipc.AcquireOptions) (string, *ipc.Lease) {
	return c.get(name, opts, true, func(ctx context.Context, op string) (*ipc.Lease, error) { return cl.Campaign(ctx, name, op, opts) })
}

// get records and makes a call that acquires name (an acquire, or an
// elect whose value is the call's Op); it returns the grant's Op and
// lease, or a nil lease when it failed.
func (c *client) get(name string, opts ipc.AcquireOptions, elect bool, call func(ctx context.Context, op string) (*ipc.Lease, error)) (string, *ipc.Lease) {
	op := c.nextOp()
	value := ""
	if elect {
		value = op
	}
	c.rec.add(Record{Kind: KindAcquire, Op: op, Name: name, Owner: opts.Owner, TTLMs: opts.TTL.Milliseconds(), WaitMs: opts.Wait.Milliseconds(), Limit: opts.Limit, Value: value, At: now()})
	ctx, cancel := context.WithTimeout(context.Background(), opts.Wait+callTimeout)
	defer cancel()
	lease, err := call(ctx, op)
	at := now()
	if err != nil {
		r := Record{Kind: KindAcquireFailed, Op: op, Name: name, Code: code(err, ctx.Err() != nil), Err: err.Error(), At: at}
		if ie, ok := err.(*ipc.Error); ok && ie.HolderToken != "" {
			r.Holder, _ = strconv.ParseUint(ie.HolderToken, 10, 64)
		}
		c.rec.add(r)
		return op, nil
	}
	token, _ := strconv.ParseUint(lease.Token, 10, 64)
	c.rec.add(Record{Kind: KindAcquired, Op: op, Name: name, Token: token, Deadline: lease.Deadline(), Renewals: lease.Renewals, At: at})
	return op, lease
}

// check asks the daemon whether the grant is still valid; on a failure it
// records that the lease is gone.
func (c *client) check(cl *ipc.Client, op, name string, token uint64) (deadline int64, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	at := now()
	g, err := cl.Check(ctx, name, strconv.FormatUint(token, 10))
	r := Record{Kind: KindCheck, Op: op, Name: name, Token: token, At: at, End: now()}
	if err != nil {
		r.Code, r.Err = code(err, ctx.Err() != nil), err.Error()
		c.rec.add(r)
		c.rec.add(Record{Kind: KindGone, Op: op, Name: name, Token: token, Code: r.Code, At: r.End})
		return 0, false
	}
	r.Deadline = g.DeadlineBoottimeNs
	c.rec.add(r)
	return g.DeadlineBoottimeNs, true
}

// reasonOf says why the Go client ended a lease, if it did.
func reasonOf(l *ipc.Lease) string {
	select {
	case <-l.Done():
		return l.Reason()
	default:
		return "deadline passed"
	}
}

// register is a client of the fenced register, one connection per write.
type register struct{ path string }

// write sends w and waits for the register's answer. Failures are the
// test's own (the register lives in the test binary): they are ignored,
// the register records only what it received.
func (r *register) write(w Write) {
	conn, err := net.DialTimeout("unix", r.path, callTimeout)
	if err != nil {
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(callTimeout))
	b, _ := json.Marshal(w)
	if _, err := conn.Write(append(b, '\n')); err != nil {
		return
	}
	bufio.NewReader(conn).ReadString('\n')
}
