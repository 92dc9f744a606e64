package grantor

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// fullAcquire has every field of acquireCmd that the log carries set.
func fullAcquire(session string) acquireCmd {
	return acquireCmd{
		ID:    requestID{Session: session, Seq: 300, FirstUnacked: 7, AlsoReceived: []uint64{8, 1 << 40}},
		Lease: "jobs/render-42 ✓", Owner: "pid:4242", TTL: 15 * time.Second,
		Identity: "sidecar/host-1", Limit: 1000, MaxHolders: 3, Value: "a:1\x00b",
		LockDelay: -time.Millisecond, Final: true, Shared: true,
	}
}

// fullRelease has every field of releaseCmd that the log carries set.
func fullRelease() releaseCmd {
	next := fullAcquire("waiter")
	return releaseCmd{
		ID:    requestID{Session: "s", Seq: 1 << 63, FirstUnacked: 1, AlsoReceived: []uint64{2}},
		Lease: "jobs/render-42 ✓", Owner: "pid:4242", Token: 1<<64 - 1, Identity: "sidecar/host-1",
		Next: &next, OwnerEnded: true, Lapsed: true,
	}
}

// unsetFields names the exported fields of v (a struct, through
// pointers and nested structs) that hold their zero value.
func unsetFields(v reflect.Value, prefix string) []string {
	var unset []string
	for i := range v.NumField() {
		f, ft := v.Field(i), v.Type().Field(i)
		if !ft.IsExported() {
			continue
		}
		if f.Kind() == reflect.Pointer && !f.IsNil() {
			f = f.Elem()
		}
		if f.Kind() == reflect.Struct {
			unset = append(unset, unsetFields(f, prefix+ft.Name+".")...)
			continue
		}
		if f.IsZero() {
			unset = append(unset, prefix+ft.Name)
		}
	}
	return unset
}

// Rule: a binary Acquire or Release decodes to exactly what was encoded,
// every field of the log's commands included. A field added to acquireCmd
// or releaseCmd fails this test until the binary layout (a new type)
// carries it.
func TestBinaryCommandsDecodeAsEncoded(t *testing.T) {
	acq, rel := fullAcquire("s"), fullRelease()
	for name, v := range map[string]any{"acquireCmd": acq, "releaseCmd": rel} {
		if unset := unsetFields(reflect.ValueOf(v), ""); len(unset) > 0 {
			t.Fatalf("%s fields not set in this test (does the binary layout carry them?): %v", name, unset)
		}
	}
	bare := releaseCmd{ID: requestID{Session: "s", Seq: 1}, Lease: "x", Owner: "o", Token: 9}
	for _, tc := range []struct {
		name  string
		entry []byte
		want  any
		typ   cmdType
	}{
		{"acquire, every field", acquireEntry(acq, newestCmd), &acq, cmdAcquireB},
		{"acquire, zero values", acquireEntry(acquireCmd{ID: requestID{Session: "s", Seq: 1}}, newestCmd), &acquireCmd{ID: requestID{Session: "s", Seq: 1}}, cmdAcquireB},
		{"release, every field and next", releaseEntry(rel, newestCmd), &rel, cmdReleaseB},
		{"release without next", releaseEntry(bare, newestCmd), &bare, cmdReleaseB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typ, body, err := decodeCmd(tc.entry)
			if err != nil || typ != tc.typ {
				t.Fatalf("decodeCmd: %v %v", typ, err)
			}
			if !reflect.DeepEqual(body, tc.want) {
				t.Fatalf("decoded %+v\nwant    %+v", body, tc.want)
			}
		})
	}
}

