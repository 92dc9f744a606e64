package fence

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func writeString(t *testing.T, path, lease string, token uint64, s string) error {
	t.Helper()
	return WriteFile(path, lease, token, strings.NewReader(s))
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A token equal to or above the highest writes; a lower one is refused
// naming both tokens and leaves the file as it was; leases are separate.
func TestWriteFileFencesByToken(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "report.txt")
	steps := []struct {
		name    string
		lease   string
		token   uint64
		content string
		highest uint64 // non-zero: refused, naming this highest
	}{
		{name: "first write", lease: "jobs/report", token: 5, content: "five"},
		{name: "same token again", lease: "jobs/report", token: 5, content: "five again"},
		{name: "newer token", lease: "jobs/report", token: 9, content: "nine"},
		{name: "older token after newer", lease: "jobs/report", token: 7, content: "seven", highest: 9},
		{name: "another lease has its own tokens", lease: "jobs/other", token: 1, content: "other one"},
		{name: "the first lease still fenced", lease: "jobs/report", token: 8, content: "eight", highest: 9},
	}
	want := ""
	for _, s := range steps {
		err := writeString(t, path, s.lease, s.token, s.content)
		if s.highest == 0 {
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			want = s.content
		} else {
			var st *StaleTokenError
			if !errors.As(err, &st) || st.Token != s.token || st.Highest != s.highest || st.Lease != s.lease {
				t.Fatalf("%s: error %v, want a StaleTokenError of token %d below %d", s.name, err, s.token, s.highest)
			}
			for _, n := range []string{strconv.FormatUint(s.token, 10), strconv.FormatUint(s.highest, 10)} {
				if !strings.Contains(err.Error(), n) {
					t.Fatalf("%s: message %q does not name token %s", s.name, err, n)
				}
			}
		}
		if got := readString(t, path); got != want {
			t.Fatalf("%s: file holds %q, want %q", s.name, got, want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("directory holds %v, want the file and its record only (no temporary file left)", names)
	}
}

// What a write refuses before it touches anything.
func TestWriteFileRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("keep"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(target, link)
	recLink := filepath.Join(dir, "f")
	os.Symlink(target, recLink+RecordSuffix)
	tests := []struct {
		name  string
		path  string
		lease string
		token uint64
		is    error
		says  string
	}{
		{name: "token 0", path: filepath.Join(dir, "a"), lease: "x", token: 0, is: ErrBadToken},
		{name: "empty lease", path: filepath.Join(dir, "a"), lease: "", token: 1, is: ErrBadLease},
		{name: "lease with a space", path: filepath.Join(dir, "a"), lease: "a b", token: 1, is: ErrBadLease},
		{name: "path is a symbolic link", path: link, lease: "x", token: 1, is: ErrNotRegular, says: "symbolic link"},
		{name: "path is a directory", path: dir, lease: "x", token: 1, is: ErrNotRegular, says: "directory"},
		{name: "record is a symbolic link", path: recLink, lease: "x", token: 1, says: "symbolic link"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := writeString(t, tt.path, tt.lease, tt.token, "new")
			if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("error %v, want %v saying %q", err, tt.is, tt.says)
			}
		})
	}
	if got := readString(t, target); got != "keep" {
		t.Fatalf("the link's target was changed to %q", got)
	}
}

// A replaced file keeps its mode.
func TestWriteFileKeepsMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	os.WriteFile(path, []byte("old"), 0o640)
	os.Chmod(path, 0o640)
	if err := writeString(t, path, "x", 1, "new"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, want 0640", fi.Mode().Perm())
	}
}

// Concurrent writers with interleaved tokens: in each round every writer
// writes at once with a token of the round, in shuffled order; after the
// round the file holds the round's highest token's content, and a reader
// running throughout never sees a torn file nor an older token's content
// after a newer one's.
func TestWriteFileConcurrentInterleavedTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "counter")
	const writers, rounds = 8, 25
	// Content that would show a torn read: the token, repeated to 32 KiB.
	content := func(tok uint64) string {
		line := strconv.FormatUint(tok, 10) + "\n"
		return strings.Repeat(line, (32<<10)/len(line))
	}
	stop := make(chan struct{})
	readerErr := make(chan error, 1)
	go func() { readerErr <- readMonotonic(path, content, stop) }()
	accepted, refused := 0, 0
	for r := 0; r < rounds; r++ {
		order := rand.Perm(writers)
		start := make(chan struct{})
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			tok := uint64(r*writers + order[w] + 1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[w] = WriteFile(path, "jobs/counter", tok, strings.NewReader(content(tok)))
			}()
		}
		close(start)
		wg.Wait()
		for w, err := range errs {
			tok := uint64(r*writers + order[w] + 1)
			var st *StaleTokenError
			switch {
			case err == nil:
				accepted++
			case errors.As(err, &st) && st.Highest > tok:
				refused++
			default:
				t.Fatalf("round %d, token %d: %v", r, tok, err)
			}
		}
		if want := uint64((r + 1) * writers); readString(t, path) != content(want) {
			t.Fatalf("round %d: the file does not hold the round's highest token's (%d) content", r, want)
		}
	}
	close(stop)
	if err := <-readerErr; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d writes accepted, %d refused as stale", accepted, refused)
}

// readMonotonic reads path until stop, and returns an error if it finds
// it torn or holding an older token's content after a newer one's.
func readMonotonic(path string, content func(uint64) string, stop chan struct{}) error {
	var last uint64
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		first, _, _ := bytes.Cut(b, []byte("\n"))
		tok, err := strconv.ParseUint(string(first), 10, 64)
		if err != nil || string(b) != content(tok) {
			return fmt.Errorf("read a torn file (%d bytes, starting %q)", len(b), first)
		}
		if tok < last {
			return fmt.Errorf("read token %d's content after token %d's", tok, last)
		}
		last = tok
	}
}
