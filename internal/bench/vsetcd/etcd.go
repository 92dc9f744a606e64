package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leaseside/leaseside/internal/bench"
)

// The etcd workloads, named as `leaseside bench`'s counterparts are where
// they are the same.
const (
	wLocks      = "locks"      // leaseside: grants
	wHandoffs   = "handoffs"   // leaseside: handoffs
	wKeepAlives = "keepalives" // leaseside: keepalives
	wMemory     = "memory"     // leaseside: memory
)

// etcdConfig sizes the etcd workloads; the defaults match `leaseside
// bench`'s, except Leases (vs-etcd.sh's 100,000).
type etcdConfig struct {
	endpoints []string
	pids      []int // of the members, in the order of endpoints; 0: unknown
	workload  string
	clients   int // etcd clients (each one gRPC connection) to the leader

	duration, warmup time.Duration
	owners           int           // locks: owners, each on its own name
	contenders       int           // handoffs: owners on one name
	hold             time.Duration // handoffs: how long each holds the lock
	sessions         int           // keepalives: leases, each renewed on its own stream
	inFlight         int           // keepalives: messages in flight per stream
	leases           int           // memory: locks held
	memSessions      int           // memory: sessions (etcd leases) the locks are spread over
	concurrency      int           // keepalives, memory: setups and cleanups at once
	settle           time.Duration // memory: longest wait for a leader GC before a reading
	ttl              time.Duration // of every etcd lease the workloads take
}

func runEtcd(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("etcd")
	c := etcdConfig{}
	endpoints := fs.String("endpoints", "", "the members' client URLs, comma-separated (required)")
	pids := fs.String("pids", "", "the members' pids, in the order of --endpoints: the leader's CPU and memory are read from /proc")
	fs.StringVar(&c.workload, "workload", "", "locks, handoffs, keepalives or memory (required)")
	fs.IntVar(&c.clients, "clients", 8, "etcd clients (one gRPC connection each) to the leader")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long timed workloads are measured")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "how long timed workloads run before they are measured")
	fs.IntVar(&c.owners, "owners", 64, "locks: owners, each in its own session on its own name")
	fs.IntVar(&c.contenders, "contenders", 16, "handoffs: owners, each in its own session, contending for one name")
	fs.DurationVar(&c.hold, "hold", 0, "handoffs: how long each owner holds the lock")
	fs.IntVar(&c.sessions, "sessions", 1000, "keepalives: leases, each renewed on its own LeaseKeepAlive stream")
	fs.IntVar(&c.inFlight, "in-flight", 1, "keepalives: keepalive requests in flight per stream")
	fs.IntVar(&c.leases, "leases", 100000, "memory: locks held (concurrency.Mutex, one key each)")
	fs.IntVar(&c.memSessions, "mem-sessions", 1000, "memory: sessions (etcd leases) the locks are spread over")
	fs.IntVar(&c.concurrency, "concurrency", 256, "keepalives, memory: sessions set up or closed at once")
	fs.DurationVar(&c.settle, "settle", 150*time.Second, "memory: longest wait for a leader GC before each reading")
	fs.DurationVar(&c.ttl, "ttl", time.Hour, "the term of every etcd lease the workloads take")
	if err := parse(fs, args, false); err != nil {
		return err
	}
	var err error
	if c.endpoints, c.pids, err = parseMembers(*endpoints, *pids); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	f := map[string]func(*etcdBench, context.Context) (*bench.Result, error){
		wLocks:      (*etcdBench).locks,
		wHandoffs:   (*etcdBench).handoffs,
		wKeepAlives: (*etcdBench).keepAlives,
		wMemory:     (*etcdBench).memory,
	}[c.workload]
	if f == nil {
		return fmt.Errorf("%w: unknown workload %q (locks, handoffs, keepalives, memory)", errUsage, c.workload)
	}
	b, err := dialEtcd(ctx, c)
	if err != nil {
		return err
	}
	defer b.close()
	rep := &bench.Report{Grantors: c.endpoints, Leader: b.leader, Started: time.Now()}
	t0 := time.Now()
	res, err := f(b, ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", c.workload, err)
	}
	res.Workload = c.workload
	res.Elapsed = time.Since(t0)
	res.Note(fmt.Sprintf("etcd at %s (the leader), %d clients", b.leader, c.clients))
	rep.Results = append(rep.Results, res)
	return printReport(stdout, rep)
}

