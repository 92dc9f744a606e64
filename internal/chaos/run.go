package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaseside/leaseside/internal/chaos/workload"
	"github.com/leaseside/leaseside/internal/netlab"
	"github.com/leaseside/leaseside/ipc"
)

// Config is the shape of a run.
type Config struct {
	// Seed makes the schedule and the clients' choices.
	Seed uint64 `json:"seed"`
	// Duration is how long the nemesis runs.
	Duration time.Duration `json:"duration"`
	// Grantors (3 or 5) and Sidecars (hosts, 2 to 4), and the clients on
	// each sidecar host.
	Grantors       int `json:"grantors"`
	Sidecars       int `json:"sidecars"`
	ClientsPerHost int `json:"clients_per_host"`
	// Names is how many lease names the clients contend for.
	Names int `json:"names"`
	// TTLs are the terms clients pick from; MaxWait and MaxHold bound
	// their waits and holds; RunShare is the share of acquisitions made
	// through `leaseside run`.
	TTLs     []time.Duration `json:"ttls"`
	MaxWait  time.Duration   `json:"max_wait"`
	MaxHold  time.Duration   `json:"max_hold"`
	RunShare float64         `json:"run_share"`
	// Kinds are the cluster faults to use (all when empty).
	Kinds []Kind `json:"kinds,omitempty"`
	// ClockStepMax bounds CLOCK_REALTIME steps; 0 makes none (the clock
	// is the whole machine's, other programs on it see the steps too).
	ClockStepMax time.Duration `json:"clock_step_max"`
	// Race builds leaseside with the race detector (a race report of a
	// grantor or sidecar is a violation).
	Race bool `json:"race"`
	// LinearTimeout bounds the linearizability check of each name.
	LinearTimeout time.Duration `json:"linear_timeout"`
	// PrimsPerHost is how many clients on each sidecar host take turns,
	// instead of on the names, on a semaphore of Limit holders (2 or 3,
	// from the seed, when 0) and on an election.
	PrimsPerHost int `json:"prims_per_host"`
	Limit        int `json:"limit,omitempty"`
	// Store keeps the fenced register in a real store that decides on
	// the tokens itself: "" (in memory, fence.Register) or StorePostgres.
	Store string `json:"store,omitempty"`
	// Out is the directory of the report, the picture and the logs.
	Out string `json:"-"`
}

// DefaultConfig is a run of 3 grantors and 2 sidecar hosts with 3
// clients each, on 3 names, with terms of 1 to 6 s: a term shorter than
// a leader election and terms longer than one.
func DefaultConfig() Config {
	return Config{
		Duration: time.Minute, Grantors: 3, Sidecars: 2, ClientsPerHost: 3, Names: 3,
		TTLs:    []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 6 * time.Second},
		MaxWait: 2 * time.Second, MaxHold: 4 * time.Second, RunShare: 0.15,
		ClockStepMax: 0, Race: true, LinearTimeout: 30 * time.Second, PrimsPerHost: 1,
	}
}

// Validate says what is wrong with a configuration.
func (c Config) Validate() error {
	switch {
	case c.Grantors != 3 && c.Grantors != 5:
		return fmt.Errorf("chaos: %d grantors; want 3 or 5", c.Grantors)
	case c.Sidecars < 2 || c.Sidecars > 4:
		return fmt.Errorf("chaos: %d sidecar hosts; want 2 to 4", c.Sidecars)
	case c.ClientsPerHost < 1 || c.Names < 1 || len(c.TTLs) == 0:
		return errors.New("chaos: no clients, names or terms")
	case c.Duration < 5*c.maxTTL():
		return fmt.Errorf("chaos: a run of %v is too short for terms of up to %v", c.Duration, c.maxTTL())
	case c.PrimsPerHost < 0 || c.Limit != 0 && (c.Limit < 2 || c.Limit > 256):
		return fmt.Errorf("chaos: %d prims clients a host, semaphore limit %d; want 0 or more, and 2 to 256", c.PrimsPerHost, c.Limit)
	case c.MaxWait <= 0 || c.MaxHold <= 0:
		return errors.New("chaos: MaxWait and MaxHold must be positive")
	case c.Store != "" && c.Store != StorePostgres:
		return fmt.Errorf("chaos: register store %q; want none or %q", c.Store, StorePostgres)
	}
	for _, k := range c.Kinds {
		if !slices.Contains(AllKinds(), k) {
			return fmt.Errorf("chaos: unknown fault kind %q", k)
		}
	}
	return nil
}

