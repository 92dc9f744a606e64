package chaos

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/leaseside/leaseside/internal/chaos/workload"
	"github.com/leaseside/leaseside/ipc"
)

// The linearizability check of each name's acquires and releases, with
// porcupine, against a model of one lease: free, or held by a token (and
// an owner, who may acquire what it holds again and get the same grant),
// with the highest token granted so far. What the model allows:
//
//   - an acquire granted token T: T is above every token granted before
//     it, or T is the grant its owner holds already. A holder's lease may
//     lapse at any moment without an operation (its term ran out, its
//     owner died), so a grant is never refused by the model;
//   - an acquire refused with lease_held naming token H: H is the token
//     held, so a refusal naming a superseded or released token is not;
//   - a release of T that succeeded: T was held, and is free after it.
//
// An operation whose outcome its client does not know (a timeout, a
// daemon that went away, a process killed while it waited) may have
// happened or not, and if it was an acquire, with a token nobody read.
// Such operations are left out of the history, where they would be
// concurrent with everything after them and make the search explode, and
// the model accounts for what they may have done instead: a refusal that
// names a token no answered acquire returned (an unread grant) is allowed
// when that token is above every token granted before it, and holds the
// lease from then on. A separate check (checkUnreadGrants) finds, for
// every unread token, its own acquire of unknown outcome that was in
// flight when that grant must have been made: after the grant of the
// highest token read below it was asked for, before the first refusal
// naming it returned. A refusal from `run` (exit 75, no token named) is
// always allowed: an unread grant may hold the lease.

// ambiguousWindow bounds how long after its client gave up on it (or
// after its call, when the client was killed) an operation of unknown
// outcome may still take effect: longer than any fault of a run and an
// election after it, which is when a grantor applies or drops what it
// had been asked.
const ambiguousWindow = 30 * time.Second

// leaseState is the model's state of one lease.
type leaseState struct {
	holder uint64 // 0: free
	owner  string
	max    uint64 // the highest token granted so far
}

// linInput is an operation: an acquire by owner, or a release of token.
type linInput struct {
	release bool
	owner   string
	token   uint64
	op      string // the record's Op, for messages
}

// Outcomes of an operation.
const (
	outOK         = "ok"
	outHeld       = "held"
	outHeldUnread = "held by an unread grant"
	outHeldNoName = "held (no token given)"
	outNoop       = "no-op"
)

// linOutput is what the operation returned.
type linOutput struct {
	status string
	token  uint64 // granted (acquire ok) or named holder (held)
}

var leaseModel = porcupine.Model{
	Init: func() any { return leaseState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(leaseState), input.(linInput), output.(linOutput)
		if in.release {
			if out.status != outOK {
				return true, s
			}
			return s.holder == in.token, leaseState{max: s.max}
		}
		switch out.status {
		case outOK:
			if out.token == s.holder && in.owner == s.owner {
				return true, s
			}
			return out.token > s.max, leaseState{holder: out.token, owner: in.owner, max: out.token}
		case outHeld:
			return out.token == s.holder, s
		case outHeldUnread:
			if out.token == s.holder {
				return true, s
			}
			return out.token > s.max, leaseState{holder: out.token, max: out.token}
		}
		return true, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		what := "acquire by " + in.owner
		if in.release {
			what = fmt.Sprintf("release of %d", in.token)
		}
		switch {
		case out.status == outOK && !in.release, out.status == outHeld, out.status == outHeldUnread:
			return fmt.Sprintf("%s -> %s %d (%s)", what, out.status, out.token, in.op)
		}
		return fmt.Sprintf("%s -> %s (%s)", what, out.status, in.op)
	},
	DescribeState: func(state any) string {
		s := state.(leaseState)
		if s.holder == 0 {
			return fmt.Sprintf("free (max %d)", s.max)
		}
		return fmt.Sprintf("held by %d (max %d)", s.holder, s.max)
	},
}

// linHistory is one name's operations for porcupine, and the acquires
// of unknown outcome left out of them.
type linHistory struct {
	ops     []porcupine.Operation
	unknown []inFlight
}

// inFlight is when an acquire of unknown outcome may have taken effect.
type inFlight struct {
	op        string
	from, til int64
}

