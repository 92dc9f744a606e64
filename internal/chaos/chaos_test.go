package chaos

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	flagSeed      = flag.Uint64("chaos.seed", 0, "replay this seed (0: the short mode's fixed seed and a random one)")
	flagDuration  = flag.Duration("chaos.duration", 0, "how long the nemesis runs (0: the short mode, 60s a seed)")
	flagOut       = flag.String("chaos.out", "", "directory for the report, the timeline picture and the logs (default: a new temporary directory)")
	flagGrantors  = flag.Int("chaos.grantors", 3, "grantors: 3 or 5")
	flagSidecars  = flag.Int("chaos.sidecars", 2, "sidecar hosts: 2 to 4")
	flagClients   = flag.Int("chaos.clients", 3, "client processes per sidecar host")
	flagFaults    = flag.String("chaos.faults", "", "comma-separated cluster fault kinds to use (default: all)")
	flagClockStep = flag.Duration("chaos.clockstep", 0, "largest CLOCK_REALTIME step, machine-wide (0: none; long runs default to 2m)")
	flagRace      = flag.Bool("chaos.race", true, "build leaseside with the race detector")
	flagRecheck   = flag.String("chaos.recheck", "", "run the checkers again on the history a run saved in this directory, and nothing else")
	flagStore     = flag.String("chaos.store", "", "keep the fenced register in a real store that checks the tokens itself: postgres (default: in memory)")
	flagRegress   = flag.Bool("chaos.regressions", false, "replay the seeds that found product bugs (regressionSeeds), each as it ran then")
)

// regressionSeeds are the runs that found product bugs, as they ran
// (the findings are in the team's notes; each is fixed with a
// deterministic test of its own). -chaos.regressions replays them all.
var regressionSeeds = []struct {
	finding            string
	seed               uint64
	duration           time.Duration
	grantors, sidecars int
}{
	{"F1 data race on an event shared by connections; F2 raft-wal restart panic", 1, 30 * time.Second, 3, 2},
	{"F3 a removed dead grantor promoted back to voter", 2, 45 * time.Second, 3, 2},
	{"F4 a granted acquire whose reply was lost answered lease_held", 12, 5 * time.Minute, 5, 3},
	{"F5 data race on a pending grant between acquire and the renew loop", 21, 10 * time.Minute, 3, 3},
	{"F4 again: three grants whose replies were lost in a partition, answered lease_held", 31, 10 * time.Minute, 5, 4},
}

// fixedSeed is the short mode's fixed seed: in its minute, a grantor
// restarted in a time namespace, two majority/minority splits with the
// leader on the minority side, a stalled and a stopped sidecar, and the
// leader stopped.
const fixedSeed = 20261212

// shortDuration is how long the nemesis runs for each seed of the short
// mode.
const shortDuration = 60 * time.Second

func TestMain(m *testing.M) {
	code := m.Run()
	RemoveBinaries()
	os.Exit(code)
}

// TestChaos runs the suite: in the short mode (no -chaos.seed, no
// -chaos.duration), the fixed seed and a random one for 60 s each;
// otherwise the seed given (or a random one) for the duration given.
func TestChaos(t *testing.T) {
	if *flagRecheck != "" {
		Recheck(t, *flagRecheck)
		return
	}
	if testing.Short() {
		t.Skip("the chaos suite runs real clusters for minutes")
	}
	cfg := DefaultConfig()
	cfg.Grantors, cfg.Sidecars, cfg.ClientsPerHost, cfg.Race = *flagGrantors, *flagSidecars, *flagClients, *flagRace
	if *flagFaults != "" {
		for _, k := range strings.Split(*flagFaults, ",") {
			cfg.Kinds = append(cfg.Kinds, Kind(strings.TrimSpace(k)))
		}
	}
	cfg.ClockStepMax = *flagClockStep
	cfg.Store = *flagStore
	if *flagRegress {
		for _, r := range regressionSeeds {
			t.Run(fmt.Sprintf("seed=%d", r.seed), func(t *testing.T) {
				t.Log(r.finding)
				c := cfg
				c.Seed, c.Duration, c.Grantors, c.Sidecars = r.seed, r.duration, r.grantors, r.sidecars
				if *flagOut != "" {
					c.Out = filepath.Join(*flagOut, fmt.Sprint(r.seed))
				}
				Run(t, c)
			})
		}
		return
	}
	if *flagSeed == 0 && *flagDuration == 0 {
		for _, seed := range []uint64{fixedSeed, rand.Uint64N(1 << 40)} {
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				c := cfg
				c.Seed, c.Duration, c.LinearTimeout = seed, shortDuration, 20*time.Second
				if *flagOut != "" {
					c.Out = filepath.Join(*flagOut, fmt.Sprint(seed))
				}
				Run(t, c)
			})
		}
		return
	}
	cfg.Seed, cfg.Duration, cfg.Out = *flagSeed, *flagDuration, *flagOut
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64N(1 << 40)
	}
	if cfg.Duration == 0 {
		cfg.Duration = shortDuration
	}
	if cfg.Duration >= 10*time.Minute {
		cfg.LinearTimeout = 5 * time.Minute
		if !isSet("chaos.clockstep") {
			cfg.ClockStepMax = 2 * time.Minute
		}
	}
	Run(t, cfg)
}

// isSet reports whether a flag was given on the command line.
func isSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