// names are the names of a run's exclusive leases.
func (c Config) names() []string {
	var ns []string
	for i := range c.Names {
		ns = append(ns, "chaos/"+string(rune('a'+i)))
	}
	return ns
}

// semaphore and election name the semaphore and the election of the
// prims clients ("" when there are none).
func (c Config) semaphore() string {
	if c.PrimsPerHost == 0 {
		return ""
	}
	return "chaos/sem"
}

func (c Config) election() string {
	if c.PrimsPerHost == 0 {
		return ""
	}
	return "chaos/leader"
}

// allNames are the names, the election and the semaphore.
func (c Config) allNames() []string {
	if c.PrimsPerHost == 0 {
		return c.names()
	}
	return append(c.names(), c.election(), c.semaphore())
}

// recoveryBound bounds the time without faults from a heal to the next
// grant of a name clients keep asking for: a holder's longest hold, a
// few of the longest terms (a lease its holder's sidecar lost waits its
// term out at the grantor, with margins) and a few elections, generously
// (a loaded machine of two cores).
func (c Config) recoveryBound() time.Duration {
	return c.MaxHold + 4*c.maxTTL() + 20*time.Second
}

// maxTTL is the longest term.
func (c Config) maxTTL() time.Duration { return slices.Max(c.TTLs) }

// replay is the command that runs this configuration again.
func (c Config) replay() string {
	s := fmt.Sprintf("go test ./internal/chaos -run 'TestChaos$' -count=1 -timeout 0 -chaos.seed %d -chaos.duration %v -chaos.grantors %d -chaos.sidecars %d",
		c.Seed, c.Duration, c.Grantors, c.Sidecars)
	if c.ClockStepMax > 0 {
		s += " -chaos.clockstep " + c.ClockStepMax.String()
	}
	if c.Store != "" {
		s += " -chaos.store " + c.Store
	}
	if len(c.Kinds) > 0 {
		var ks []string
		for _, k := range c.Kinds {
			ks = append(ks, string(k))
		}
		s += " -chaos.faults " + strings.Join(ks, ",")
	}
	return s
}

// probeSlack is added to the longest term to bound the final probes: the
// grantors' margins (d*rho + epsilon) and a sidecar's reaction to its
// owners' deaths, generously.
const probeSlack = 5 * time.Second

// run is one run of the suite.
type run struct {
	t     testing.TB
	cfg   Config
	lab   *netlab.Lab
	cl    *cluster
	cs    *clients
	rec   *recorder
	start int64
	logf  func(string, ...any)

	clockStep time.Duration // CLOCK_REALTIME steps made and not undone
}

