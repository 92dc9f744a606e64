package chaos

import (
	"cmp"
	"fmt"
	"math"
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
// an owner, who may acquire what it holds again and get the same grant).
// What the model allows:
//
//   - an acquire granted token T: T is above every token granted before
//     it, or T is the grant its owner holds already. A holder's lease may
//     lapse at any moment without an operation (its term ran out, its
//     owner died), so a grant is never refused by the model;
//   - an acquire refused with lease_held naming token H: H is the token
//     held (so a refusal naming a superseded or released token is not);
//   - a release of T that succeeded: T was held, and is free after it;
//   - an operation whose outcome the client does not know (a timeout, a
//     daemon that went away, a process killed while it waited) may have
//     happened, with a token nobody read, or not, at any point up to
//     ambiguousWindow after it was last heard of.

// ambiguousWindow bounds how long after its call (or its failure) an
// operation of unknown outcome may take effect: longer than any fault of
// a run plus the longest term, after which a grantor cannot still apply
// an acquire a sidecar gave up on.
const ambiguousWindow = time.Minute

// wild is the holder of a lease granted by an operation whose outcome
// nobody read: its token is unknown, above every token read before.
const wild = math.MaxUint64

// leaseState is the model's state of one lease.
type leaseState struct {
	holder uint64 // 0: free; wild: an unknown token
	owner  string
	max    uint64 // the highest token granted so far (that was read)
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
	outHeldNoName = "held (no token given)"
	outNoop       = "no-op"
	outAmbiguous  = "ambiguous"
)

// linOutput is what the operation returned.
type linOutput struct {
	status string
	token  uint64 // granted (acquire ok) or named holder (held)
}

var leaseModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{leaseState{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(leaseState), input.(linInput), output.(linOutput)
		var next []any
		if in.release {
			freed := leaseState{max: s.max}
			switch out.status {
			case outOK:
				if s.holder == in.token {
					next = append(next, freed)
				}
			case outAmbiguous:
				next = append(next, s)
				if s.holder == in.token {
					next = append(next, freed)
				}
			default:
				next = append(next, s)
			}
			return next
		}
		switch out.status {
		case outOK:
			if out.token > s.max {
				next = append(next, leaseState{holder: out.token, owner: in.owner, max: out.token})
			}
			if out.token == s.holder && in.owner == s.owner {
				next = append(next, s)
			}
		case outHeld:
			if out.token == s.holder {
				next = append(next, s)
			}
			if s.holder == wild && out.token > s.max {
				next = append(next, leaseState{holder: out.token, max: out.token})
			}
		case outHeldNoName:
			if s.holder != 0 {
				next = append(next, s)
			}
		case outAmbiguous:
			next = append(next, s, leaseState{holder: wild, max: s.max})
		default:
			next = append(next, s)
		}
		return next
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		what := "acquire by " + in.owner
		if in.release {
			what = fmt.Sprintf("release of %d", in.token)
		}
		if out.status == outOK && !in.release || out.status == outHeld {
			return fmt.Sprintf("%s -> %s %d (%s)", what, out.status, out.token, in.op)
		}
		return fmt.Sprintf("%s -> %s (%s)", what, out.status, in.op)
	},
	DescribeState: func(state any) string {
		s := state.(leaseState)
		switch s.holder {
		case 0:
			return fmt.Sprintf("free (max %d)", s.max)
		case wild:
			return fmt.Sprintf("held by an unread token (max %d)", s.max)
		}
		return fmt.Sprintf("held by %d (max %d)", s.holder, s.max)
	},
}

// linOps builds each name's operations from the history.
func linOps(h *History) map[string][]porcupine.Operation {
	type pending struct {
		name string
		in   linInput
		call int64
	}
	calls := map[string]*pending{}
	var order []string
	done := map[string]porcupine.Operation{}
	ambiguous := func(p *pending, last int64) porcupine.Operation {
		return porcupine.Operation{Input: p.in, Call: p.call, Output: linOutput{status: outAmbiguous}, Return: last + int64(ambiguousWindow)}
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
					done[r.Op] = porcupine.Operation{Input: p.in, Call: p.call, Output: linOutput{status: outOK, token: r.Token}, Return: r.At}
				}
			}
		case workload.KindAcquireFailed:
			if p := calls[r.Op]; p != nil {
				switch {
				case r.Code == ipc.CodeLeaseHeld && r.Holder != 0:
					done[r.Op] = porcupine.Operation{Input: p.in, Call: p.call, Output: linOutput{status: outHeld, token: r.Holder}, Return: r.At}
				case workload.Ambiguous(r.Code):
					done[r.Op] = ambiguous(p, r.At)
				default:
					done[r.Op] = porcupine.Operation{Input: p.in, Call: p.call, Output: linOutput{status: outNoop}, Return: r.At}
				}
			}
		case workload.KindRunExit:
			if p := calls[r.Op]; p != nil {
				if _, ok := done[r.Op]; !ok {
					if r.Exit == 75 {
						done[r.Op] = porcupine.Operation{Input: p.in, Call: p.call, Output: linOutput{status: outHeldNoName}, Return: r.At}
					} else {
						done[r.Op] = ambiguous(p, r.At)
					}
				}
			}
		case workload.KindReleased, workload.KindReleaseFailed:
			key := "rel " + r.Op
			p := calls[key]
			if p == nil {
				continue
			}
			out := linOutput{status: outOK}
			if r.Kind == workload.KindReleaseFailed {
				out.status = outNoop
				if workload.Ambiguous(r.Code) {
					done[key] = ambiguous(p, r.At)
					continue
				}
			}
			done[key] = porcupine.Operation{Input: p.in, Call: p.call, Output: out, Return: r.At}
		}
	}
	ops := map[string][]porcupine.Operation{}
	for _, key := range order {
		p := calls[key]
		op, ok := done[key]
		if !ok {
			op = ambiguous(p, p.call) // cut short: the process was killed
		}
		op.ClientId = 0
		op.Metadata = p.in.op
		ops[p.name] = append(ops[p.name], op)
	}
	return ops
}

