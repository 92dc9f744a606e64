package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100 on
// every Linux architecture Go supports).
const userHZ = 100

// cpuSeconds reads the CPU time (user + system, all threads) of pid, or of
// this process for pid 0.
func cpuSeconds(pid int) (float64, error) {
	p := "self"
	if pid != 0 {
		p = strconv.Itoa(pid)
	}
	b, err := os.ReadFile("/proc/" + p + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold anything.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%s/stat: no command name", p)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%s/stat: %d fields", p, len(f)+2)
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%s/stat: bad utime or stime", p)
	}
	return float64(utime+stime) / userHZ, nil
}

// CPUMeter measures the CPU used during a window by this process (the
// bench) and by the leader, when its pid is known. On a machine the bench
// shares with the cluster, the two compete for the same cores.
type CPUMeter struct {
	pid    int
	cancel context.CancelFunc
	done   chan struct{}
	// Set before done is closed: CPU seconds used between the readings
	// at the window's start and end, -1 when not known, and the wall
	// time between those readings.
	self, leader float64
	wall         time.Duration
}

// MeterCPU starts measuring the CPU used during w (from its start until it
// ended) by this process and, if leaderPID is not 0, by the leader. The caller must call Stop (after
// Report, if it reports).
func MeterCPU(ctx context.Context, leaderPID int, w *Window) *CPUMeter {
	ctx, cancel := context.WithCancel(ctx)
	m := &CPUMeter{pid: leaderPID, cancel: cancel, done: make(chan struct{}), self: -1, leader: -1}
	go func() {
		defer close(m.done)
		if !sleepUntil(ctx, w.Start) {
			return
		}
		t0 := time.Now()
		s0, errS := cpuSeconds(0)
		l0, errL := cpuSeconds(m.pid)
		select {
		case <-w.Ended():
		case <-ctx.Done():
			return
		}
		m.wall = time.Since(t0)
		if s1, err := cpuSeconds(0); err == nil && errS == nil {
			m.self = s1 - s0
		}
		if l1, err := cpuSeconds(m.pid); err == nil && errL == nil && m.pid != 0 {
			m.leader = l1 - l0
		}
	}()
	return m
}

// Report waits for the window's end and adds the figures to res: "bench
// client CPU" and "leader CPU", in cores.
func (m *CPUMeter) Report(res *Result) {
	<-m.done
	secs := m.wall.Seconds()
	if m.self >= 0 {
		res.Add("bench client CPU", m.self/secs, "cores")
	}
	if m.leader >= 0 {
		res.Add("leader CPU", m.leader/secs, "cores")
	}
}

// Stop ends the measurement, if it is still going, and waits for it.
func (m *CPUMeter) Stop() {
	m.cancel()
	<-m.done
}

// sleepUntil waits until t, or ctx ends (false).
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