// Run runs the suite once on real processes and returns its report; t
// fails (Errorf) on any violation, naming the seed and the first
// violation. The report, the timeline picture and every process's log
// are in cfg.Out (when empty, a new temporary directory, removed at the
// end of a run that did not fail).
func Run(t testing.TB, cfg Config) *Report {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.PrimsPerHost > 0 && cfg.Limit == 0 {
		cfg.Limit = 2 + int(cfg.Seed%2)
	}
	bins := buildBinaries(t, cfg.Race)
	if cfg.Out == "" {
		// A run of the test suite: its directory (every grantor's data,
		// raft's preallocated log segments among them, over 100 MB each)
		// goes at the end unless the run failed, when it is what to read.
		dir, err := os.MkdirTemp("", "leaseside-chaos-")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Out = dir
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("chaos: the run failed; its report, logs and data are kept in %s", dir)
				return
			}
			os.RemoveAll(dir)
		})
	}
	for _, d := range []string{cfg.Out, filepath.Join(cfg.Out, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sockDir, err := os.MkdirTemp("", "lsc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	t.Logf("chaos: seed %d, %v, %d grantors, %d sidecar hosts; output in %s", cfg.Seed, cfg.Duration, cfg.Grantors, cfg.Sidecars, cfg.Out)

	r := &run{t: t, cfg: cfg, rec: &recorder{}, logf: t.Logf}
	t.Cleanup(r.restoreClock)
	r.lab = netlab.New(t, cfg.Grantors+1+cfg.Sidecars)
	var store *pgStore
	if cfg.Store == StorePostgres {
		if store, err = openPGStore(t); err != nil {
			t.Fatal(err)
		}
		defer store.close()
	}
	reg, err := newRegister(filepath.Join(sockDir, "register.sock"), r.rec, store)
	if err != nil {
		t.Fatal(err)
	}
	r.cl, err = newCluster(r.lab, bins.leaseside, cfg.Out, sockDir, cfg.Grantors, cfg.Sidecars, r.rec, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.cl.stop)
	if err := r.cl.start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var watchers sync.WaitGroup
	r.cl.watch(ctx, &watchers)
	watchers.Add(1)
	go func() {
		defer watchers.Done()
		r.rec.sampleLoad(ctx)
	}()

	tmpl := workload.Config{Register: filepath.Join(sockDir, "register.sock"), Names: cfg.names(), TTLs: cfg.TTLs,
		MaxWait: cfg.MaxWait, MaxHold: cfg.MaxHold, Seed: cfg.Seed, Leaseside: bins.leaseside, Self: bins.client, RunShare: cfg.RunShare,
		Semaphore: cfg.semaphore(), Limit: cfg.Limit, Election: cfg.election()}
	r.cs, err = newClients(bins.client, filepath.Join(cfg.Out, "logs"), r.cl.sidecars, cfg.ClientsPerHost, cfg.PrimsPerHost, tmpl, r.rec)
	if err != nil {
		t.Fatal(err)
	}
	r.start = boottime()
	r.rec.mu.Lock()
	r.rec.h.Start = r.start
	r.rec.mu.Unlock()
	if err := r.cs.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.cs.stop)

	sched := plan(cfg.Seed, cfg.Duration, cfg.maxTTL(), cfg.Kinds)
	r.nemesis(sched)
	r.settle()
	r.rec.mu.Lock()
	r.rec.h.Stop = boottime()
	r.rec.mu.Unlock()
	r.cs.stop()
	r.rec.mu.Lock()
	r.rec.h.End = boottime()
	r.rec.mu.Unlock()
	r.probe()
	cancel()
	watchers.Wait()
	reg.close()
	if store != nil {
		st, err := store.readBack()
		if err != nil {
			t.Errorf("chaos: reading the register's writes back from %s: %v", cfg.Store, err)
		}
		r.rec.mu.Lock()
		r.rec.h.Store = st
		r.rec.mu.Unlock()
	}
	r.cl.stop()
	r.restoreClock()

	h := r.rec.snapshot()
	if err := h.write(filepath.Join(cfg.Out, "history.json")); err != nil {
		t.Error(err)
	}
	rep := Check(t, cfg, sched, h)
	return rep
}

// Check runs the checkers on a history, writes the report and the
// timeline picture into cfg.Out, logs the figures, and fails t (Errorf)
// on any violation, naming the seed and the first violation.
func Check(t testing.TB, cfg Config, sched Schedule, h *History) *Report {
	t.Helper()
	// With a store, what it holds decides which writes were accepted.
	ws, vs := fromStore(h)
	stored := *h
	stored.Writes = ws
	h = &stored
	gs := grants(h)
	var exclusive, sem []*Grant
	for _, g := range gs {
		if g.Name == cfg.semaphore() {
			sem = append(sem, g)
		} else {
			exclusive = append(exclusive, g)
		}
	}
	vs = append(vs, checkIntervals(exclusive)...)
	vs = append(vs, checkSemaphore(sem, cfg.Limit)...)
	vs = append(vs, checkRegister(h, gs)...)
	vs = append(vs, checkTokens(gs, h.Probes)...)
	lin, unknown := checkLinear(h, cfg.Out, cfg.LinearTimeout, cfg.semaphore())
	vs = append(vs, lin...)
	vs = append(vs, checkProbes(h, cfg.allNames(), cfg.maxTTL()+probeSlack)...)
	vs = append(vs, checkRecovery(h, gs, cfg.names(), cfg.recoveryBound())...)
	vs = append(vs, checkCrashes(h)...)
	vs = append(vs, checkQuorum(h, cfg.Grantors)...)
	vs = append(vs, checkT0(h)...)
	for i := range vs {
		vs[i].Faults = activeFaults(h, vs[i].At)
	}
	slices.SortStableFunc(vs, func(a, b Violation) int { return cmp.Compare(a.At, b.At) })

	rep := makeReport(cfg, sched, h, gs, vs, unknown)
	if err := rep.write(filepath.Join(cfg.Out, "report.json")); err != nil {
		t.Error(err)
	}
	if err := drawTimeline(filepath.Join(cfg.Out, "timeline.png"), cfg, h, gs, vs); err != nil {
		t.Error(err)
	}
	f := rep.Figures
	t.Logf("chaos: seed %d: %d grants (%.1f/s; %.1f/s under faults), %d writes (%d accepted, %d stale, %d late), %d faults; recovery after heal p50 %.0f ms, max %.0f ms (%d none before the end); load average %.1f (max %.1f); %d violations; report in %s",
		cfg.Seed, rep.Counts.Grants, f.GrantsPerSecond, f.GrantsPerSecFaults, rep.Counts.Writes, rep.Counts.Accepted, rep.Counts.Stale, rep.Counts.Late,
		len(h.Faults), f.RecoveryP50Ms, f.RecoveryMaxMs, f.NotRecovered, f.LoadAvgMean, f.LoadAvgMax, len(vs), cfg.Out)
	if len(unknown) > 0 {
		// Unchecked is not passed: a checker that ran out of time fails
		// the run as a violation would.
		t.Errorf("chaos: seed %d: linearizability of %v not decided within %v: the run is unchecked\nreplay: %s",
			cfg.Seed, unknown, cfg.LinearTimeout, cfg.replay())
	}
	if len(vs) > 0 {
		t.Errorf("chaos: seed %d: %d violations (%v); the first:\n%s\nreplay: %s\nreport: %s",
			cfg.Seed, len(vs), f.Violations, vs[0].Describe(h.Start), cfg.replay(), filepath.Join(cfg.Out, "report.json"))
	}
	return rep
}

// Recheck runs the checkers again on the history a run saved in dir
// (history.json, with its report.json for the configuration), writing a
// new report and picture there.
func Recheck(t testing.TB, dir string) *Report {
	t.Helper()
	var old Report
	if err := readJSON(filepath.Join(dir, "report.json"), &old); err != nil {
		t.Fatal(err)
	}
	var h History
	if err := readJSON(filepath.Join(dir, "history.json"), &h); err != nil {
		t.Fatal(err)
	}
	cfg := old.Config
	cfg.Out = dir
	return Check(t, cfg, old.Schedule, &h)
}

// nemesis runs the schedule: the client track on a goroutine, the
// cluster track here (netlab's faults belong on the test's goroutine).
func (r *run) nemesis(s Schedule) {
	end := time.Now().Add(r.cfg.Duration)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i, st := range s.Clients {
			select {
			case <-stop:
				return
			case <-time.After(time.Until(r.at(st.At))):
			}
			r.clientFault(i, st)
		}
	}()
	for i, st := range s.Cluster {
		time.Sleep(time.Until(r.at(st.At))) // the schedule's next instant
		if time.Until(end) < max(2*faultScale, r.cfg.maxTTL()) {
			r.logf("chaos: out of time; %d of %d cluster faults made", i, len(s.Cluster))
			break
		}
		r.logf("chaos: %s step %d: %s for %v", rel(boottime(), r.start), i, st.Kind, st.For)
		r.do(i, st)
	}
	time.Sleep(time.Until(end))
	close(stop)
	wg.Wait()
}

