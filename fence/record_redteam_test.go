package fence

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// Writers that each open the record (as separate processes do), with
// interleaved tokens of two leases and compaction after every few lines,
// so that openers keep waiting on a file a compaction replaced: the
// tokens admitted, in the order they were admitted (under the record's
// lock), never go down for a lease, and the record ends at the highest.
func TestRecordConcurrentOpenersAcrossCompaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec")
	var (
		next     atomic.Uint64
		mu       sync.Mutex
		admitted = map[string][]uint64{}
		wg       sync.WaitGroup
		errs     = make(chan error, 16)
	)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease := fmt.Sprintf("lease/%d", w%2)
			for i := range 40 {
				tok := next.Add(1) + 2
				if i%3 == 0 {
					tok -= 2 // a writer that paused: an older token
				}
				r, err := OpenRecord(path, true)
				if err != nil {
					errs <- err
					return
				}
				r.slack = 2
				if err := r.Admit(lease, tok); err == nil {
					mu.Lock() // still under the record's lock
					admitted[lease] = append(admitted[lease], tok)
					mu.Unlock()
				} else if _, ok := err.(*StaleTokenError); !ok {
					errs <- err
				}
				r.Close()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r := openRecord(t, path)
	defer r.Close()
	for lease, toks := range admitted {
		for i := 1; i < len(toks); i++ {
			if toks[i] < toks[i-1] {
				t.Fatalf("%s: token %d admitted after %d", lease, toks[i], toks[i-1])
			}
		}
		if h := r.Highest(lease); h != toks[len(toks)-1] {
			t.Fatalf("%s: record holds %d, last admitted %d", lease, h, toks[len(toks)-1])
		}
	}
}
