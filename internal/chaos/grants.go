package chaos

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/leaseside/leaseside/internal/chaos/workload"
	"github.com/leaseside/leaseside/ipc"
)

// Grant is one holder's hold of a lease, as the history shows it: from
// reading the grant to the earliest of its deadline (the latest one it
// was told in time), its release, its lost: its believed interval, on the
// one CLOCK_BOOTTIME of the machine.
type Grant struct {
	Name  string `json:"name"`
	Token uint64 `json:"token"`
	// Op is the call that got it (an acquire, or a run); Ops all the
	// calls that returned it (the same owner acquiring it again).
	Op  string   `json:"op"`
	Ops []string `json:"-"`
	// Holder is the process that believed it held the lease: a client
	// incarnation ("s1c2#3") or the command of a run ("run s1c2.3.17").
	Holder string `json:"holder"`
	// Call is when the call that got it was sent; Start when the grant
	// was read.
	Call  int64 `json:"call"`
	Start int64 `json:"start"`
	// Deadline is the latest deadline the holder was told while it lay
	// ahead (grant, check replies, renewed events).
	Deadline int64 `json:"deadline"`
	// End is when the holder's belief ended, EndWhy says what ended it.
	End    int64  `json:"end"`
	EndWhy string `json:"end_why"`
	// Ended is the end that the holder itself recorded (release, close,
	// exit, gone, a failed check, a new grant of the name) or its
	// deadline: the fenced register's check uses it (the holder writes
	// nothing after it).
	Ended int64 `json:"-"`

	// Collected from the history before the interval is worked out.
	updates []update // later deadlines, and when they were told
	ends    []update // explicit ends (deadline unused)
	last    int64    // the holder's last record
	acted   int64    // the holder's last accepted register write
	read    bool     // the holder recorded reading a lost or released
	// death is when the holder's process was killed without saying it
	// let go (kill -9 of its client, or run killing its command), 0 if
	// it was not.
	death int64
}

// update is a deadline told, or an end, at an instant. An end told to
// the suite's watcher (watcher) is one the holder may not have read yet.
type update struct {
	at, deadline int64
	why          string
	watcher      bool
}

func (g *Grant) String() string {
	return g.Name + " token " + strconv.FormatUint(g.Token, 10) + " held by " + g.Holder + " (" + g.Op + ")"
}

// holderOf names a client incarnation as a holder.
func holderOf(client, incarnation string) string { return client + "#" + incarnation }

// incarnationOf is the holder name of the client incarnation that made
// an Op, CLIENT.INCARNATION.SEQ.
func incarnationOf(op string) string {
	parts := strings.Split(op, ".")
	if len(parts) != 3 {
		return op
	}
	return holderOf(parts[0], parts[1])
}

