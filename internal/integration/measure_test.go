package integration

import (
	"context"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/ipc"
)

// Measurements behind docs/operations.md's "Choosing a term" and "Raft timeouts
// under load" figures. They are not part of `make test` (they take
// minutes and their figures depend on the machine); run them with:
//
//	go test ./internal/integration -run TestMeasureFailoverByTerm -v -timeout 60m -args -measure.failover
//	go test ./internal/integration -run TestMeasureUnderLoad -v -timeout 60m -args -measure.load
//
// Both take -measure.raft to pass raft timeouts to the grantors (for
// example -measure.raft=--raft-heartbeat-timeout=1s,--raft-election-timeout=1s).
var (
	measureFailover = flag.Bool("measure.failover", false, "run TestMeasureFailoverByTerm")
	measureLoad     = flag.Bool("measure.load", false, "run TestMeasureUnderLoad")
	measureTerms    = flag.String("measure.terms", "3s,6s,15s,30s", "lease terms to measure failover for")
	measureKills    = flag.Int("measure.kills", 6, "leader kills per term (failover) or per load level (load)")
	measureHogs     = flag.String("measure.hogs", "0,4,8,12,16", "CPU hogs (yes > /dev/null) per load level")
	measureFOHogs   = flag.Int("measure.failover.hogs", 0, "CPU hogs running during TestMeasureFailoverByTerm")
	measureWindow   = flag.Duration("measure.window", time.Minute, "how long each load level runs")
	measureTerm     = flag.Duration("measure.term", 6*time.Second, "the lease term of TestMeasureUnderLoad")
	measureRaft     = flag.String("measure.raft", "", "comma-separated extra grantor flags (raft timeouts); TestMeasureUnderLoad takes several sets separated by ; and interleaves them")
)

// measureLeases is how many leases the measured sidecar holds.
const measureLeases = 3

// measureCluster starts three grantors with -measure.raft's flags and a
// sidecar that holds measureLeases leases of the given term for Go
// clients.
func measureCluster(t *testing.T, term time.Duration, raftFlags string) (*cluster, *sidecar, []*ipc.Lease) {
	t.Helper()
	c := newLoopbackCluster(t, 3)
	if raftFlags != "" {
		for _, n := range c.nodes {
			n.extra = strings.Split(raftFlags, ",")
		}
	}
	c.startAll()
	c.waitOffice(c.marks0())
	s := startSidecar(t, "sidecar", nil, "--grantors", c.rpcAddrs())
	var leases []*ipc.Lease
	for i := range measureLeases {
		l, err := s.client(t).Acquire(tctx(t), fmt.Sprintf("jobs/measure-%d", i), ipc.AcquireOptions{TTL: term})
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
		leases = append(leases, l)
	}
	return c, s, leases
}

// failover is what one leader kill did to the holders.
type failover struct {
	office  time.Duration // kill to the new leader in office
	renewed time.Duration // kill to the last of the leases' first renewals
	margin  time.Duration // least time left before a holder's deadline at that renewal
	lost    int           // leases lost
}

