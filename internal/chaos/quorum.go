package chaos

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/internal/chaos/workload"
	"github.com/leaseside/leaseside/ipc"
)

// CheckQuorum names the checker of renewals on the side of a partition
// without a quorum of grantors.
const CheckQuorum = "quorum"

// quorumSlack is how long after a cut a renewal may still be confirmed on
// the side without a quorum: a verify round counts an answer to a
// heartbeat already in flight when it started (grantor/keepalive.go), and
// one that crossed before the cut may be read a little later on a busy
// machine.
const quorumSlack = 500 * time.Millisecond

// checkQuorum finds renewals confirmed to a sidecar cut off, with fewer
// grantors than any quorum, from the other grantors: a leader acknowledges
// a renewal only after a quorum answered a round started after the
// renewal came (docs/design.md section 2), which no grantor on that side can
// have, so no renewal sent there after the cut (plus quorumSlack) may be
// confirmed before the heal began. A renewed event's deadline is t0 +
// d(1-rho) - eps, t0 when the renewal was sent; with the default rho and
// epsilon (the sidecar uses at least those) this gives a t0 no later than
// the true one, so the check never blames a renewal sent before the cut.
//
// The voters number grantors, give or take one while a grantor is added
// or removed; a side with at most (grantors-1)/2 grantor hosts has no
// quorum of any of those.
func checkQuorum(h *History, grantors int) []Violation {
	ttl := map[string]time.Duration{} // name/token -> the term asked for
	ops := map[string]time.Duration{} // op -> the term asked for
	for _, r := range h.Records {
		switch r.Kind {
		case workload.KindAcquire, workload.KindRun:
			ops[r.Op] = time.Duration(r.TTLMs) * time.Millisecond
		case workload.KindAcquired, workload.KindChild:
			if d := ops[r.Op]; d > 0 {
				ttl[r.Name+"/"+strconv.FormatUint(r.Token, 10)] = d
			}
		}
	}
	timing := clockwatch.DefaultTiming()
	var vs []Violation
	for _, f := range h.Faults {
		if len(f.Island) == 0 || f.Cut == 0 || f.Heal == 0 {
			continue
		}
		island := map[string]bool{}
		for _, n := range f.Island {
			island[n] = true
		}
		// The grantor hosts on each side: the island, and the rest.
		inside, outside := grantorHosts(f.Island), grantorHosts(f.Rest)
		noQuorum := func(sidecar string) bool {
			n := outside
			if island[sidecar] {
				n = inside
			}
			return n <= (grantors-1)/2
		}
		for _, e := range h.Events {
			if e.Event.Event != ipc.EventRenewed || e.At <= f.Cut || e.At >= f.Heal || !noQuorum(e.Sidecar) {
				continue
			}
			d := ttl[e.Event.Lease+"/"+e.Event.Token]
			if d == 0 {
				continue
			}
			t0 := e.Event.DeadlineBoottimeNs - timing.HolderDeadline(0, d).Nanoseconds()
			if t0 > f.Cut+quorumSlack.Nanoseconds() {
				vs = append(vs, Violation{Checker: CheckQuorum, Name: e.Event.Lease, At: e.At,
					Message: fmt.Sprintf("sidecar %s was told a renewal of %s token %s (term %v) sent at %s or later, %v after it was cut off with too few grantors for a quorum (%s) at %s; no grantor there can confirm it",
						e.Sidecar, e.Event.Lease, e.Event.Token, d, rel(t0, h.Start), time.Duration(t0-f.Cut).Round(time.Millisecond), f.Target, rel(f.Cut, h.Start))})
			}
		}
	}
	return vs
}

// grantorHosts counts the grantors among host names.
func grantorHosts(hosts []string) int {
	n := 0
	for _, h := range hosts {
		if strings.HasPrefix(h, "g") {
			n++
		}
	}
	return n
}