// grants works out every grant of the history with its believed
// interval, sorted by name, start and token.
func grants(h *History) []*Grant {
	type key struct {
		name  string
		token uint64
	}
	byKey := map[key][]*Grant{} // a holder may hold one grant in several spells
	byOp := map[string]*Grant{}
	calls := map[string]int64{} // op -> when the acquire or run was sent
	last := map[string]int64{}  // holder -> its last record
	held := map[string]map[string]*Grant{}
	var all []*Grant

	add := func(name string, token uint64, op, holder string, call, start, deadline int64) {
		k := key{name, token}
		if gs := byKey[k]; len(gs) > 0 && gs[len(gs)-1].Holder == holder && len(gs[len(gs)-1].ends) == 0 {
			// The same owner got the grant it holds again.
			g := gs[len(gs)-1]
			g.Ops = append(g.Ops, op)
			g.updates = append(g.updates, update{at: start, deadline: deadline})
			byOp[op] = g
			return
		}
		// A new grant, or one its holder had stopped believing in (a
		// client that found its lease gone acquires it again and gets
		// the grant its daemon kept): a new spell of belief.
		g := &Grant{Name: name, Token: token, Op: op, Ops: []string{op}, Holder: holder, Call: call, Start: start, Deadline: deadline}
		byKey[k] = append(byKey[k], g)
		byOp[op] = g
		all = append(all, g)
		if held[holder] == nil {
			held[holder] = map[string]*Grant{}
		}
		// A new grant of a name ends the one the holder had: the grantor
		// ended the old one in the step that made the new one.
		if old := held[holder][name]; old != nil {
			old.ends = append(old.ends, update{at: start, why: "replaced"})
		}
		held[holder][name] = g
	}

	for _, r := range h.Records {
		holder := incarnationOf(r.Op)
		switch r.Kind {
		case workload.KindChild, workload.KindChildEnd:
			holder = "run " + r.Op
		case workload.KindCheck, workload.KindGone:
			if g := byOp[r.Op]; g != nil {
				holder = g.Holder
			}
		}
		if r.Op != "" {
			last[holder] = max(last[holder], r.At, r.End)
		}
		switch r.Kind {
		case workload.KindAcquire, workload.KindRun:
			calls[r.Op] = r.At
		case workload.KindAcquired:
			add(r.Name, r.Token, r.Op, holder, calls[r.Op], r.At, r.Deadline)
		case workload.KindChild:
			add(r.Name, r.Token, r.Op, holder, calls[r.Op], r.At, r.Deadline)
		case workload.KindCheck:
			if g := byOp[r.Op]; g != nil {
				if r.Code == "" {
					g.updates = append(g.updates, update{at: r.End, deadline: r.Deadline})
				} else {
					g.ends = append(g.ends, update{at: r.End, why: "check: " + r.Code})
				}
			}
		case workload.KindRelease, workload.KindClose, workload.KindExit, workload.KindGone:
			if g := byOp[r.Op]; g != nil {
				g.ends = append(g.ends, update{at: r.At, why: r.Kind})
			}
		case workload.KindChildEnd:
			if g := byOp[r.Op]; g != nil {
				g.ends = append(g.ends, update{at: r.At, why: strings.TrimSpace("child_end " + r.Code)})
			}
		}
	}
	// Events the holders read on their own connections: a renewed
	// deadline they believed, and the instant they learned of a lost or
	// released grant (their client ended the lease just before).
	for _, r := range h.Records {
		if r.Kind != workload.KindEvent {
			continue
		}
		holder := incarnationOf(r.Op)
		var g *Grant
		for _, sp := range byKey[key{r.Name, r.Token}] {
			if sp.Holder == holder && min(sp.Start, cmp.Or(sp.Call, sp.Start)) <= r.At {
				g = sp
			}
		}
		if g == nil {
			continue
		}
		switch r.Code {
		case ipc.EventRenewed, ipc.EventShortened:
			g.updates = append(g.updates, update{at: r.At, deadline: r.Deadline})
		case ipc.EventLost, ipc.EventReleased:
			g.ends = append(g.ends, update{at: r.At, why: strings.TrimSuffix("read "+r.Code+": "+r.Err, ": ")})
			g.read = true
		}
	}
	// Renewed deadlines and lost leases, as the sidecars told watchers.
	for _, e := range h.Events {
		tok, err := strconv.ParseUint(e.Event.Token, 10, 64)
		if err != nil {
			continue
		}
		// The spell the event falls in: the last one whose call was sent
		// before it. The sidecar holds a grant from before its holder
		// reads it: a holder stopped with the grant unread may read it
		// after the deadline the grant told, and then renewed events that
		// the sidecar sent meanwhile, in time, which keep it valid.
		var g *Grant
		for _, sp := range byKey[key{e.Event.Lease, tok}] {
			if from := min(sp.Start, cmp.Or(sp.Call, sp.Start)); from <= e.At {
				g = sp
			}
		}
		if g == nil {
			continue
		}
		switch e.Event.Event {
		case ipc.EventRenewed:
			g.updates = append(g.updates, update{at: e.At, deadline: e.Event.DeadlineBoottimeNs})
		case ipc.EventLost:
			g.ends = append(g.ends, update{at: e.At, why: "lost: " + e.Event.Reason, watcher: true})
		case ipc.EventReleased:
			// The sidecar let go (its owner released it, closed its
			// connection or exited): nobody holds that grant after.
			g.ends = append(g.ends, update{at: e.At, why: "released: " + e.Event.Reason, watcher: true})
		}
	}
	// The register's accepted writes: the holder acted on the lease then,
	// believing it held it until the deadline its client reported (the
	// client's own, moved by the events on its own connection).
	for _, w := range h.Writes {
		if g := byOp[w.Holder]; g != nil && w.Accepted {
			g.updates = append(g.updates, update{at: w.At, deadline: w.Deadline})
			g.acted = max(g.acted, w.At)
		}
	}
	deaths := killedAt(h)
	for _, g := range all {
		g.last = last[g.Holder]
		g.death = deaths[g.Holder]
		if run, ok := strings.CutPrefix(g.Holder, "run "); ok {
			// A command of run dies with its client, or is killed by run.
			g.death = cmp.Or(deaths[incarnationOf(run)], deaths[g.Holder])
		}
		g.settle()
	}
	slices.SortFunc(all, func(a, b *Grant) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Start, b.Start), cmp.Compare(a.Token, b.Token))
	})
	return all
}