// Rule: the binary types apply as the JSON types they encode: the same
// lock cycles, handoffs, refusals and delays, fed to one FSM as JSON
// entries and to another as binary ones, give the same answers and the
// same snapshot; a third FSM restored from that snapshot and given the
// rest of the log as binary entries ends in the same state as the JSON one.
func TestBinaryEntriesApplyAsTheirJSONTypes(t *testing.T) {
	type step struct {
		acq *acquireCmd
		rel *releaseCmd
	}
	a := func(s string, seq uint64, lease string) *acquireCmd {
		c := acquireCmd{ID: requestID{Session: s, Seq: seq}, Lease: lease, Owner: "o", TTL: 10 * time.Second, Identity: "sidecar/" + s, Final: true}
		return &c
	}
	shared := a("r1", 1, "rw")
	shared.Shared = true
	shared2 := a("r2", 1, "rw")
	shared2.Shared = true
	sem := a("s1", 1, "sem")
	sem.MaxHolders, sem.Value = 2, "v1"
	delayed := a("d", 1, "dl")
	delayed.LockDelay = time.Minute
	waiter := *a("w", 2, "x")
	waiter.Final = false
	steps := []step{
		{acq: a("h", 1, "x")}, // granted token 1
		{acq: a("w", 1, "x")}, // refused: held
		{rel: &releaseCmd{ID: requestID{Session: "h", Seq: 2}, Lease: "x", Owner: "o", Token: 1, Identity: "sidecar/h", Next: &waiter}},
		{acq: shared}, {acq: shared2}, {acq: sem}, {acq: delayed},
		{rel: &releaseCmd{ID: requestID{Session: "d", Seq: 2}, Lease: "dl", Owner: "o", Token: 6, Identity: "sidecar/d", OwnerEnded: true}},
		{acq: a("e", 1, "dl")}, // refused: delayed
		{rel: &releaseCmd{ID: requestID{Session: "r1", Seq: 2, FirstUnacked: 2}, Lease: "rw", Owner: "o", Token: 3, Identity: "sidecar/r1"}},
		{acq: a("h", 3, "y")},
		{rel: &releaseCmd{ID: requestID{Session: "h", Seq: 4, FirstUnacked: 3, AlsoReceived: []uint64{1}}, Lease: "y", Owner: "o", Token: 7, Identity: "sidecar/h", Lapsed: true, OwnerEnded: true}},
		{rel: &releaseCmd{ID: requestID{Session: "h", Seq: 2}, Lease: "x", Owner: "o", Token: 1, Identity: "sidecar/h"}}, // a retry
	}
	entries := func(allowed cmdType) [][]byte {
		var out [][]byte
		for _, s := range steps {
			if s.acq != nil {
				out = append(out, acquireEntry(*s.acq, allowed))
			} else {
				out = append(out, releaseEntry(*s.rel, allowed))
			}
		}
		return out
	}
	jsonLog, binLog := entries(binaryCmd-1), entries(newestCmd)
	run := func(f *fsm, log [][]byte, from int) []any {
		var res []any
		for i := from; i < len(log); i++ {
			res = append(res, f.Apply(rlog{uint64(i + 1), log[i]}.log()))
		}
		return res
	}
	for i := range jsonLog {
		if jt, bt := cmdType(jsonLog[i][0]), cmdType(binLog[i][0]); bt != cmdAcquireB && bt != cmdReleaseB || jt >= binaryCmd {
			t.Fatalf("entry %d: JSON log has %v, binary log %v", i, jt, bt)
		}
	}
	fj, fb := newFSM(), newFSM()
	rj, rb := run(fj, jsonLog, 0), run(fb, binLog, 0)
	if !reflect.DeepEqual(rj, rb) {
		t.Fatalf("answers differ:\nJSON   %s\nbinary %s", describeAll(rj), describeAll(rb))
	}
	if g := rj[2].(*releaseResult); !g.Released || g.Next == nil || !g.Next.Res.(*acquireResult).Granted {
		t.Fatalf("the release did not hand x to the waiter: %+v", g)
	}
	sj, sb := persist(t, fj), persist(t, fb)
	if !bytes.Equal(sj, sb) {
		t.Fatalf("snapshots differ:\nJSON   %s\nbinary %s", sj, sb)
	}

	// Restore the state after half the log, replay the rest as binary.
	half := len(binLog) / 2
	fh := newFSM()
	run(fh, jsonLog[:half], 0)
	fr := newFSM()
	if err := fr.Restore(nopCloser{bytes.NewReader(persist(t, fh))}); err != nil {
		t.Fatal(err)
	}
	if rr := run(fr, binLog, half); !reflect.DeepEqual(rr, rj[half:]) {
		t.Fatalf("answers after restore differ:\nJSON   %s\nbinary %s", describeAll(rj[half:]), describeAll(rr))
	}
	if sr := persist(t, fr); !bytes.Equal(sr, sj) {
		t.Fatalf("snapshot after restore and replay differs:\n%s\n%s", sr, sj)
	}
}

