package chaos

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaseside/leaseside/internal/netlab"
)

// The nemesis at work: each step of the schedule made on the real
// processes and the lab's network, recorded as a Fault from the moment
// it hits to the moment it is undone.

// pause sleeps for the length of a fault: the fault is what happens
// meanwhile.
func pause(d time.Duration) { time.Sleep(d) }

// between returns a random duration in [lo, hi).
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

// memberGrantors lists the member grantors that run.
func (r *run) memberGrantors() []*grantor {
	var gs []*grantor
	for _, g := range r.cl.grantors {
		if g.member && g.running() {
			gs = append(gs, g)
		}
	}
	return gs
}

// pickGrantor picks the leader with probability leaderShare, else a
// random running member; it says whether the one picked leads.
func (r *run) pickGrantor(rng *rand.Rand, leaderShare float64) (*grantor, bool) {
	l := r.cl.leader()
	if l != nil && rng.Float64() < leaderShare {
		return l, true
	}
	gs := r.memberGrantors()
	if len(gs) == 0 {
		return nil, false
	}
	g := gs[rng.IntN(len(gs))]
	return g, g == l
}

// do makes step i of the cluster track, from start to undo.
func (r *run) do(i int, st Step) {
	rng := rand.New(rand.NewPCG(st.Seed, uint64(i)))
	f := Fault{Step: i, Kind: st.Kind, Start: boottime()}
	switch st.Kind {
	case Partition:
		hosts := rng.Perm(r.lab.Len())
		island := hosts[:1+rng.IntN(r.lab.Len()-1)]
		slices.Sort(island)
		f.Target = "hosts " + r.hostNames(island) + " | the rest"
		r.island(&f, island)
		r.network(f, st.For, func() { r.lab.Partition(island...) })
	case OneWay:
		var pairs [][2]int
		if l := r.cl.leader(); l != nil && rng.IntN(2) == 0 {
			out := rng.IntN(2) == 0
			for i := range r.lab.Len() {
				if i != l.hostIndex() {
					if out {
						pairs = append(pairs, [2]int{l.hostIndex(), i})
					} else {
						pairs = append(pairs, [2]int{i, l.hostIndex()})
					}
				}
			}
			f.Leader = true
			f.Target = "leader " + l.id + map[bool]string{true: " cannot send", false: " cannot hear"}[out]
		} else {
			for range 1 + rng.IntN(3) {
				a, b := rng.IntN(r.lab.Len()), rng.IntN(r.lab.Len()-1)
				if b >= a {
					b++
				}
				pairs = append(pairs, [2]int{a, b})
			}
			var ts []string
			for _, p := range pairs {
				ts = append(ts, r.hostName(p[0])+"->"+r.hostName(p[1]))
			}
			f.Target = "drop " + strings.Join(ts, ", ")
		}
		r.network(f, st.For, func() {
			for _, p := range pairs {
				r.lab.Block(p[0], p[1])
			}
		})
	case Split:
		members := r.memberGrantors()
		l := r.cl.leader()
		minority := (len(members) - 1) / 2
		if minority == 0 {
			r.skip(f, "fewer than three member grantors run")
			return
		}
		rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		if l != nil && rng.IntN(2) == 0 {
			// The leader on the minority side.
			k := slices.Index(members, l)
			members[0], members[k] = members[k], members[0]
			f.Leader = true
		} else if k := slices.Index(members, l); l != nil && k < minority {
			members[k], members[len(members)-1] = members[len(members)-1], members[k]
		}
		var side []int
		for _, g := range members[:minority] {
			side = append(side, g.hostIndex())
		}
		withLeader := rng.IntN(len(r.cl.sidecars)) // a cut-off leader keeps a sidecar that still asks it
		for i, s := range r.cl.sidecars {
			if rng.IntN(2) == 0 || f.Leader && i == withLeader {
				side = append(side, s.hostIndex())
			}
		}
		slices.Sort(side)
		f.Target = "minority " + r.hostNames(side)
		r.island(&f, side)
		r.network(f, st.For, func() { r.lab.Partition(side...) })
	case LeaderAlone:
		g, lead := r.pickGrantor(rng, 1)
		if g == nil {
			r.skip(f, "no grantor runs")
			return
		}
		f.Target, f.Leader = g.id, lead
		r.island(&f, []int{g.hostIndex()})
		r.network(f, st.For, func() { r.lab.Isolate(g.hostIndex()) })
	case SidecarAlone:
		s := r.cl.sidecars[rng.IntN(len(r.cl.sidecars))]
		f.Target = s.name
		r.island(&f, []int{s.hostIndex()})
		r.network(f, st.For, func() { r.lab.Isolate(s.hostIndex()) })
	case Flapping:
		r.flap(f, rng, st.For)
	case KillGrantor:
		g, lead := r.pickGrantor(rng, 2.0/3)
		if g == nil {
			r.skip(f, "no grantor runs")
			return
		}
		f.Target, f.Leader = g.id, lead
		i := r.rec.fault(f)
		r.killGrantor(g)
		pause(st.For)
		r.rec.endFault(i, boottime(), r.restartGrantor(g, 0))
	case TimeNamespace:
		g, lead := r.pickGrantor(rng, 0.5)
		if g == nil {
			r.skip(f, "no grantor runs")
			return
		}
		offset := time.Duration(1+rng.IntN(30*24)) * time.Hour
		if up := time.Duration(boottime()); rng.IntN(3) == 0 && up > 2*time.Minute {
			offset = -time.Duration(rng.Int64N(int64(up/2))).Truncate(time.Second) - time.Second
		}
		f.Target, f.Leader = g.id, lead
		f.Detail = "restarted with BOOTTIME " + offset.String() + " off the machine's"
		i := r.rec.fault(f)
		r.killGrantor(g)
		pause(st.For)
		r.rec.endFault(i, boottime(), r.restartGrantor(g, offset))
	case StopGrantor:
		g, lead := r.pickGrantor(rng, 2.0/3)
		if g == nil {
			r.skip(f, "no grantor runs")
			return
		}
		f.Target, f.Leader = g.id, lead
		f.Detail = "stopped " + st.For.Round(time.Millisecond).String()
		i := r.rec.fault(f)
		g.mu.Lock()
		g.stopped = true
		g.mu.Unlock()
		g.current().signal(syscall.SIGSTOP)
		pause(st.For)
		g.current().signal(syscall.SIGCONT)
		g.mu.Lock()
		g.stopped = false
		g.mu.Unlock()
		r.rec.endFault(i, boottime(), "")
	case KillSidecar:
		s := r.cl.sidecars[rng.IntN(len(r.cl.sidecars))]
		f.Target = s.name
		i := r.rec.fault(f)
		if err := s.kill(); err != nil {
			r.t.Fatal(err)
		}
		pause(st.For)
		detail := ""
		if err := r.cl.startSidecar(s); err != nil {
			detail = "restart failed: " + err.Error()
			r.rec.productLine("sidecar "+s.name, "fatal error: restart failed: "+err.Error(), boottime())
		}
		r.rec.endFault(i, boottime(), detail)
	case StopSidecar:
		s := r.cl.sidecars[rng.IntN(len(r.cl.sidecars))]
		f.Target = s.name
		i := r.rec.fault(f)
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
		s.current().signal(syscall.SIGSTOP)
		pause(st.For)
		s.current().signal(syscall.SIGCONT)
		s.mu.Lock()
		s.stopped = false
		s.mu.Unlock()
		r.rec.endFault(i, boottime(), "")
	case StallSidecar:
		s := r.cl.sidecars[rng.IntN(len(r.cl.sidecars))]
		f.Target = s.name
		i := r.rec.fault(f)
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
		stalls := 0
		for end := time.Now().Add(st.For); time.Now().Before(end); stalls++ {
			s.current().signal(syscall.SIGSTOP)
			pause(min(between(rng, 300*time.Millisecond, 2500*time.Millisecond), time.Until(end)))
			s.current().signal(syscall.SIGCONT)
			pause(between(rng, 20*time.Millisecond, 150*time.Millisecond))
		}
		s.mu.Lock()
		s.stopped = false
		s.mu.Unlock()
		r.rec.endFault(i, boottime(), strconv.Itoa(stalls)+" stalls")
	case StarveCPU:
		var pid int
		if rng.IntN(3) == 0 {
			// A sidecar host starved: its replies and renewals run late.
			s := r.cl.sidecars[rng.IntN(len(r.cl.sidecars))]
			f.Target, pid = s.name, s.current().pid()
		} else if g, lead := r.pickGrantor(rng, 0.5); g != nil {
			f.Target, f.Leader, pid = g.id, lead, g.current().pid()
		} else {
			r.skip(f, "no grantor runs")
			return
		}
		share := 0.02 + 0.08*rng.Float64()
		f.Detail = fmt.Sprintf("%.0f%% of a CPU", share*100)
		r.limited(f, st.For, pid, func(pid int) error { return r.lab.LimitCPU(pid, share) })
	case SlowDisk:
		g, lead := r.pickGrantor(rng, 0.5)
		if g == nil {
			r.skip(f, "no grantor runs")
			return
		}
		iops := 3 + rng.IntN(18)
		f.Target, f.Leader = g.id, lead
		f.Detail = fmt.Sprintf("%d writes/s to the disk of %s", iops, g.dataDir)
		r.limited(f, st.For, g.current().pid(), func(pid int) error { return r.lab.LimitDiskWrites(pid, g.dataDir, iops) })
	case ClockStep:
		if r.cfg.ClockStepMax <= 0 {
			r.skip(f, "CLOCK_REALTIME steps are off (-chaos.clockstep 0): the clock is the whole machine's")
			return
		}
		step := between(rng, time.Second, r.cfg.ClockStepMax)
		if rng.IntN(2) == 0 {
			step = -step
		}
		f.Target = "machine"
		f.Detail = "CLOCK_REALTIME stepped " + step.Round(time.Millisecond).String() + " and back"
		i := r.rec.fault(f)
		if err := r.stepClock(step); err != nil {
			r.rec.endFault(i, boottime(), "")
			r.skip(f, err.Error())
			return
		}
		pause(st.For)
		if err := r.stepClock(-step); err != nil {
			r.t.Fatalf("stepping CLOCK_REALTIME back: %v", err)
		}
		r.rec.endFault(i, boottime(), "")
	case Rolling:
		r.rolling(f, rng)
	case Membership:
		r.membership(f, rng)
	}
}

