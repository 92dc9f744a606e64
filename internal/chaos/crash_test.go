package chaos

import "testing"

// A data race or a panic on a client's output (its own, or of the
// `leaseside run` it started, a race-built product binary) is a crash;
// its records and other messages are not.
func TestClientOutputCrashes(t *testing.T) {
	r := &recorder{}
	r.clientLine("client s1c1", `{"k":"start","pid":7,"t":1}`, 1)
	r.clientLine("client s1c1", "leaseside: lease x held elsewhere", 2)
	if vs := checkCrashes(r.snapshot()); len(vs) != 0 {
		t.Fatalf("a record and a message: crashes %v; want none", vs)
	}
	for i, line := range []string{"WARNING: DATA RACE", "panic: runtime error: invalid memory address or nil pointer dereference"} {
		r.clientLine("client s1c1", line, int64(3+i))
	}
	vs := checkCrashes(r.snapshot())
	if len(vs) != 2 || vs[0].Checker != CheckCrash || vs[0].At != 3 || vs[1].At != 4 {
		t.Errorf("a race report and a panic on a client's output: violations %v; want two crashes", vs)
	}
}
