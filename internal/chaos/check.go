package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leaseside/leaseside/fence"
)

// Checkers, by the name violations carry.
const (
	CheckIntervals = "intervals"
	CheckRegister  = "register"
	CheckTokens    = "tokens"
	CheckLinear    = "linearizable"
	CheckLiveness  = "liveness"
	CheckCrash     = "crash"
	CheckSemaphore = "semaphore"
)

// Violation is something a checker found that must not happen.
type Violation struct {
	Checker string `json:"checker"`
	Name    string `json:"name,omitempty"`
	Message string `json:"message"`
	// At is the instant of the violation (CLOCK_BOOTTIME ns); A and B the
	// grants involved, when two are.
	At int64  `json:"t"`
	A  *Grant `json:"a,omitempty"`
	B  *Grant `json:"b,omitempty"`
	// Faults lists the faults active at At.
	Faults []string `json:"faults,omitempty"`
}

// Describe renders a violation with both intervals and tokens, relative
// to the run's start, and the faults active then.
func (v *Violation) Describe(start int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s at %s", v.Checker, v.Message, rel(v.At, start))
	for _, g := range []*Grant{v.A, v.B} {
		if g != nil {
			fmt.Fprintf(&b, "\n  %s: [%s, %s) ended by %s", g, rel(g.Start, start), rel(g.End, start), g.EndWhy)
		}
	}
	if len(v.Faults) > 0 {
		fmt.Fprintf(&b, "\n  faults active: %s", strings.Join(v.Faults, "; "))
	} else {
		fmt.Fprintf(&b, "\n  no fault active")
	}
	return b.String()
}

// rel renders an instant as seconds since start.
func rel(at, start int64) string {
	return fmt.Sprintf("%+.3fs", time.Duration(at-start).Seconds())
}

// activeFaults describes the faults active at an instant.
func activeFaults(h *History, at int64) []string {
	var out []string
	for _, f := range h.Faults {
		if f.Skipped == "" && f.Start <= at && (f.End == 0 || at <= f.End) {
			s := string(f.Kind)
			if f.Target != "" {
				s += " " + f.Target
			}
			if f.Leader {
				s += " (leader)"
			}
			out = append(out, fmt.Sprintf("%s [%s, %s]", s, rel(f.Start, h.Start), rel(f.End, h.Start)))
		}
	}
	return out
}

// checkIntervals finds two holders of one name whose believed intervals
// overlap, whatever their tokens: two holders told one token (chaos
// finding F7) break the promise as much as two tokens do, and the fenced
// register cannot tell them apart. Spells of one holder in one grant
// are one belief.
func checkIntervals(gs []*Grant) []Violation {
	var vs []Violation
	var active []*Grant // of the current name, still believed at the sweep's instant
	name := ""
	for _, g := range gs {
		if g.Name != name {
			name, active = g.Name, nil
		}
		if g.End <= g.Start {
			continue // read after its deadline: never believed
		}
		kept := active[:0]
		for _, a := range active {
			if a.End > g.Start {
				kept = append(kept, a)
			}
		}
		active = kept
		for _, a := range active {
			if a.Token != g.Token || a.Holder != g.Holder {
				vs = append(vs, Violation{Checker: CheckIntervals, Name: g.Name, At: g.Start, A: a, B: g,
					Message: fmt.Sprintf("%s believed it held %s (token %d) when %s read its grant (token %d)", a.Holder, g.Name, a.Token, g.Holder, g.Token)})
			}
		}
		active = append(active, g)
	}
	return vs
}

// checkRegister checks the fenced register's history: fence.CheckHistory
// per name, and no write accepted from a holder after the end of its
// belief that the holder itself recorded (release, close, exit, gone, a
// failed check) or its deadline (Grant.Ended): every accepted write, pre
// and post a check. A holder writes nothing after it says it let go. An
// end told only to the suite's watcher (a lost) is not such an end: the
// holder may not have read it; a write after it widens the holder's
// interval instead (grants), which the intervals checker sees.
func checkRegister(h *History, gs []*Grant) []Violation {
	var vs []Violation
	regs := registerHistories(h)
	names := make([]string, 0, len(regs))
	for n := range regs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := fence.CheckHistory(regs[n]); err != nil {
			vs = append(vs, Violation{Checker: CheckRegister, Name: n, Message: err.Error()})
		}
	}
	byOp := map[string]*Grant{}
	for _, g := range gs {
		for _, op := range g.Ops {
			byOp[op] = g
		}
	}
	for _, w := range h.Writes {
		if !w.Accepted {
			continue
		}
		g := byOp[w.Holder]
		if g == nil {
			vs = append(vs, Violation{Checker: CheckRegister, Name: w.Name, At: w.At,
				Message: fmt.Sprintf("a write with token %d by %s, which the history shows no grant of", w.Token, w.Holder)})
			continue
		}
		if w.At > g.Ended {
			vs = append(vs, Violation{Checker: CheckRegister, Name: w.Name, At: w.At, A: g,
				Message: fmt.Sprintf("register accepted a %s-check write with token %d from %s %s after the end of its belief it recorded or its deadline",
					w.Kind, w.Token, g.Holder, time.Duration(w.At-g.Ended))})
		}
	}
	return vs
}