// limited makes a resource fault: limit (a cgroup limit on pid), held
// for d, then lifted; a limit this machine cannot make is skipped.
func (r *run) limited(f Fault, d time.Duration, pid int, limit func(pid int) error) {
	if err := limit(pid); err != nil {
		if !errors.Is(err, netlab.ErrNoLimit) {
			r.t.Fatalf("%s on %s: %v", f.Kind, f.Target, err)
		}
		r.skip(f, err.Error())
		return
	}
	i := r.rec.fault(f)
	pause(d)
	if err := r.lab.Unlimit(pid); err != nil {
		r.t.Fatalf("lifting the limits of %s: %v", f.Target, err)
	}
	r.rec.endFault(i, boottime(), "")
}

// network makes a network fault with cut, holds it for d, and heals.
func (r *run) network(f Fault, d time.Duration, cut func()) {
	i := r.rec.fault(f)
	cut()
	r.rec.setFault(i, func(f *Fault) { f.Cut = boottime() })
	pause(d)
	r.rec.setFault(i, func(f *Fault) { f.Heal = boottime() })
	r.lab.Heal()
	r.rec.endFault(i, boottime(), "")
}

// island notes on f the sides of a cut of the network in two: the hosts
// of island, and the rest.
func (r *run) island(f *Fault, island []int) {
	for i := range r.lab.Len() {
		if slices.Contains(island, i) {
			f.Island = append(f.Island, r.hostName(i))
		} else {
			f.Rest = append(f.Rest, r.hostName(i))
		}
	}
}

