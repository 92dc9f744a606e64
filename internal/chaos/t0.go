package chaos

import (
	"fmt"
	"strconv"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/internal/chaos/workload"
	"github.com/leaseside/leaseside/ipc"
)

// CheckT0 names the checker of grant deadlines against the calls that
// got them (docs/design.md's timing rule 1).
const CheckT0 = "t0"

// t0Slack bounds how long after a client recorded an acquire the sidecar
// may read t0 for it, on a busy machine: the socket's round, the
// sidecar's queue.
const t0Slack = time.Second

// checkT0 finds grants whose deadline lies further after the acquire's
// call than its term allows. The sidecar reads t0 before it sends the
// request (rule 1) and tells the holder t0 + d(1-rho) - eps, so a grant's
// deadline is at most the call plus that (with the default rho and
// epsilon, which the sidecar uses at least) plus t0Slack; unless a
// renewal set it, which the sidecar also sends its watchers as a renewed
// event with that very deadline (a grant that came late is confirmed by
// a renewal before it is answered). The grant's reply says how many
// renewals it had: the holder's record does not rely on the suite's
// watcher, which the socket may spare a renewed event under backpressure.
// Such a grant's deadline comes from a renewal sent before the reply,
// so it is at most the read plus the term. A t0 read after the reply
// makes the deadline of every grant that waited in the queue too late.
// Left out: calls during which a fault hit the client or its sidecar (a
// stop delays the sidecar's reading of the request); calls of an owner
// that may have a grant of the name the sidecar must settle first (it
// sends that release, or asks the grantor for the answer to an acquire
// without a clear one, under the owner's turn, as long as that takes, and
// only then reads t0): one it held and did not see released, or one an
// acquire without a clear answer may have made; an owner process (owner
// pid) owes until a release succeeds, a connection until the client lets
// go of it; the commands of `leaseside run` (the run's start comes in
// between).
func checkT0(h *History) []Violation {
	renewed := map[string]bool{} // name/token/deadline told by a renewal
	for _, e := range h.Events {
		if e.Event.Event == ipc.EventRenewed {
			renewed[e.Event.Lease+"/"+e.Event.Token+"/"+strconv.FormatInt(e.Event.DeadlineBoottimeNs, 10)] = true
		}
	}
	calls := map[string]workload.Record{}
	owed := map[string]bool{} // incarnation/name: a grant of it not seen released
	owes := func(op, name string) string { return incarnationOf(op) + "/" + name }
	owner := map[string]string{} // op -> the owner kind of its grant
	timing := clockwatch.DefaultTiming()
	var vs []Violation
	for _, r := range h.Records {
		switch r.Kind {
		case workload.KindAcquire:
			calls[r.Op] = r
			continue
		case workload.KindReleased:
			delete(owed, owes(r.Op, r.Name))
			continue
		case workload.KindAcquireFailed:
			if _, ok := calls[r.Op]; ok && workload.Ambiguous(r.Code) {
				owed[owes(r.Op, r.Name)] = true // the acquire is settled first
			}
			continue
		case workload.KindReleaseFailed, workload.KindClose, workload.KindGone:
			if owner[r.Op] != ipc.OwnerPID {
				delete(owed, owes(r.Op, r.Name)) // the client closes the connection, the owner
			}
			continue
		case workload.KindAcquired:
		default:
			continue
		}
		c, ok := calls[r.Op]
		if !ok {
			continue
		}
		key := owes(r.Op, r.Name)
		skip := owed[key] || c.TTLMs == 0 || hitDuring(h, r.Client, c.At, r.At)
		owed[key], owner[r.Op] = true, c.Owner
		if skip {
			continue
		}
		d := time.Duration(c.TTLMs) * time.Millisecond
		term := timing.HolderDeadline(0, d).Nanoseconds()
		bound := c.At + t0Slack.Nanoseconds() + term
		if r.Renewals > 0 {
			bound = max(bound, r.At+term) // a renewal's t0, before the reply
		}
		tok := strconv.FormatUint(r.Token, 10)
		if r.Deadline > bound && !renewed[r.Name+"/"+tok+"/"+strconv.FormatInt(r.Deadline, 10)] {
			vs = append(vs, Violation{Checker: CheckT0, Name: r.Name, At: r.At,
				Message: fmt.Sprintf("%s's grant of %s (token %s, term %v) called at %s and read at %s has the deadline %s, %v after the call plus its term and %v of slack, and no renewal set it: the sidecar read t0 after the request left",
					r.Op, r.Name, tok, d, rel(c.At, h.Start), rel(r.At, h.Start), rel(r.Deadline, h.Start), time.Duration(r.Deadline-bound).Round(time.Millisecond), t0Slack)})
		}
	}
	return vs
}

// hitDuring says whether a fault hit client (s1c2: also its sidecar s1)
// between from and to.
func hitDuring(h *History, client string, from, to int64) bool {
	sidecar := client
	if len(client) > 2 {
		sidecar = client[:2]
	}
	for _, f := range h.Faults {
		end := f.End
		if end == 0 {
			end = h.End
		}
		if f.Start <= to && end >= from && (f.Target == client || f.Target == sidecar) {
			return true
		}
	}
	return false
}
