package chaos

import (
	"math/rand/v2"
	"slices"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The faults of the nemesis. Those on the cluster run one after another
// (with quiet gaps); those on clients run beside them, on a track of
// their own.
const (
	// Partition splits the hosts (grantors, spare, sidecars) in two at
	// random, both ways.
	Partition Kind = "partition"
	// OneWay drops the packets of one to three random host pairs in one
	// direction only, or of the leader to (or from) everyone.
	OneWay Kind = "one-way"
	// Split cuts the member grantors into a majority and a minority, the
	// leader on either side, each sidecar on a random one (a leader on
	// the minority side keeps at least one sidecar that still asks it).
	Split Kind = "majority-minority"
	// LeaderAlone cuts the leader off from every other host.
	LeaderAlone Kind = "leader-alone"
	// SidecarAlone cuts a sidecar host off from every other host.
	SidecarAlone Kind = "sidecar-alone"
	// Flapping cuts the leader (or a random group) off and heals, again
	// and again, every few hundred milliseconds.
	Flapping Kind = "flapping"
	// KillGrantor kill -9s a grantor (the leader more often) and restarts
	// it after a while.
	KillGrantor Kind = "kill-grantor"
	// StopGrantor SIGSTOPs a grantor (the leader more often), for up to
	// the longest term and more, then SIGCONTs it.
	StopGrantor Kind = "stop-grantor"
	// KillSidecar kill -9s a sidecar and restarts it.
	KillSidecar Kind = "kill-sidecar"
	// StopSidecar SIGSTOPs a sidecar, then SIGCONTs it.
	StopSidecar Kind = "stop-sidecar"
	// StallSidecar stops and continues a sidecar again and again, stopped
	// for up to two and a half seconds at a time and running for a moment in
	// between (an overloaded host, long pauses): the replies from the
	// grantors wait for it, so it reads them well after they were sent.
	StallSidecar Kind = "stall-sidecar"
	// StarveCPU limits a grantor (the leader half the time), or now and
	// then a sidecar, to a few per cent of a CPU through its cgroup.
	StarveCPU Kind = "cpu-starve"
	// SlowDisk limits a grantor's writes to its data dir's disk to a few
	// a second through its cgroup; skipped, with the reason, where the
	// machine cannot.
	SlowDisk Kind = "slow-disk"
	// ClockStep steps CLOCK_REALTIME (the machine's: it is not
	// namespaced) by up to a couple of minutes, and back after a while.
	ClockStep Kind = "clock-step"
	// TimeNamespace kill -9s a grantor and restarts it in a time
	// namespace whose BOOTTIME is hours or days off the machine's.
	TimeNamespace Kind = "timens-restart"
	// Rolling restarts every member grantor, one at a time (SIGTERM or
	// kill -9), waiting for a leader in between.
	Rolling Kind = "rolling-restart"
	// Membership adds the spare grantor to the cluster, then removes one
	// (SIGTERM: it leaves; or kill -9 and `leaseside members remove`).
	Membership Kind = "add-remove-grantor"
	// StopClient SIGSTOPs a client process (or the command of a run).
	StopClient Kind = "stop-client"
	// KillClient kill -9s a client process; it is restarted.
	KillClient Kind = "kill-client"
)

// clusterKinds are the faults of the cluster track, each with its weight
// in a deck (a kind of weight w is drawn w times a deck).
var clusterKinds = []struct {
	kind   Kind
	weight int
}{
	{Partition, 2}, {OneWay, 2}, {Split, 4}, {LeaderAlone, 2}, {SidecarAlone, 1}, {Flapping, 2},
	{KillGrantor, 3}, {StopGrantor, 3}, {KillSidecar, 1}, {StopSidecar, 1}, {StallSidecar, 2},
	{StarveCPU, 1}, {SlowDisk, 1}, {ClockStep, 1}, {TimeNamespace, 1}, {Rolling, 1}, {Membership, 1},
}

// AllKinds lists every kind of fault, cluster track first.
func AllKinds() []Kind {
	var ks []Kind
	for _, k := range clusterKinds {
		ks = append(ks, k.kind)
	}
	return append(ks, StopClient, KillClient)
}

// Step is one fault of a schedule: what, when (from the start of the
// run) and for how long, and a seed of its own for the choices made when
// it runs (targets, sides, amounts).
type Step struct {
	At   time.Duration `json:"at"`
	Kind Kind          `json:"kind"`
	For  time.Duration `json:"for"`
	Seed uint64        `json:"seed"`
}

// Fault is a step as it ran: the targets it chose and what happened.
type Fault struct {
	Step   int    `json:"step"`
	Kind   Kind   `json:"kind"`
	Target string `json:"target,omitempty"`
	// Leader is set when the target led the grantors when hit.
	Leader bool   `json:"leader,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Skipped says why the fault could not be made here.
	Skipped string `json:"skipped,omitempty"`
	// Start and End bound the fault (End: healed, restarted, continued).
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// A cut of the network in two sides: the hosts of the island and
	// the rest, when the cut was in place and when the heal began.
	Island []string `json:"island,omitempty"`
	Rest   []string `json:"rest,omitempty"`
	Cut    int64    `json:"cut,omitempty"`
	Heal   int64    `json:"heal,omitempty"`
}

// Schedule is the nemesis's plan for a run: a pure function of the seed
// and the run's shape, so a seed replays the same faults in the same
// order (their instants move with the machine's speed).
type Schedule struct {
	Seed    uint64 `json:"seed"`
	Cluster []Step `json:"cluster"`
	Clients []Step `json:"clients"`
}

// faultScale is the typical length of a fault: about a typical term, so
// that faults outlast some leases and not others.
const faultScale = 3 * time.Second

// plan makes the schedule of a run of the given length whose longest
// lease term is maxTTL, with the cluster faults of kinds (all when
// empty). Cluster faults come from shuffled decks in which each kind
// appears as often as its weight, so every kind comes up in a long run
// and the leader is hit most. Faults last about faultScale, a grantor's
// SIGSTOP up to the longest term and beyond.
func plan(seed uint64, length, maxTTL time.Duration, kinds []Kind) Schedule {
	rng := rand.New(rand.NewPCG(seed, 0x6368616f73)) // "chaos"
	s := Schedule{Seed: seed}
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)))
	}
	const f = faultScale
	warm, cool := f, max(2*f, maxTTL)
	var deck []Kind
	for at := warm; at < length-cool; {
		if len(deck) == 0 {
			for _, k := range clusterKinds {
				if len(kinds) == 0 || slices.Contains(kinds, k.kind) {
					for range k.weight {
						deck = append(deck, k.kind)
					}
				}
			}
			if len(deck) == 0 {
				break
			}
			rng.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
		}
		k := deck[0]
		deck = deck[1:]
		st := Step{At: at, Kind: k, Seed: rng.Uint64()}
		switch k {
		case Partition, OneWay, Split, LeaderAlone, SidecarAlone:
			st.For = between(f/2, 3*f)
		case Flapping, StarveCPU, SlowDisk, StallSidecar:
			st.For = between(2*f, 4*f)
		case KillGrantor, TimeNamespace:
			st.For = between(f/5, 2*f) // down time
		case StopGrantor:
			st.For = between(f/2, maxTTL+f)
		case KillSidecar:
			st.For = between(f/5, f)
		case StopSidecar:
			st.For = between(f/4, 2*f)
		case ClockStep:
			st.For = between(f, 3*f)
		case Rolling, Membership:
			st.For = 0 // as long as it takes
		}
		if at+st.For > length-cool {
			break
		}
		s.Cluster = append(s.Cluster, st)
		at += st.For + between(f/3, 3*f/2)
	}
	crng := rand.New(rand.NewPCG(seed, 0x636c69656e74)) // "client"
	for at := warm + time.Duration(crng.Int64N(int64(f))); at < length-cool; {
		st := Step{At: at, Kind: StopClient, Seed: crng.Uint64()}
		if crng.IntN(3) == 0 {
			st.Kind = KillClient
		} else {
			st.For = f/4 + time.Duration(crng.Int64N(int64(maxTTL+2*f)))
		}
		if at+st.For > length-cool {
			break
		}
		s.Clients = append(s.Clients, st)
		at += st.For + f/2 + time.Duration(crng.Int64N(int64(2*f)))
	}
	return s
}