// flap cuts a group off and heals, again and again, for d.
func (r *run) flap(f Fault, rng *rand.Rand, d time.Duration) {
	var group []int
	if g, lead := r.pickGrantor(rng, 0.5); g != nil && lead {
		group, f.Target, f.Leader = []int{g.hostIndex()}, "leader "+g.id, true
	} else {
		hosts := rng.Perm(r.lab.Len())
		group = hosts[:1+rng.IntN(r.lab.Len()-1)]
		slices.Sort(group)
		f.Target = "hosts " + r.hostNames(group)
	}
	i := r.rec.fault(f)
	end := time.Now().Add(d)
	flips := 0
	for time.Now().Before(end) {
		r.lab.Partition(group...)
		pause(between(rng, 50*time.Millisecond, 700*time.Millisecond))
		r.lab.Heal()
		pause(between(rng, 50*time.Millisecond, 700*time.Millisecond))
		flips++
	}
	r.rec.endFault(i, boottime(), strconv.Itoa(flips)+" cuts")
}

// skip records a fault that could not be made, and why.
func (r *run) skip(f Fault, why string) {
	f.Skipped, f.End = why, f.Start
	r.rec.fault(f)
	r.logf("fault %d %s skipped: %s", f.Step, f.Kind, why)
}

// killGrantor kill -9s g.
func (r *run) killGrantor(g *grantor) {
	if err := g.current().kill(); err != nil {
		r.t.Fatal(err)
	}
}