// killLeader kills the leader at a random phase of the renewal cycle,
// measures the failover, restarts the killed grantor and waits until it
// follows and every lease was renewed (or lost and acquired again).
func killLeader(t *testing.T, c *cluster, s *sidecar, leases []*ipc.Lease, term time.Duration) failover {
	t.Helper()
	phase := time.NewTimer(time.Duration(mrand.Int64N(int64(term / 3))))
	<-phase.C
	leader := c.currentLeader()
	marks := c.marks()
	ev := s.events.mark()
	deadlines := map[string]clockwatch.Instant{}
	for _, l := range leases {
		deadlines[l.Lease] = s.lastDeadline(l.Lease, l.Token, l.Deadline())
	}
	for i, l := range leases {
		if !l.Valid() { // lost outside a kill: a starved sidecar or grantor
			nl, err := s.client(t).Acquire(tctx(t), l.Lease, ipc.AcquireOptions{TTL: term, Wait: 3 * term})
			if err != nil {
				t.Fatalf("acquiring %s again: %v", l.Lease, err)
			}
			leases[i] = nl
			deadlines[l.Lease] = clockwatch.Instant(nl.Deadline())
		}
	}
	killed := c.kill(leader.node)
	next := c.waitOffice(marks, c.others(leader.node)...)
	f := failover{office: next.seen.Sub(killed), margin: term}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+term)
	defer cancel()
	for i, l := range leases {
		_, e, err := s.events.wait(ctx, ev, func(e *ipc.Event) bool {
			return e.Lease == l.Lease && (e.Event == ipc.EventRenewed || e.Event == ipc.EventLost)
		})
		if err != nil {
			t.Fatalf("%s: neither renewed nor lost after the kill: %v", l.Lease, err)
		}
		if e.v.Event == ipc.EventLost {
			f.lost++
			nl, err := s.client(t).Acquire(tctx(t), l.Lease, ipc.AcquireOptions{TTL: term, Wait: 3 * term})
			if err != nil {
				t.Fatalf("acquiring %s again: %v", l.Lease, err)
			}
			leases[i] = nl
			continue
		}
		f.renewed = max(f.renewed, e.at.Sub(killed))
		f.margin = min(f.margin, deadlines[l.Lease].Sub(e.at))
	}
	c.start(leader.node)
	c.waitReady(leader.node)
	c.nodes[leader.node].proc.waitLine(t, 0, "grantor: leader is")
	return f
}

// TestMeasureFailoverByTerm kills the leader -measure.kills times for
// each lease term of -measure.terms, each kill at a random phase of the
// renewal cycle, and reports per term the time to a new leader in
// office, the time until every holder renewed through it, the least
// margin left before a holder's deadline, and the leases lost. Not
// parallel, as no measurement is.
func TestMeasureFailoverByTerm(t *testing.T) {
	if !*measureFailover {
		t.Skip("a measurement: run with -args -measure.failover")
	}
	var rows []string
	for _, ts := range strings.Split(*measureTerms, ",") {
		term, err := time.ParseDuration(ts)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(ts, func(t *testing.T) {
			c, s, leases := measureCluster(t, term, *measureRaft)
			startHogs(t, *measureFOHogs)
			var fs []failover
			for range *measureKills {
				f := killLeader(t, c, s, leases, term)
				t.Logf("term %s: office %s, renewed %s, margin %s, lost %d", term, ms(f.office), ms(f.renewed), ms(f.margin), f.lost)
				fs = append(fs, f)
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %d of %d | %s |", term,
				spread(fs, func(f failover) time.Duration { return f.office }),
				spread(fs, func(f failover) time.Duration { return f.renewed }),
				ms(slices.MinFunc(fs, func(a, b failover) int { return int(a.margin - b.margin) }).margin),
				sum(fs, func(f failover) int { return f.lost }), len(fs)*measureLeases, loadAvg()))
		})
	}
	t.Logf("raft flags %q, %d CPU hogs\n| term | kill to new leader in office (median, max) | kill to every holder renewed (median, max) | least margin left | leases lost | load average |\n| --- | --- | --- | --- | --- | --- |\n%s",
		*measureRaft, *measureFOHogs, strings.Join(rows, "\n"))
}