// checkLinear checks each name's history, each for at most timeout, and
// writes a porcupine visualization of a history that is not linearizable
// into dir. It returns the violations and the names whose check ran out
// of time.
func checkLinear(h *History, dir string, timeout time.Duration) ([]Violation, []string) {
	model := leaseModel.ToModel()
	var vs []Violation
	var unknown []string
	all := linOps(h)
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		ops := all[n]
		switch porcupine.CheckOperationsTimeout(model, ops, timeout) {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			unknown = append(unknown, n)
			continue
		}
		res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
		if res != porcupine.Illegal {
			continue
		}
		v := Violation{Checker: CheckLinear, Name: n}
		file := filepath.Join(dir, "linearizability-"+strings.ReplaceAll(n, "/", "_")+".html")
		if f, err := os.Create(file); err == nil {
			porcupine.Visualize(model, info, f)
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
		for _, o := range ops {
			if !in[o.Metadata.(string)+fmt.Sprint(o.Call)] {
				out = append(out, o)
			}
		}
		slices.SortFunc(out, func(a, b porcupine.Operation) int { return cmp.Compare(a.Return, b.Return) })
		v.Message = fmt.Sprintf("the acquires and releases of %s are not linearizable (%d operations; see %s)", n, len(ops), filepath.Base(file))
		if len(out) > 0 {
			o := out[0]
			v.At = o.Call
			v.Message += fmt.Sprintf(": no order explains %s, called at %s, after %d operations in order (last state: %s)",
				leaseModel.DescribeOperation(o.Input, o.Output), rel(o.Call, h.Start), len(longest), describeAfter(longest))
		}
		vs = append(vs, v)
	}
	return vs, unknown
}

// describeAfter renders the model's states after a sequence of
// operations.
func describeAfter(ops []porcupine.Operation) string {
	states := leaseModel.Init()
	for _, o := range ops {
		var next []any
		for _, s := range states {
			next = append(next, leaseModel.Step(s, o.Input, o.Output)...)
		}
		states = next
	}
	var ss []string
	for _, s := range states {
		ss = append(ss, leaseModel.DescribeState(s))
	}
	slices.Sort(ss)
	return strings.Join(slices.Compact(ss), " or ")
}
