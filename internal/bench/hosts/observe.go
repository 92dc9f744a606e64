package hosts

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/internal/bench"
	"github.com/leaseside/leaseside/ipc"
)

// observer follows every host's lease events.
//
// Lag: the sidecar sends a lease's renewal d/3 after the t0 of the one
// before (rule 4), and sets its deadline to t0 + d(1-rho) - eps (rule 3).
// So from two consecutive deadlines the renewal's due time is known
// exactly (the earlier deadline - (d(1-rho) - eps) + d/3), and its lag
// is how long after that its renewed event reached the program: the
// sidecar's delay in sending it, the round trip to the leader, and the
// socket. A lag that reaches the 2d/3 - eps left when the renewal came
// due loses the lease.
type observer struct {
	offset time.Duration // d(1-rho) - eps: deadline - t0
	third  time.Duration // d/3

	killAt atomic.Int64 // BOOTTIME ns of the kill, 0 before

	mu      sync.Mutex
	steady  bench.Latencies // lags of renewals due before the kill
	failing bench.Latencies // lags of renewals due after it
	lost    map[string]int  // by reason
	// recovered holds, per host that renewed every lease after the
	// kill, when the last of them came (BOOTTIME ns); margins how long
	// before the host's soonest deadline at the kill that was.
	recovered []int64
	margins   []time.Duration
	// soonest is each host's soonest deadline at the kill.
	soonest  map[*host]int64
	renewals int
}

func newObserver(cfg Config) *observer {
	t := clockwatch.DefaultTiming()
	return &observer{offset: t.HolderDeadline(0, cfg.Term).Sub(0), third: cfg.Term / 3, lost: map[string]int{}}
}

// watch follows host h's events until stop is closed.
func (o *observer) watch(h *host, stop <-chan struct{}) {
	afterKill := 0
	for {
		var ev *ipc.Event
		select {
		case ev = <-h.events:
		case <-stop:
			return
		}
		now := boottime()
		o.mu.Lock()
		if l := h.leases[ev.Lease]; l != nil && ev.Token == l.token {
			switch ev.Event {
			case ipc.EventRenewed:
				afterKill += o.renewedLocked(l, ev, now)
			case ipc.EventLost:
				o.lost[ev.Reason]++
				delete(h.leases, ev.Lease)
			}
			if afterKill == len(h.leases) && afterKill > 0 {
				o.recovered = append(o.recovered, now)
				o.margins = append(o.margins, time.Duration(o.soonest[h]-now))
				afterKill = -1 // counted
			}
		}
		o.mu.Unlock()
	}
}

// renewedLocked takes in the renewal of l, whose event came at now, and
// returns 1 if it is l's first renewal sent after the kill. o.mu is held.
func (o *observer) renewedLocked(l *held, ev *ipc.Event, now int64) int {
	due := l.deadline - o.offset.Nanoseconds() + o.third.Nanoseconds()
	lag := time.Duration(now - due)
	t0 := ev.DeadlineBoottimeNs - o.offset.Nanoseconds()
	l.deadline = ev.DeadlineBoottimeNs
	o.renewals++
	kill := o.killAt.Load()
	if kill != 0 && due >= kill {
		o.failing = append(o.failing, lag)
	} else {
		o.steady = append(o.steady, lag)
	}
	if kill != 0 && t0 > kill && !l.renewedAfterKill {
		l.renewedAfterKill = true
		return 1
	}
	return 0
}

// kill records the kill of the leader at now (BOOTTIME ns) and returns
// the shortest validity any lease of hosts had left then.
func (o *observer) kill(hosts []*host, now int64) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.killAt.Store(now)
	o.soonest = make(map[*host]int64, len(hosts))
	least := time.Duration(1<<63 - 1)
	for _, h := range hosts {
		s := int64(1<<63 - 1)
		for _, l := range h.leases {
			s = min(s, l.deadline)
		}
		o.soonest[h] = s
		least = min(least, time.Duration(s-now))
	}
	return least
}

// reset forgets the lags seen so far (the warmup's).
func (o *observer) reset() {
	o.mu.Lock()
	o.steady, o.renewals = nil, 0
	o.mu.Unlock()
}

// progress returns the number of hosts that renewed every lease after
// the kill, and the number that lost every lease.
func (o *observer) progress(hosts []*host) (recovered, allLost int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, h := range hosts {
		if len(h.leases) == 0 {
			allLost++
		}
	}
	return len(o.recovered), allLost
}