// parseMembers reads --endpoints and --pids.
func parseMembers(endpoints, pids string) ([]string, []int, error) {
	if endpoints == "" {
		return nil, nil, fmt.Errorf("%w: --endpoints is required", errUsage)
	}
	eps := strings.Split(endpoints, ",")
	ps := make([]int, len(eps))
	if pids != "" {
		fields := strings.Split(pids, ",")
		if len(fields) != len(eps) {
			return nil, nil, fmt.Errorf("%w: %d pids for %d endpoints", errUsage, len(fields), len(eps))
		}
		for i, f := range fields {
			p, err := strconv.Atoi(f)
			if err != nil || p <= 0 {
				return nil, nil, fmt.Errorf("%w: pid %q", errUsage, f)
			}
			ps[i] = p
		}
	}
	return eps, ps, nil
}

func (c etcdConfig) validate() error {
	switch {
	case c.clients < 1, c.owners < 1, c.contenders < 2, c.sessions < 1, c.inFlight < 1, c.concurrency < 1:
		return fmt.Errorf("%w: clients, owners, sessions, in-flight and concurrency must be at least 1, contenders at least 2", errUsage)
	case c.leases < 1, c.memSessions < 1, c.memSessions > c.leases:
		return fmt.Errorf("%w: memory needs 1.. locks over 1..locks sessions, have %d over %d", errUsage, c.leases, c.memSessions)
	case c.duration <= 0, c.warmup < 0, c.hold < 0, c.settle < 0:
		return fmt.Errorf("%w: durations must not be negative, --duration positive", errUsage)
	case c.ttl < time.Second:
		return fmt.Errorf("%w: --ttl %v is below 1s", errUsage, c.ttl)
	}
	return nil
}

// etcdBench is a connection to an etcd cluster's leader: clients, each
// one gRPC connection to it (the leaseside bench, too, talks to the leader
// alone, so neither pays for a follower's forwarding).
type etcdBench struct {
	cfg       etcdConfig
	run       string // keeps this run's keys apart from earlier runs'
	leader    string
	leaderPID int
	clients   []*clientv3.Client
}

// dialEtcd finds the leader among cfg.endpoints and opens cfg.clients
// clients to it.
func dialEtcd(ctx context.Context, cfg etcdConfig) (*etcdBench, error) {
	i, err := findLeader(ctx, cfg.endpoints)
	if err != nil {
		return nil, err
	}
	var r [4]byte
	if _, err := rand.Read(r[:]); err != nil {
		return nil, err
	}
	b := &etcdBench{cfg: cfg, run: hex.EncodeToString(r[:]), leader: cfg.endpoints[i], leaderPID: cfg.pids[i]}
	for range cfg.clients {
		cli, err := newClient(b.leader)
		if err != nil {
			b.close()
			return nil, err
		}
		b.clients = append(b.clients, cli)
	}
	return b, nil
}

func newClient(endpoints ...string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
}

// findLeader returns the index of the endpoint whose member leads.
func findLeader(ctx context.Context, endpoints []string) (int, error) {
	cli, err := newClient(endpoints...)
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	for i, ep := range endpoints {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := cli.Status(sctx, ep)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("etcd %s: %w", ep, err)
		}
		if st.Header.MemberId == st.Leader {
			return i, nil
		}
	}
	return 0, fmt.Errorf("etcd: no leader among %v", endpoints)
}

func (b *etcdBench) close() {
	for _, c := range b.clients {
		c.Close()
	}
}

// client returns the client for owner or session i.
func (b *etcdBench) client(i int) *clientv3.Client {
	return b.clients[i%len(b.clients)]
}

// progress tells a human watching how a long setup goes.
func (b *etcdBench) progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "vsetcd: "+format+"\n", args...)
}

// leaderNote names the leader's pid in notes, or says it is unknown.
func (b *etcdBench) leaderNote() string {
	if b.leaderPID == 0 {
		return "leader pid unknown: no leader CPU"
	}
	return fmt.Sprintf("leader pid %d", b.leaderPID)
}