func describeAll(rs []any) string {
	var b bytes.Buffer
	for _, r := range rs {
		switch r := r.(type) {
		case *releaseResult:
			b.WriteString("release{" + reflect.ValueOf(*r).String())
			if r.Next != nil {
				b.WriteString(" next " + reflect.ValueOf(r.Next.Res).Elem().String())
			}
			b.WriteString("} ")
		default:
			b.WriteString(reflect.ValueOf(r).String() + " ")
		}
	}
	return b.String()
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// Rule: a binary body must decode to exactly its bytes; anything else (a
// body cut short anywhere, a byte after it, an unknown flag, a count
// longer than the body) is an entry the FSM cannot decode, and it halts
// there rather than apply a guess.
func TestBinaryBodyMustBeExact(t *testing.T) {
	good := releaseEntry(fullRelease(), newestCmd)
	bad := map[string][]byte{
		"byte after the body": append(append([]byte{}, good...), 0),
		"unknown release flag": func() []byte {
			c := fullRelease()
			c.Next = nil
			e := releaseEntry(c, newestCmd)
			e[len(e)-1] |= 0x80
			return e
		}(),
		"unknown acquire flag": func() []byte {
			e := acquireEntry(acquireCmd{ID: requestID{Session: "s", Seq: 1}}, newestCmd)
			e[len(e)-1] = 4
			return e
		}(),
		"also_received count beyond the body": append([]byte{byte(cmdAcquireB), 1, 's', 1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}, 0),
		"varint too long":                     append([]byte{byte(cmdAcquireB), 1, 's'}, bytes.Repeat([]byte{0xff}, 11)...),
	}
	for n := 1; n < len(good); n++ {
		bad[fmt.Sprintf("cut at %d of %d", n, len(good))] = good[:n]
	}
	for name, e := range bad {
		if _, body, err := decodeCmd(e); err == nil {
			t.Errorf("%s: decoded %+v", name, body)
		}
	}
	f := newFSM()
	res := f.Apply(rlog{1, good[:len(good)-1]}.log())
	var h *HaltError
	if err, _ := res.(error); !errors.As(err, &h) || h.Unknown {
		t.Fatalf("a cut binary entry: %v", res)
	}
	if res := f.Apply(rlog{2, good}.log()); !errors.As(res.(error), &h) {
		t.Fatalf("after halting, the FSM applied: %v", res)
	}
}

type configFuture struct{ c raft.Configuration }

func (configFuture) Error() error                        { return nil }
func (configFuture) Index() uint64                       { return 1 }
func (f configFuture) Configuration() raft.Configuration { return f.c }

// Rule: a leader writes the binary types only when every server of the
// configuration registered that it applies them; with one that did not
// (an older grantor in a rolling upgrade), Acquires and Releases are JSON
// of the types it applies.
func TestBinaryTypesOnlyWhenEveryServerAppliesThem(t *testing.T) {
	f := newTestFSM()
	f.apply(cmdRegisterNode, registerNodeCmd{NodeID: "new", RPCAddr: "h:1", MaxCmd: newestCmd})
	f.apply(cmdRegisterNode, registerNodeCmd{NodeID: "old", RPCAddr: "h:2", MaxCmd: cmdEndGrant2})
	both := configFuture{raft.Configuration{Servers: []raft.Server{{ID: "new"}, {ID: "old"}}}}
	alone := configFuture{raft.Configuration{Servers: []raft.Server{{ID: "new"}}}}
	c := fullAcquire("s")
	r := fullRelease()
	if got := allowedCmd(both, f.fsm); got != cmdEndGrant2 {
		t.Fatalf("allowed with an older server: %v", got)
	}
	if e := acquireEntry(c, allowedCmd(both, f.fsm)); cmdType(e[0]) != cmdAcquire9 {
		t.Errorf("acquire with an older server: %v", cmdType(e[0]))
	}
	if e := releaseEntry(r, allowedCmd(both, f.fsm)); cmdType(e[0]) != cmdRelease7 {
		t.Errorf("release with an older server: %v", cmdType(e[0]))
	}
	if e := acquireEntry(c, allowedCmd(alone, f.fsm)); cmdType(e[0]) != cmdAcquireB {
		t.Errorf("acquire where every server applies it: %v", cmdType(e[0]))
	}
	if e := releaseEntry(r, allowedCmd(alone, f.fsm)); cmdType(e[0]) != cmdReleaseB {
		t.Errorf("release where every server applies it: %v", cmdType(e[0]))
	}
}