// linOps builds each name's history from the records.
func linOps(h *History) map[string]*linHistory {
	type pending struct {
		name string
		in   linInput
		call int64
	}
	calls := map[string]*pending{}
	var order []string
	done := map[string]porcupine.Operation{}
	unknown := map[string]int64{} // ops whose outcome their client did not learn: when it gave up
	answer := func(key string, p *pending, out linOutput, at int64) {
		done[key] = porcupine.Operation{Input: p.in, Call: p.call, Output: out, Return: at}
	}
	for _, r := range h.Records {
		switch r.Kind {
		case workload.KindAcquire:
			calls[r.Op] = &pending{name: r.Name, in: linInput{owner: incarnationOf(r.Op), op: r.Op}, call: r.At}
			order = append(order, r.Op)
		case workload.KindRun:
			calls[r.Op] = &pending{name: r.Name, in: linInput{owner: "run " + r.Op, op: r.Op}, call: r.At}
			order = append(order, r.Op)
		case workload.KindRelease:
			// A grant is released at most once: "rel OP" names it.
			calls["rel "+r.Op] = &pending{name: r.Name, in: linInput{release: true, token: r.Token, op: r.Op}, call: r.At}
			order = append(order, "rel "+r.Op)
		case workload.KindAcquired, workload.KindChild:
			if p := calls[r.Op]; p != nil {
				if _, ok := done[r.Op]; !ok {
					answer(r.Op, p, linOutput{status: outOK, token: r.Token}, r.At)
				}
			}
		case workload.KindAcquireFailed:
			if p := calls[r.Op]; p != nil {
				switch {
				case r.Code == ipc.CodeLeaseHeld && r.Holder != 0:
					answer(r.Op, p, linOutput{status: outHeld, token: r.Holder}, r.At)
				case workload.Ambiguous(r.Code):
					unknown[r.Op] = r.At
				default:
					answer(r.Op, p, linOutput{status: outNoop}, r.At)
				}
			}
		case workload.KindRunExit:
			if p := calls[r.Op]; p != nil {
				if _, ok := done[r.Op]; !ok {
					if r.Exit == 75 {
						answer(r.Op, p, linOutput{status: outHeldNoName}, r.At)
					} else {
						unknown[r.Op] = r.At
					}
				}
			}
		case workload.KindReleased, workload.KindReleaseFailed:
			key := "rel " + r.Op
			p := calls[key]
			switch {
			case p == nil:
			case r.Kind == workload.KindReleased:
				answer(key, p, linOutput{status: outOK}, r.At)
			case workload.Ambiguous(r.Code):
				unknown[key] = r.At
			default:
				answer(key, p, linOutput{status: outNoop}, r.At)
			}
		}
	}
	// Tokens some answered acquire returned, per name: a refusal naming
	// any other names an unread grant.
	read := map[string]map[uint64]bool{}
	for _, op := range done {
		in, out := op.Input.(linInput), op.Output.(linOutput)
		if !in.release && out.status == outOK {
			name := calls[in.op].name
			if read[name] == nil {
				read[name] = map[uint64]bool{}
			}
			read[name][out.token] = true
		}
	}
	hs := map[string]*linHistory{}
	for _, key := range order {
		p := calls[key]
		lh := hs[p.name]
		if lh == nil {
			lh = &linHistory{}
			hs[p.name] = lh
		}
		op, ok := done[key]
		gaveUp, unsure := unknown[key]
		if !ok || unsure {
			// Answered without an outcome, or cut short (the process was
			// killed): left out.
			if !unsure {
				gaveUp = p.call
			}
			if !p.in.release {
				lh.unknown = append(lh.unknown, inFlight{op: p.in.op, from: p.call, til: gaveUp + int64(ambiguousWindow)})
			}
			continue
		}
		if out := op.Output.(linOutput); out.status == outHeld && !read[p.name][out.token] {
			op.Output = linOutput{status: outHeldUnread, token: out.token}
		}
		op.Metadata = p.in.op
		lh.ops = append(lh.ops, op)
	}
	return hs
}