// restartGrantor starts g again (in a time namespace clocks off the
// machine's, when not 0) and waits until it is ready; it returns what
// went wrong, for the fault's detail (a grantor that does not come back
// is also a crash).
func (r *run) restartGrantor(g *grantor, clocks time.Duration) string {
	bootstrap := 0
	if g.member {
		bootstrap = r.cl.members()
	}
	if err := r.cl.startGrantor(g, bootstrap, clocks); err != nil {
		r.t.Fatal(err)
	}
	if err := g.waitReady(readyTimeout); err != nil {
		r.rec.productLine("grantor "+g.id, "fatal error: restart failed: "+firstLine(err.Error()), boottime())
		if clocks != 0 && !g.running() {
			// Try once more on the machine's clock, so that the run goes on
			// with the grantor.
			return "restart failed: " + err.Error() + "; " + r.restartGrantor(g, 0)
		}
		return "restart failed: " + err.Error()
	}
	return ""
}

// rolling restarts every member grantor, one at a time.
func (r *run) rolling(f Fault, rng *rand.Rand) {
	members := r.memberGrantors()
	rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	var ids []string
	for _, g := range members {
		ids = append(ids, g.id)
	}
	f.Target = strings.Join(ids, ", ")
	i := r.rec.fault(f)
	var how []string
	for _, g := range members {
		if rng.IntN(2) == 0 {
			how = append(how, g.id+" SIGTERM")
			r.term(g)
		} else {
			how = append(how, g.id+" kill -9")
			r.killGrantor(g)
		}
		if d := r.restartGrantor(g, 0); d != "" {
			how = append(how, d)
			continue
		}
		// A leader before the next one goes.
		if r.cl.waitLeader(0, readyTimeout/2) == nil {
			how = append(how, "no leader within "+(readyTimeout/2).String())
		}
	}
	r.rec.endFault(i, boottime(), strings.Join(how, ", "))
}

// term sends g SIGTERM (it stops, handing leadership over, and stays a
// voter) and waits for it to exit, killing it if it does not.
func (r *run) term(g *grantor) {
	p := g.current()
	p.expected.Store(true)
	p.signal(syscall.SIGTERM)
	if p.wait(readyTimeout) != nil {
		r.killGrantor(g)
	}
}