// TestMeasureUnderLoad runs, for each number of CPU hogs of
// -measure.hogs, three grantors and a sidecar holding leases of
// -measure.term for -measure.window, killing the leader -measure.kills
// times in it, and reports the leader changes per minute besides the
// kills, the leases lost, and the load average. Not parallel, as no
// measurement is.
func TestMeasureUnderLoad(t *testing.T) {
	if !*measureLoad {
		t.Skip("a measurement: run with -args -measure.load")
	}
	term := *measureTerm
	var rows []string
	for _, hs := range strings.Split(*measureHogs, ",") {
		var hogs int
		if _, err := fmt.Sscan(hs, &hogs); err != nil {
			t.Fatal(err)
		}
		for _, raftFlags := range strings.Split(*measureRaft, ";") {
			t.Run(fmt.Sprintf("%d hogs %s", hogs, raftFlags), func(t *testing.T) {
				rows = append(rows, measureLoadLevel(t, hogs, term, raftFlags))
			})
		}
	}
	t.Logf("term %s\n| raft flags | CPU hogs | load average (1 min) | leader changes per minute besides the kills | step-downs (lost quorum) | kill to every holder renewed (median, max) | leases lost |\n| --- | --- | --- | --- | --- | --- | --- |\n%s",
		term, strings.Join(rows, "\n"))
}

// measureLoadLevel runs one level of TestMeasureUnderLoad and returns its
// table row.
func measureLoadLevel(t *testing.T, hogs int, term time.Duration, raftFlags string) string {
	c, s, leases := measureCluster(t, term, raftFlags)
	startHogs(t, hogs)
	began := boottime()
	procs := func() []*process {
		var ps []*process
		for _, n := range c.nodes {
			ps = append(ps, n.proc)
		}
		return ps
	}
	seen := procs() // every grantor process of the window
	var fs []failover
	gap := *measureWindow / time.Duration(*measureKills+1)
	for range *measureKills {
		wait := time.NewTimer(gap)
		<-wait.C
		fs = append(fs, killLeader(t, c, s, leases, term))
		seen = append(seen, procs()...)
	}
	if rest := *measureWindow - boottime().Sub(began); rest > 0 {
		wait := time.NewTimer(rest)
		<-wait.C
	}
	window := boottime().Sub(began)
	load := loadAvg()
	slices.SortFunc(seen, func(a, b *process) int { return a.pid() - b.pid() })
	seen = slices.Compact(seen)
	offices, stepDowns := 0, 0
	for _, p := range seen {
		for _, l := range p.out.all() {
			if l.at.Before(began) {
				continue
			}
			if strings.Contains(l.v, "grantor: took office") {
				offices++
			}
			if strings.Contains(l.v, "failed to contact quorum of nodes, stepping down") {
				stepDowns++
			}
		}
	}
	changes := offices - len(fs) // each kill makes one change
	lost := 0
	for _, e := range s.lost() {
		if e.at.After(began) {
			lost++
		}
	}
	t.Logf("%d hogs, raft %q: %d leader changes besides %d kills in %s (%.1f/min), %d step-downs, %d leases lost, load %s",
		hogs, raftFlags, changes, len(fs), window.Round(time.Second), float64(changes)/window.Minutes(), stepDowns, lost, load)
	return fmt.Sprintf("| %s | %d | %s | %.1f | %d | %s | %d |", raftFlags, hogs, load, float64(changes)/window.Minutes(), stepDowns,
		spread(fs, func(f failover) time.Duration { return f.renewed }), lost)
}

// startHogs starts n `yes > /dev/null` processes, killed at cleanup.
func startHogs(t *testing.T, n int) {
	t.Helper()
	for range n {
		cmd := exec.Command("yes") // stdout nil: /dev/null
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
		})
	}
}

// loadAvg is the 1-minute load average.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// spread renders the median and the maximum of a measure.
func spread(fs []failover, of func(failover) time.Duration) string {
	var ds []time.Duration
	for _, f := range fs {
		if d := of(f); d > 0 {
			ds = append(ds, d)
		}
	}
	if len(ds) == 0 {
		return "-"
	}
	slices.Sort(ds)
	return ms(ds[len(ds)/2]) + ", " + ms(ds[len(ds)-1])
}

func sum(fs []failover, of func(failover) int) int {
	n := 0
	for _, f := range fs {
		n += of(f)
	}
	return n
}