// checkLinear checks each name's history, each for at most timeout, and
// writes a porcupine visualization of a history that is not linearizable
// into dir. It returns the violations and the names whose check ran out
// of time. Names in skip (a semaphore: the model is of one holder) are
// not checked.
func checkLinear(h *History, dir string, timeout time.Duration, skip ...string) ([]Violation, []string) {
	var vs []Violation
	var undecided []string
	all := linOps(h)
	for _, n := range skip {
		delete(all, n)
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		lh := all[n]
		vs = append(vs, checkUnreadGrants(h, n, lh)...)
		switch porcupine.CheckOperationsTimeout(leaseModel, lh.ops, timeout) {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			undecided = append(undecided, n)
			continue
		}
		res, info := porcupine.CheckOperationsVerbose(leaseModel, lh.ops, timeout)
		if res != porcupine.Illegal {
			continue
		}
		v := Violation{Checker: CheckLinear, Name: n}
		file := filepath.Join(dir, "linearizability-"+strings.ReplaceAll(n, "/", "_")+".html")
		if f, err := os.Create(file); err == nil {
			porcupine.Visualize(leaseModel, info, f)
			f.Close()
		}
		// The culprit: of the operations the longest partial
		// linearization leaves out, the one that returned first.
		var longest []porcupine.Operation
		for _, part := range info.PartialLinearizationsOperations() {
			for _, l := range part {
				if len(l) > len(longest) {
					longest = l
				}
			}
		}
		in := map[string]bool{}
		for _, o := range longest {
			in[o.Metadata.(string)+fmt.Sprint(o.Call)] = true
		}
		var out []porcupine.Operation
		for _, o := range lh.ops {
			if !in[o.Metadata.(string)+fmt.Sprint(o.Call)] {
				out = append(out, o)
			}
		}
		slices.SortFunc(out, func(a, b porcupine.Operation) int { return cmp.Compare(a.Return, b.Return) })
		v.Message = fmt.Sprintf("the acquires and releases of %s are not linearizable (%d operations; see %s)", n, len(lh.ops), filepath.Base(file))
		if len(out) > 0 {
			o := out[0]
			v.At = o.Call
			v.Message += fmt.Sprintf(": no order explains %s, called at %s, after %d operations in order (last state: %s)",
				leaseModel.DescribeOperation(o.Input, o.Output), rel(o.Call, h.Start), len(longest), describeAfter(longest))
		}
		vs = append(vs, v)
	}
	return vs, undecided
}

// checkUnreadGrants checks that each token that refusals name but no
// answered acquire returned (an unread grant) has an acquire of unknown
// outcome of its own that was in flight when the grant must have been
// made: after the acquire that read the highest token below it was
// called (tokens grow), and before the first refusal naming it returned.
// Tokens are matched to acquires earliest deadline first.
func checkUnreadGrants(h *History, name string, lh *linHistory) []Violation {
	type unread struct {
		token     uint64
		from, til int64 // when its grant must have been made
		who       string
	}
	byToken := map[uint64]*unread{}
	type readTok struct {
		token uint64
		call  int64
	}
	var read []readTok
	for _, o := range lh.ops {
		in, out := o.Input.(linInput), o.Output.(linOutput)
		switch {
		case !in.release && out.status == outOK:
			read = append(read, readTok{out.token, o.Call})
		case out.status == outHeldUnread:
			if u := byToken[out.token]; u == nil || o.Return < u.til {
				byToken[out.token] = &unread{token: out.token, til: o.Return, who: in.owner + " (" + in.op + ")"}
			}
		}
	}
	var us []*unread
	for _, u := range byToken {
		for _, r := range read {
			if r.token < u.token {
				u.from = max(u.from, r.call)
			}
		}
		us = append(us, u)
	}
	slices.SortFunc(us, func(a, b *unread) int { return cmp.Or(cmp.Compare(a.til, b.til), cmp.Compare(a.token, b.token)) })
	used := make([]bool, len(lh.unknown))
	var vs []Violation
	for _, u := range us {
		best := -1
		for i, f := range lh.unknown {
			if !used[i] && f.from < u.til && f.til > u.from && (best < 0 || f.til < lh.unknown[best].til) {
				best = i
			}
		}
		if best >= 0 {
			used[best] = true
			continue
		}
		vs = append(vs, Violation{Checker: CheckLinear, Name: name, At: u.til,
			Message: fmt.Sprintf("%s was refused as held by token %d, which no acquire of %s was answered with, and no acquire of unknown outcome was in flight to have been granted it (between %s and %s)",
				u.who, u.token, name, rel(u.from, h.Start), rel(u.til, h.Start))})
	}
	return vs
}

// describeAfter renders the model's state after a sequence of operations.
func describeAfter(ops []porcupine.Operation) string {
	state := leaseModel.Init()
	for _, o := range ops {
		_, state = leaseModel.Step(state, o.Input, o.Output)
	}
	return leaseModel.DescribeState(state)
}