// membership adds the spare grantor, waits until it is a voter, and
// removes another member: gracefully (`leaseside grantor leave`, after
// which it exits), or by kill -9 and `leaseside members remove`. The one
// removed is the next spare.
func (r *run) membership(f Fault, rng *rand.Rand) {
	var spare *grantor
	for _, g := range r.cl.grantors {
		if !g.member {
			spare = g
		}
	}
	var how []string
	since := boottime()
	f.Target = "add " + spare.id
	i := r.rec.fault(f)
	spare.member = true
	if d := r.restartGrantor(spare, 0); d != "" {
		how = append(how, d)
	} else if !r.cl.waitPromoted(spare.id, since, readyTimeout/2) {
		how = append(how, spare.id+" not promoted to voter within "+(readyTimeout/2).String())
	}
	var others []*grantor
	for _, g := range r.memberGrantors() {
		if g != spare {
			others = append(others, g)
		}
	}
	victim := others[rng.IntN(len(others))]
	if victim == r.cl.leader() {
		how = append(how, "removing the leader")
	}
	if rng.IntN(2) == 0 {
		how = append(how, "remove "+victim.id+" by grantor leave")
		victim.current().expected.Store(true)
		args := append([]string{"grantor", "leave"}, r.cl.leaveArgs(victim)...)
		if out, err := r.cl.command(victim.host, args...); err != nil {
			how = append(how, "grantor leave failed: "+err.Error()+": "+firstLine(out))
		}
		if victim.current().wait(readyTimeout) != nil {
			how = append(how, victim.id+" still runs after leaving; killed")
			r.killGrantor(victim)
		}
	} else {
		r.killGrantor(victim)
		// At once, or once gossip no longer calls it alive, as a careful
		// operator does: a removed grantor must stay out either way.
		if rng.IntN(2) == 0 {
			how = append(how, "removed at once")
		} else if !r.cl.waitGossipGone(victim.id, readyTimeout) {
			how = append(how, victim.id+" still alive in gossip after "+readyTimeout.String())
		}
		// Until a leader answers (the victim may have led), for a while.
		var out string
		var err error
		for deadline := time.Now().Add(readyTimeout); ; {
			args := append([]string{"members", "remove", victim.id}, r.cl.operatorArgs(r.cl.rpcAddrs())...)
			if out, err = r.cl.command(r.cl.sidecars[0].host, args...); err == nil || time.Now().After(deadline) {
				break
			}
			pause(time.Second)
		}
		how = append(how, "remove "+victim.id+" by kill -9 and members remove")
		if err != nil {
			how = append(how, "members remove failed: "+err.Error()+": "+firstLine(out))
		}
	}
	victim.member = false
	r.rec.endFault(i, boottime(), strings.Join(how, "; "))
}

// clientFault makes a step of the client track.
func (r *run) clientFault(i int, st Step) {
	rng := rand.New(rand.NewPCG(st.Seed, uint64(i)))
	c := r.cs.list[rng.IntN(len(r.cs.list))]
	f := Fault{Step: i, Kind: st.Kind, Start: boottime()}
	if st.Kind == KillClient {
		f.Target, f.End = c.name, f.Start // a moment: the client is restarted
		r.rec.fault(f)
		c.current().signal(syscall.SIGKILL)
		return
	}
	// Stop a client, or the command of a run now using a lease.
	if kids := r.rec.childPids(); len(kids) > 0 && rng.IntN(3) == 0 {
		pid := kids[rng.IntN(len(kids))]
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			return // it ended meanwhile
		}
		defer unix.Close(fd)
		if !isRunChild(pid) {
			return // it ended, and the pid is another process's now
		}
		f.Target = "run command pid " + strconv.Itoa(pid)
		j := r.rec.fault(f)
		unix.PidfdSendSignal(fd, unix.SIGSTOP, nil, 0)
		pause(st.For)
		unix.PidfdSendSignal(fd, unix.SIGCONT, nil, 0)
		r.rec.endFault(j, boottime(), "")
		return
	}
	f.Target = c.name
	j := r.rec.fault(f)
	p := c.current()
	p.signal(syscall.SIGSTOP)
	pause(st.For)
	p.signal(syscall.SIGCONT)
	r.rec.endFault(j, boottime(), "")
}

// isRunChild reports whether pid is the command of a client's run (its
// environment says so). The caller holds a pidfd of pid, so a yes stays
// true of the process that fd names.
func isRunChild(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	return err == nil && strings.Contains(string(b), "CHAOS_RUN_OP=")
}

// stepClock steps CLOCK_REALTIME by d.
func (r *run) stepClock(d time.Duration) error {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_REALTIME, &ts); err != nil {
		return err
	}
	ts = unix.NsecToTimespec(ts.Nano() + int64(d))
	if err := unix.ClockSettime(unix.CLOCK_REALTIME, &ts); err != nil {
		return fmt.Errorf("stepping CLOCK_REALTIME: %w", err)
	}
	r.clockStep += d
	return nil
}

// hostName names lab host i by what runs there.
func (r *run) hostName(i int) string {
	for _, g := range r.cl.grantors {
		if g.hostIndex() == i {
			return g.id
		}
	}
	for _, s := range r.cl.sidecars {
		if s.hostIndex() == i {
			return s.name
		}
	}
	return "host" + strconv.Itoa(i)
}

func (r *run) hostNames(is []int) string {
	var ns []string
	for _, i := range is {
		ns = append(ns, r.hostName(i))
	}
	return strings.Join(ns, ",")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
