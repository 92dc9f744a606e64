package chaos

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leaseside/leaseside/internal/chaos/workload"
	"github.com/leaseside/leaseside/ipc"
)

// History is everything a run recorded, each item stamped with
// CLOCK_BOOTTIME nanoseconds: what the clients did and saw, what the
// sidecars told their watchers, what the fenced register received, the
// faults, and the processes that ended. The checkers read nothing else.
type History struct {
	// Start and End bound the run (clients started, clients stopped).
	Start, End int64
	// Stop is when the suite began to kill the clients (their last
	// kill -9, at the end of the run).
	Stop    int64
	Records []workload.Record
	Events  []SidecarEvent
	Writes  []RegisterWrite
	Faults  []Fault
	Exits   []ClientExit
	Probes  []Probe
	Crashes []Crash
	// Load is the machine's one-minute load average, every 10 s.
	Load []float64
	// Store is what the register's store held at the end, when the
	// register is kept in one (Config.Store); the checkers take what was
	// accepted from it.
	Store *StoreState `json:",omitempty"`
}

// SidecarEvent is an event a sidecar pushed to the suite's watcher.
type SidecarEvent struct {
	Sidecar string    `json:"sidecar"`
	Event   ipc.Event `json:"event"`
	At      int64     `json:"t"`
}

// RegisterWrite is a write the fenced register received, and its answer.
type RegisterWrite struct {
	workload.Write
	// Seq is the write's number in the name's register (fence.Write.Seq)
	// when it passed the deadline check, 0 otherwise.
	Seq      uint64 `json:"seq,omitempty"`
	At       int64  `json:"t"`
	Accepted bool   `json:"ok"`
	Reason   string `json:"reason,omitempty"`
}

// ClientExit is the end of one incarnation of a client process.
type ClientExit struct {
	Client      string `json:"client"`
	Incarnation int    `json:"incarnation"`
	Pid         int    `json:"pid"`
	Killed      bool   `json:"killed"` // by a signal (kill -9)
	At          int64  `json:"t"`
}

// Probe is the final liveness check of one name: once the clients have
// stopped, an acquire by the suite itself, which must be granted within
// the longest term (plus the grantors' margins).
type Probe struct {
	Name    string `json:"name"`
	Call    int64  `json:"call"`
	Return  int64  `json:"return"`
	Token   uint64 `json:"token,omitempty"`
	Err     string `json:"err,omitempty"`
	Sidecar string `json:"sidecar"`
}

// Crash is a line of a product process that says it crashed or raced:
// a panic, a fatal error, a data race report.
type Crash struct {
	Process string `json:"process"`
	Line    string `json:"line"`
	At      int64  `json:"t"`
}

// crashMarks are the beginnings of the lines a Crash is made of.
var crashMarks = []string{"WARNING: DATA RACE", "panic: ", "fatal error: "}

// recorder collects a History from many goroutines.
type recorder struct {
	mu sync.Mutex
	h  History
	// children are the pids of the commands of runs that started and
	// have not said they end, by run Op: targets for faults.
	children map[string]int
}

func (r *recorder) record(rec workload.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Records = append(r.h.Records, rec)
	switch rec.Kind {
	case workload.KindChild:
		if r.children == nil {
			r.children = map[string]int{}
		}
		r.children[rec.Op] = rec.Pid
	case workload.KindChildEnd, workload.KindGone:
		delete(r.children, rec.Op)
	}
}

// childPids lists the pids of the commands of runs now using a lease.
func (r *recorder) childPids() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var pids []int
	for _, pid := range r.children {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return pids
}

// clientLine takes a line of a client's output (process names it): a
// record, or anything else (a Go client's or run's own message), which is
// looked at for a crash: run is a product binary, built like the others,
// whose output goes to its client's, and a client that panics or races
// thins the workload.
func (r *recorder) clientLine(process, line string, at int64) {
	if !strings.HasPrefix(line, "{") {
		r.productLine(process, line, at)
		return
	}
	var rec workload.Record
	if json.Unmarshal([]byte(line), &rec) == nil && rec.Kind != "" {
		r.record(rec)
	}
}

func (r *recorder) event(sidecar string, ev *ipc.Event, at int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Events = append(r.h.Events, SidecarEvent{Sidecar: sidecar, Event: *ev, At: at})
}

func (r *recorder) write(w RegisterWrite) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Writes = append(r.h.Writes, w)
}

// fault records the start of a fault and returns its index, for end.
func (r *recorder) fault(f Fault) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Faults = append(r.h.Faults, f)
	return len(r.h.Faults) - 1
}

// setFault changes fault i as set says.
func (r *recorder) setFault(i int, set func(*Fault)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	set(&r.h.Faults[i])
}

// endFault records the end of fault i, with what more there is to say.
func (r *recorder) endFault(i int, at int64, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := &r.h.Faults[i]
	f.End = at
	if detail != "" {
		if f.Detail != "" {
			f.Detail += "; "
		}
		f.Detail += detail
	}
}

func (r *recorder) exit(e ClientExit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Exits = append(r.h.Exits, e)
}

func (r *recorder) probe(p Probe) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Probes = append(r.h.Probes, p)
}

// productLine looks at a line of a grantor, a sidecar or a client (and
// its run) for a crash.
func (r *recorder) productLine(process, line string, at int64) {
	for _, m := range crashMarks {
		if strings.HasPrefix(line, m) {
			r.mu.Lock()
			r.h.Crashes = append(r.h.Crashes, Crash{Process: process, Line: line, At: at})
			r.mu.Unlock()
			return
		}
	}
}

// snapshot returns a copy of the history so far.
func (r *recorder) snapshot() *History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.h
	h.Records = append([]workload.Record(nil), h.Records...)
	h.Events = append([]SidecarEvent(nil), h.Events...)
	h.Writes = append([]RegisterWrite(nil), h.Writes...)
	h.Faults = append([]Fault(nil), h.Faults...)
	h.Exits = append([]ClientExit(nil), h.Exits...)
	h.Probes = append([]Probe(nil), h.Probes...)
	h.Crashes = append([]Crash(nil), h.Crashes...)
	h.Load = append([]float64(nil), h.Load...)
	return &h
}

// write saves the history as JSON.
func (h *History) write(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(f).Encode(h); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readJSON reads a JSON file into v.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// sampleLoad records the machine's one-minute load average every 10 s
// until ctx ends.
func (r *recorder) sampleLoad(ctx context.Context) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		if b, err := os.ReadFile("/proc/loadavg"); err == nil {
			if f := strings.Fields(string(b)); len(f) > 0 {
				if l, err := strconv.ParseFloat(f[0], 64); err == nil {
					r.mu.Lock()
					r.h.Load = append(r.h.Load, l)
					r.mu.Unlock()
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