// at is the wall instant of an offset from the start of the run.
func (r *run) at(d time.Duration) time.Time {
	return time.Now().Add(time.Duration(r.start + int64(d) - boottime()))
}

// settle undoes whatever a fault left (it should have undone itself),
// waits for a leader, and lets the clients work a while longer.
func (r *run) settle() {
	r.lab.Heal()
	for _, g := range r.cl.grantors {
		if p := g.current(); p != nil {
			p.signal(syscall.SIGCONT)
			r.lab.Unlimit(p.pid())
		}
		if g.member && !g.running() {
			r.restartGrantor(g, 0)
		}
	}
	for _, s := range r.cl.sidecars {
		s.current().signal(syscall.SIGCONT)
	}
	r.restoreClock()
	if r.cl.waitLeader(0, readyTimeout) == nil {
		r.rec.productLine("grantors", "fatal error: no leader within "+readyTimeout.String()+" after the faults ended", boottime())
	}
	time.Sleep(2 * faultScale) // the clients' last stretch without faults
}

// probe acquires every name once the clients have stopped, all at once
// (one goroutine a name, from the sidecars in turn), and releases it.
func (r *run) probe() {
	bound := r.cfg.maxTTL() + probeSlack
	var wg sync.WaitGroup
	for i, name := range r.cfg.allNames() {
		s := r.cl.sidecars[i%len(r.cl.sidecars)]
		wg.Go(func() {
			cl := &ipc.Client{Socket: s.socket}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*bound)
			defer cancel()
			p := Probe{Name: name, Sidecar: s.name, Call: boottime()}
			opts := ipc.AcquireOptions{TTL: r.cfg.maxTTL(), Wait: 2 * bound}
			if name == r.cfg.semaphore() {
				opts.Limit = r.cfg.Limit
			}
			l, err := cl.Acquire(ctx, name, opts)
			p.Return = boottime()
			if err != nil {
				p.Err = err.Error()
			} else {
				p.Token, _ = strconv.ParseUint(l.Token, 10, 64)
				cl.ReleaseToken(ctx, name, l.Token)
			}
			r.rec.probe(p)
		})
	}
	wg.Wait()
}

