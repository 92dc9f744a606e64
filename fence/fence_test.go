package fence

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

func TestGuardAdmit(t *testing.T) {
	var g Guard
	steps := []struct {
		name  string
		lease string
		token uint64
		ok    bool
	}{
		{name: "first", lease: "a", token: 5, ok: true},
		{name: "same token again", lease: "a", token: 5, ok: true},
		{name: "newer", lease: "a", token: 7, ok: true},
		{name: "older after newer", lease: "a", token: 6},
		{name: "other lease is separate", lease: "b", token: 1, ok: true},
	}
	for _, s := range steps {
		err := g.Admit(s.lease, s.token)
		if (err == nil) != s.ok {
			t.Fatalf("%s: Admit(%s, %d) = %v", s.name, s.lease, s.token, err)
		}
		if err != nil && !errors.Is(err, ErrStaleToken) {
			t.Fatalf("%s: error %v does not match ErrStaleToken", s.name, err)
		}
	}
	if g.Highest("a") != 7 {
		t.Fatalf("highest %d, want 7", g.Highest("a"))
	}
}

// Concurrent writers with interleaved tokens: the history always checks
// out, and the final value is from the highest token.
func TestRegisterConcurrentWritersHistoryChecks(t *testing.T) {
	r := NewRegister("jobs/x")
	var wg sync.WaitGroup
	for w := 1; w <= 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				r.Write(fmt.Sprintf("w%d", w), uint64(w*1000+i), fmt.Sprintf("w%d-%d", w, i))
			}
		}()
	}
	wg.Wait()
	if err := CheckHistory(r.History()); err != nil {
		t.Fatal(err)
	}
	if r.Value() != "w8-199" {
		t.Fatalf("final value %q, want the highest token's", r.Value())
	}
}

func TestCheckHistoryFindsViolations(t *testing.T) {
	tests := []struct {
		name string
		h    []Write
		bad  bool
	}{
		{name: "ok", h: []Write{{Seq: 1, Token: 1, Accepted: true}, {Seq: 2, Token: 2, Accepted: true}, {Seq: 3, Token: 1}}},
		{name: "lower accepted after higher", h: []Write{{Seq: 1, Token: 2, Accepted: true}, {Seq: 2, Token: 1, Accepted: true}}, bad: true},
		{name: "refused without cause", h: []Write{{Seq: 1, Token: 2, Accepted: true}, {Seq: 2, Token: 3}}, bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := CheckHistory(tt.h); (err != nil) != tt.bad {
				t.Fatalf("CheckHistory = %v, want violation %v", err, tt.bad)
			}
		})
	}
}
