package chaos

import (
	"bufio"
	"encoding/json"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/internal/chaos/workload"
)

// The register refuses a write past its writer's deadline ("late") and
// one with a token below the highest accepted ("stale"), records every
// write in order, and hangs up on a line that is not a write.
func TestRegister(t *testing.T) {
	rec := &recorder{}
	path := filepath.Join(t.TempDir(), "register.sock")
	reg, err := newRegister(path, rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	r := bufio.NewReader(c)
	later := boottime() + int64(time.Hour)
	steps := []struct {
		w      workload.Write
		ok     bool
		reason string
	}{
		{workload.Write{Name: "x", Holder: "b.1.1", Token: 2, Deadline: later, Kind: "pre"}, true, ""},
		{workload.Write{Name: "x", Holder: "a.1.1", Token: 1, Deadline: later, Kind: "post"}, false, "stale"},
		{workload.Write{Name: "x", Holder: "b.1.1", Token: 2, Deadline: boottime() - 1, Kind: "post"}, false, "late"},
		{workload.Write{Name: "y", Holder: "a.1.2", Token: 1, Deadline: later, Kind: "post"}, true, ""},
	}
	for _, st := range steps {
		b, _ := json.Marshal(st.w)
		if _, err := c.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var rep workload.WriteReply
		if err := json.Unmarshal(line, &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Accepted != st.ok || rep.Reason != st.reason {
			t.Errorf("write %+v: %+v, want accepted %v reason %q", st.w, rep, st.ok, st.reason)
		}
	}
	c.Write([]byte("not json\n"))
	if _, err := r.ReadBytes('\n'); err == nil {
		t.Errorf("the register answered a line that is not a write")
	}
	h := rec.snapshot()
	if len(h.Writes) != len(steps) {
		t.Fatalf("%d writes recorded, want %d", len(h.Writes), len(steps))
	}
	if seqs := [4]uint64{h.Writes[0].Seq, h.Writes[1].Seq, h.Writes[2].Seq, h.Writes[3].Seq}; seqs != [4]uint64{1, 2, 0, 1} {
		t.Errorf("register seqs %v, want [1 2 0 1] (a late write never reaches the fence)", seqs)
	}
	if regs := registerHistories(h); len(regs["x"]) != 2 || len(regs["y"]) != 1 {
		t.Errorf("register histories %v", regs)
	}
}

// Kept in PostgreSQL, the register's writes are decided by
// leaseside.fence: the stale one refused, the late one never sent; read
// back, the store's record agrees with the answers, and a record that
// does not (an acknowledged write missing, a write changed, writes out of
// order, a value that is not the last write's) is a violation.
func TestRegisterInPostgres(t *testing.T) {
	store, err := openPGStore(t)
	if err != nil {
		t.Fatal(err)
	}
	defer store.close()
	rec := &recorder{}
	reg, err := newRegister(filepath.Join(t.TempDir(), "register.sock"), rec, store)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.close()
	later := boottime() + int64(time.Hour)
	steps := []struct {
		w      workload.Write
		ok     bool
		reason string
	}{
		{workload.Write{Name: "x", Holder: "b.1.1", Token: 2, Deadline: later}, true, ""},
		{workload.Write{Name: "x", Holder: "a.1.1", Token: 1, Deadline: later}, false, "stale"},
		{workload.Write{Name: "x", Holder: "b.1.1", Token: 2, Deadline: boottime() - 1}, false, "late"},
		{workload.Write{Name: "x", Holder: "c.1.1", Token: 3, Deadline: later}, true, ""},
		{workload.Write{Name: "y", Holder: "a.1.2", Token: 1, Deadline: later}, true, ""},
	}
	for _, st := range steps {
		if rep := reg.write(st.w); rep.Accepted != st.ok || rep.Reason != st.reason {
			t.Errorf("write %+v: %+v, want accepted %v reason %q", st.w, rep, st.ok, st.reason)
		}
	}
	h := rec.snapshot()
	if h.Store, err = store.readBack(); err != nil {
		t.Fatal(err)
	}
	if len(h.Store.Writes) != 3 || h.Store.Values["x"] != "c.1.1/3" || h.Store.Values["y"] != "a.1.2/1" {
		t.Fatalf("store holds %+v", h.Store)
	}
	ws, vs := fromStore(h)
	if len(vs) != 0 {
		t.Fatalf("violations reading a faithful store back: %v", vs)
	}
	for i, w := range ws {
		if w.Accepted != steps[i].ok {
			t.Errorf("write %d accepted %v by the store, answered %v", i, w.Accepted, steps[i].ok)
		}
	}
	tampered := []struct {
		name string
		edit func(s *StoreState)
		want string
	}{
		{name: "acknowledged write lost", edit: func(s *StoreState) { s.Writes = s.Writes[1:] }, want: "was acknowledged and the store does not hold it"},
		{name: "write changed", edit: func(s *StoreState) { s.Writes[0].Token = 9 }, want: "the register made it"},
		{name: "out of order", edit: func(s *StoreState) { s.Writes[0], s.Writes[1] = s.Writes[1], s.Writes[0] }, want: "after write"},
		{name: "value", edit: func(s *StoreState) { s.Values["x"] = "b.1.1/2" }, want: "its last committed write's"},
		{name: "made up", edit: func(s *StoreState) {
			s.Writes = append(s.Writes, StoredWrite{Name: "y", Seq: 7, Holder: "z", Token: 9})
		}, want: "never made"},
	}
	for _, tc := range tampered {
		c := *h
		st := *h.Store
		st.Writes = slices.Clone(h.Store.Writes)
		st.Values = maps.Clone(h.Store.Values)
		tc.edit(&st)
		c.Store = &st
		_, vs := fromStore(&c)
		if !slices.ContainsFunc(vs, func(v Violation) bool { return strings.Contains(v.Message, tc.want) }) {
			t.Errorf("%s: violations %v, want one saying %q", tc.name, vs, tc.want)
		}
	}
}