// killedAt gives the instant of death of every holder process killed
// without saying it let go: a client incarnation killed by a signal (at
// the kill-client fault that killed it, or at the suite's final kill),
// and a command of run that run killed (at run's exit, exit code 79).
func killedAt(h *History) map[string]int64 {
	deaths := map[string]int64{}
	for _, x := range h.Exits {
		if !x.Killed {
			continue
		}
		// The latest kill before the suite saw it end: the kill-client
		// fault aimed at it or the suite's final kill. Without one (a
		// signal from elsewhere), when the suite saw it end.
		at := int64(0)
		for _, f := range h.Faults {
			if f.Kind == KillClient && f.Target == x.Client && f.Start <= x.At {
				at = max(at, f.Start)
			}
		}
		if h.Stop > 0 && h.Stop <= x.At {
			at = max(at, h.Stop)
		}
		at = cmp.Or(at, x.At)
		deaths[holderOf(x.Client, strconv.Itoa(x.Incarnation))] = at
	}
	for _, r := range h.Records {
		if r.Kind == workload.KindRunExit && r.Exit == exitLost {
			deaths["run "+r.Op] = r.At
		}
	}
	return deaths
}

// exitLost is run's exit code when it lost the lease and stopped its
// command.
const exitLost = 79

// settle works out the grant's deadline and ends from what was
// collected. Every deadline told while it lay ahead counts, also one told
// after the one before had passed: a renewal sent in time whose reply
// came late (a slow grantor) makes the sidecar call the grant valid
// again, and a holder that did not look in between believes throughout.
// That is safe when the grantor did renew in time (no other holder in
// between); when it did not, the interval overlaps the next holder's.
//
// An end the holder had not learned of when it last acted on the lease
// (a register write after it: a lost the suite's watcher read while the
// holder was stopped) does not end its belief; nor does the watcher's
// lost or released when the holder recorded when it read one (a client
// records the events on its own connection; a run's command does not). A holder killed without
// saying it let go believed until its death: the latest of its last
// record, its last write and the kill.
func (g *Grant) settle() {
	for _, u := range g.updates {
		if u.deadline > u.at {
			g.Deadline = max(g.Deadline, u.deadline)
		}
	}
	g.End, g.EndWhy = g.Deadline, "deadline"
	g.Ended = g.Deadline
	for _, e := range g.ends {
		if !e.watcher && e.at < g.Ended {
			g.Ended = max(e.at, g.Start)
		}
		if e.at < g.acted || e.watcher && g.read {
			// It had not read that end yet, or recorded when it did.
			continue
		}
		if e.at < g.End {
			g.End, g.EndWhy = max(e.at, g.Start), e.why
		}
	}
	if g.EndWhy == "deadline" && g.death > 0 {
		if dead := max(g.death, g.last, g.acted, g.Start); dead < g.End {
			g.End, g.EndWhy = dead, "killed"
		}
	}
}
