package hosts

import (
	"time"

	"github.com/leaseside/leaseside/internal/bench"
)

// cpuSample is how often the grantors' CPU is read during a failover.
const cpuSample = 250 * time.Millisecond

// cpuSampler reads the CPU time of every grantor but the one killed, at
// each sample.
type cpuSampler struct {
	pids []int
	dead int
	at   []time.Time
	secs [][]float64 // per sample, per grantor; -1 when unreadable
}

func newCPUSampler(pids []int, dead int) *cpuSampler {
	s := &cpuSampler{pids: pids, dead: dead}
	s.sample()
	return s
}

func (s *cpuSampler) sample() {
	row := make([]float64, len(s.pids))
	for i, pid := range s.pids {
		row[i] = -1
		if i != s.dead {
			if v, err := bench.CPUSeconds(pid); err == nil {
				row[i] = v
			}
		}
	}
	s.at = append(s.at, time.Now())
	s.secs = append(s.secs, row)
}

// of returns grantor i's highest CPU over any second between samples
// (cores), and its mean over all the samples.
func (s *cpuSampler) of(i int) (peak, mean float64) {
	n := len(s.at)
	if n < 2 || s.secs[0][i] < 0 || s.secs[n-1][i] < 0 {
		return 0, 0
	}
	mean = (s.secs[n-1][i] - s.secs[0][i]) / s.at[n-1].Sub(s.at[0]).Seconds()
	j := 0
	for k := 1; k < n; k++ {
		for s.at[k].Sub(s.at[j]) > time.Second && j < k-1 {
			j++
		}
		if span := s.at[k].Sub(s.at[j]).Seconds(); span >= 0.9 {
			peak = max(peak, (s.secs[k][i]-s.secs[j][i])/span)
		}
	}
	if peak == 0 {
		peak = mean // shorter than a second
	}
	return peak, mean
}