// registerHistories are the fenced registers' own histories, by name:
// the writes that passed the deadline check and met the token guard.
func registerHistories(h *History) map[string][]fence.Write {
	regs := map[string][]fence.Write{}
	for _, w := range h.Writes {
		if w.Seq > 0 {
			regs[w.Name] = append(regs[w.Name], fence.Write{Seq: w.Seq, Writer: w.Holder, Token: w.Token, Accepted: w.Accepted})
		}
	}
	return regs
}

// checkTokens checks that tokens strictly increase per name: no token
// granted to two holders, and a grant read before another was asked for
// has the lower token.
func checkTokens(gs []*Grant, probes []Probe) []Violation {
	var vs []Violation
	byName := map[string][]*Grant{}
	for _, g := range gs {
		byName[g.Name] = append(byName[g.Name], g)
	}
	for _, p := range probes {
		if p.Err == "" {
			byName[p.Name] = append(byName[p.Name], &Grant{Name: p.Name, Token: p.Token, Holder: "probe " + p.Sidecar, Op: "probe", Call: p.Call, Start: p.Return})
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		list := byName[n]
		seen := map[uint64]*Grant{}
		for _, g := range list {
			if o := seen[g.Token]; o != nil && o.Holder != g.Holder {
				vs = append(vs, Violation{Checker: CheckTokens, Name: n, At: g.Start, A: o, B: g,
					Message: fmt.Sprintf("token %d granted to %s and to %s", g.Token, o.Holder, g.Holder)})
			}
			seen[g.Token] = g
		}
		// In the order of the reads; for each grant, in the order of the
		// calls, the highest token read before it was asked for.
		byStart := slices.Clone(list)
		slices.SortFunc(byStart, func(a, b *Grant) int { return cmp.Compare(a.Start, b.Start) })
		byCall := slices.Clone(list)
		slices.SortFunc(byCall, func(a, b *Grant) int { return cmp.Compare(a.Call, b.Call) })
		var top *Grant
		i := 0
		for _, g := range byCall {
			for ; i < len(byStart) && byStart[i].Start < g.Call; i++ {
				if top == nil || byStart[i].Token > top.Token {
					top = byStart[i]
				}
			}
			if top != nil && top != g && (top.Token > g.Token || top.Token == g.Token && top.Holder != g.Holder) {
				vs = append(vs, Violation{Checker: CheckTokens, Name: n, At: g.Start, A: top, B: g,
					Message: fmt.Sprintf("token %d granted after token %d was read", g.Token, top.Token)})
			}
		}
	}
	return vs
}

// checkCrashes reports the crashes and races of product processes and
// of the clients (with the runs they start).
func checkCrashes(h *History) []Violation {
	var vs []Violation
	for _, c := range h.Crashes {
		vs = append(vs, Violation{Checker: CheckCrash, At: c.At, Message: c.Process + ": " + c.Line})
	}
	return vs
}

// checkSemaphore finds instants at which more than limit holders believed
// they held the semaphore (gs are its grants): each time the count goes
// above the limit, one violation naming the grant that took it there and
// one held before it.
func checkSemaphore(gs []*Grant, limit int) []Violation {
	type edge struct {
		at int64
		d  int // +1 a holder starts believing, -1 one stops
		g  *Grant
	}
	var es []edge
	for _, g := range gs {
		if g.End > g.Start {
			es = append(es, edge{g.Start, 1, g}, edge{g.End, -1, g})
		}
	}
	// An end at the instant another starts comes first: that is a handoff.
	slices.SortFunc(es, func(a, b edge) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.d, b.d)) })
	var vs []Violation
	held := map[*Grant]bool{}
	over := false
	for _, e := range es {
		if e.d < 0 {
			delete(held, e.g)
			over = over && len(held) > limit
			continue
		}
		held[e.g] = true
		if len(held) > limit && !over {
			over = true
			var other *Grant
			var tokens []string
			for h := range held {
				tokens = append(tokens, strconv.FormatUint(h.Token, 10))
				if h != e.g && (other == nil || h.Start < other.Start) {
					other = h
				}
			}
			slices.Sort(tokens)
			vs = append(vs, Violation{Checker: CheckSemaphore, Name: e.g.Name, At: e.at, A: other, B: e.g,
				Message: fmt.Sprintf("%d holders of semaphore %s (limit %d) believed they held it at once: tokens %s", len(held), e.g.Name, limit, strings.Join(tokens, ", "))})
		}
	}
	return vs
}
