package chaos

import (
	"bufio"
	"encoding/json"
	"net"
	"path/filepath"
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
	reg, err := newRegister(path, rec)
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