// restoreClock undoes the CLOCK_REALTIME steps not undone yet.
func (r *run) restoreClock() {
	if r.clockStep != 0 {
		if err := r.stepClock(-r.clockStep); err != nil {
			r.t.Errorf("restoring CLOCK_REALTIME (%v off): %v", r.clockStep, err)
		}
	}
}

// binaries are the programs a run starts.
type binaries struct{ leaseside, client string }

var (
	buildMu  sync.Mutex
	built    = map[bool]binaries{}
	buildDir string
)

// buildBinaries builds leaseside (with the race detector when race) and
// the chaos client, once per test binary.
func buildBinaries(t testing.TB, race bool) binaries {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if b, ok := built[race]; ok {
		return b
	}
	if buildDir == "" {
		dir, err := os.MkdirTemp("", "leaseside-chaos-bin-")
		if err != nil {
			t.Fatal(err)
		}
		buildDir = dir
	}
	b := binaries{leaseside: filepath.Join(buildDir, "leaseside-race"+strconv.FormatBool(race)), client: filepath.Join(buildDir, "chaosclient")}
	args := []string{"build", "-o", b.leaseside}
	if race {
		args = append(args, "-race")
	}
	for _, c := range [][]string{
		append(args, "github.com/leaseside/leaseside/cmd/leaseside"),
		{"build", "-o", b.client, "github.com/leaseside/leaseside/internal/chaos/chaosclient"},
	} {
		if out, err := exec.Command("go", c...).CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	built[race] = b
	return b
}

// RemoveBinaries removes what buildBinaries built (TestMain calls it).
func RemoveBinaries() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}
