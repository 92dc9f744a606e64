package fence

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func openRecord(t *testing.T, path string) *Record {
	t.Helper()
	r, err := OpenRecord(path, false)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The highest tokens survive closing and reopening, a torn last line (a
// crash during its append) is dropped, and corruption before it refused.
func TestRecordSurvivesReopenAndTornAppend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec")
	r := openRecord(t, path)
	for _, s := range []struct {
		lease string
		token uint64
	}{{"a", 3}, {"b", 10}, {"a", 7}} {
		if err := r.Admit(s.lease, s.token); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := OpenRecord(path, false); !errors.Is(err, ErrRecordInUse) {
		t.Fatalf("a second open without waiting: %v, want ErrRecordInUse", err)
	}
	r.Close()
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		tail   string
		bad    bool
		a, b   uint64
		append bool
	}{
		{name: "as written", a: 7, b: 10},
		{name: "torn last line without newline", tail: "99 a", a: 7, b: 10},
		{name: "torn last line, newline but bad checksum", tail: "99 a 00000000\n", a: 7, b: 10},
		{name: "bad line before the last", tail: "99 a 00000000\n" + recordLine("b", 11), bad: true},
		{name: "a later line with a lower token", tail: recordLine("a", 2), a: 7, b: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.WriteFile(path, append(append([]byte(nil), whole...), tt.tail...), 0o644)
			r, err := OpenRecord(path, false)
			if tt.bad {
				if !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "line 5") {
					t.Fatalf("open: %v, want ErrBadRecord at line 5", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.Highest("a") != tt.a || r.Highest("b") != tt.b {
				t.Fatalf("highest a %d b %d, want %d %d", r.Highest("a"), r.Highest("b"), tt.a, tt.b)
			}
			// A new line goes over a torn one.
			if err := r.Admit("c", 1); err != nil {
				t.Fatal(err)
			}
			r.Close()
			r2 := openRecord(t, path)
			defer r2.Close()
			if r2.Highest("c") != 1 || r2.Highest("a") != tt.a {
				t.Fatalf("after reopen: c %d a %d", r2.Highest("c"), r2.Highest("a"))
			}
		})
	}
}

func TestRecordRefusesForeignFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec")
	os.WriteFile(path, []byte("hello world\n"), 0o644)
	if _, err := OpenRecord(path, false); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("open of a foreign file: %v, want ErrBadRecord", err)
	}
}

// A long log is compacted to one line per lease, the highest tokens
// kept; an opener that locked the old file sees it replaced and opens
// the new one.
func TestRecordCompaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec")
	r := openRecord(t, path)
	r.slack = 5
	old, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	for tok := uint64(1); tok <= 7; tok++ {
		if err := r.Admit("a", tok); err != nil {
			t.Fatal(err)
		}
	}
	r.Admit("b", 2)
	b, _ := os.ReadFile(path)
	if want := recordHeader + recordLine("a", 7) + recordLine("b", 2); string(b) != want {
		t.Fatalf("compacted record:\n%s\nwant:\n%s", b, want)
	}
	// Still locked by r after the rename.
	if _, err := OpenRecord(path, false); !errors.Is(err, ErrRecordInUse) {
		t.Fatalf("open after compaction: %v, want ErrRecordInUse", err)
	}
	r.Close()
	// The old file is free to lock now, but is no longer the record.
	if rec, again, err := lockOpened(old, path, false); rec != nil || !again || err != nil {
		t.Fatalf("locking the replaced file: %v %v %v, want to open again", rec, again, err)
	}
	r2 := openRecord(t, path)
	defer r2.Close()
	if r2.Highest("a") != 7 || r2.Highest("b") != 2 {
		t.Fatalf("after compaction: a %d b %d", r2.Highest("a"), r2.Highest("b"))
	}
	if err := r2.Admit("a", 6); !errors.Is(err, ErrStaleToken) {
		t.Fatalf("token 6 after compaction kept 7: %v", err)
	}
}

// Whatever a record file holds, opening it returns a record or an error,
// never a panic; a record that opens keeps its highest tokens across an
// Admit and a reopen.
func FuzzOpenRecord(f *testing.F) {
	f.Add([]byte(recordHeader + recordLine("a", 3) + recordLine("b", 10)))
	f.Add([]byte(recordHeader + recordLine("a", 3) + "99 a"))
	f.Add([]byte(recordHeader + "99 a 00000000\n" + recordLine("b", 11)))
	f.Add([]byte("leaseside-fen"))
	f.Add([]byte("hello world\n"))
	f.Fuzz(func(t *testing.T, content []byte) {
		path := filepath.Join(t.TempDir(), "rec")
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := OpenRecord(path, false)
		if err != nil {
			return
		}
		before := map[string]uint64{}
		for lease, tok := range r.highest {
			before[lease] = tok
		}
		if err := r.Admit("fuzz/new", 1); err != nil && !errors.Is(err, ErrStaleToken) {
			t.Fatalf("admit to a record that opened: %v", err)
		}
		r.Close()
		r2, err := OpenRecord(path, false)
		if err != nil {
			t.Fatalf("reopen after an admit: %v", err)
		}
		defer r2.Close()
		for lease, tok := range before {
			if r2.Highest(lease) != tok {
				t.Fatalf("lease %q: highest %d after reopen, was %d", lease, r2.Highest(lease), tok)
			}
		}
	})
}
