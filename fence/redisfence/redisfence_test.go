package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leaseside/leaseside/fence"
	"github.com/leaseside/leaseside/fence/redisfence"
	"github.com/leaseside/leaseside/internal/stores"
)

// testRedis starts a redis-server, loads the library (twice: loading
// again is harmless) and connects to it.
func testRedis(t testing.TB) *redis.Client {
	t.Helper()
	url, _ := stores.StartRedis(t)
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	for range 2 {
		if err := redisfence.Install(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// A token equal to or above the lease's highest is accepted and recorded;
// a lower one is refused with both tokens named and writes nothing, for
// SET and DEL; tokens compare as numbers up to 2^64-1, exactly.
func TestFencedSetAndDel(t *testing.T) {
	c := testRedis(t)
	ctx := context.Background()
	steps := []struct {
		name    string
		del     bool
		lease   string
		token   uint64
		highest uint64 // refused: the highest named
	}{
		{name: "first", lease: "jobs/a", token: 5},
		{name: "equal", lease: "jobs/a", token: 5},
		{name: "higher", lease: "jobs/a", token: 10},
		{name: "lower", lease: "jobs/a", token: 9, highest: 10},
		{name: "lower delete", del: true, lease: "jobs/a", token: 2, highest: 10},
		{name: "another lease is separate", lease: "jobs/b", token: 1},
		{name: "2^64-1", lease: "jobs/c", token: math.MaxUint64},
		{name: "2^64-2 below it (not equal as a double)", lease: "jobs/c", token: math.MaxUint64 - 1, highest: math.MaxUint64},
		{name: "equal delete", del: true, lease: "jobs/a", token: 10},
	}
	for _, s := range steps {
		key := "k:" + s.lease
		before, _ := c.Get(ctx, key).Result()
		var err error
		if s.del {
			_, err = redisfence.Del(ctx, c, key, s.lease, s.token)
		} else {
			err = redisfence.Set(ctx, c, key, s.name, s.lease, s.token)
		}
		after, _ := c.Get(ctx, key).Result()
		if s.highest == 0 {
			want := s.name
			if s.del {
				want = ""
			}
			if err != nil || after != want {
				t.Fatalf("%s: token %d: %v, value %q after", s.name, s.token, err, after)
			}
		} else {
			var st *fence.StaleTokenError
			if !errors.As(err, &st) || !errors.Is(err, fence.ErrStaleToken) ||
				*st != (fence.StaleTokenError{Lease: s.lease, Token: s.token, Highest: s.highest}) {
				t.Fatalf("%s: token %d: %v, want stale below %d", s.name, s.token, err, s.highest)
			}
			if after != before {
				t.Fatalf("%s: a refused write changed %q to %q", s.name, before, after)
			}
		}
	}
	if h, err := c.Get(ctx, redisfence.TokenKey("jobs/a")).Result(); err != nil || h != "10" {
		t.Fatalf("token key of jobs/a: %q, %v", h, err)
	}
}

// Bad arguments are refused with LEASESIDE_BADARG and write nothing.
func TestFencedWriteRefusesBadInput(t *testing.T) {
	c := testRedis(t)
	ctx := context.Background()
	if err := redisfence.Set(ctx, c, "k", "v", "", 1); !errors.Is(err, redisfence.ErrEmptyLease) {
		t.Fatalf("empty lease: %v", err)
	}
	for _, tc := range []struct {
		name string
		keys []string
		args []any
	}{
		{name: "token not a number", keys: []string{"k", "leaseside:fence:x"}, args: []any{"12a", "v"}},
		{name: "negative token", keys: []string{"k", "leaseside:fence:x"}, args: []any{-1, "v"}},
		{name: "token above 2^64-1", keys: []string{"k", "leaseside:fence:x"}, args: []any{"18446744073709551616", "v"}},
		{name: "token key without the prefix", keys: []string{"k", "x"}, args: []any{1, "v"}},
		{name: "token key without a lease", keys: []string{"k", "leaseside:fence:"}, args: []any{1, "v"}},
		{name: "one key", keys: []string{"k"}, args: []any{1, "v"}},
		{name: "no value", keys: []string{"k", "leaseside:fence:x"}, args: []any{1}},
	} {
		err := c.FCall(ctx, "leaseside_set", tc.keys, tc.args...).Err()
		var re redis.Error
		if !errors.As(err, &re) || !strings.HasPrefix(re.Error(), "LEASESIDE_BADARG ") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if n, err := c.Exists(ctx, "k", "leaseside:fence:x").Result(); err != nil || n != 0 {
		t.Fatalf("refused writes left %d keys (%v)", n, err)
	}
}

// Concurrent writers with interleaved tokens, and a reader: the value
// the reader sees never goes back to an older token (Redis answers one
// connection's reads in its order of execution), each writer reads a
// token at least its own after its write, and the register ends with the
// highest token accepted.
func TestConcurrentInterleavedWritersNeverGoBack(t *testing.T) {
	c := testRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const writers, each = 8, 50
	var writing, reading sync.WaitGroup
	var mu sync.Mutex
	var highest uint64
	accepted, refused := 0, 0
	for w := 1; w <= writers; w++ {
		writing.Go(func() {
			for i := range each {
				token := uint64(w + writers*(i/5))
				err := redisfence.Set(ctx, c, "reg", fmt.Sprint(token), "jobs/r", token)
				mu.Lock()
				switch {
				case err == nil:
					accepted++
					highest = max(highest, token)
				case errors.Is(err, fence.ErrStaleToken):
					refused++
				default:
					t.Error(err)
				}
				mu.Unlock()
				// Accepted or refused, the register now holds a token at
				// least this one: a higher token's write, once made, is
				// never overwritten by a lower one.
				if v, err := c.Get(ctx, "reg").Uint64(); err != nil || v < token {
					t.Errorf("after a write with token %d the register holds %d (%v)", token, v, err)
				}
			}
		})
	}
	done := make(chan struct{})
	reads := 0
	reading.Go(func() {
		rc := redis.NewClient(c.Options())
		defer rc.Close()
		var last uint64
		for {
			select {
			case <-done:
				return
			default:
			}
			v, err := rc.Get(ctx, "reg").Uint64()
			if errors.Is(err, redis.Nil) {
				continue
			}
			if err != nil {
				t.Error(err)
				return
			}
			if v < last {
				t.Errorf("the register went back from token %d to %d", last, v)
				return
			}
			last = v
			reads++
		}
	})
	writing.Wait()
	close(done)
	reading.Wait()
	v, err := c.Get(ctx, "reg").Uint64()
	if err != nil || v != highest {
		t.Fatalf("register holds %d (%v), the highest accepted token is %d", v, err, highest)
	}
	if accepted == 0 || refused == 0 || reads == 0 {
		t.Fatalf("%d accepted, %d refused, %d reads: want some of each", accepted, refused, reads)
	}
	t.Logf("%d writes accepted, %d refused, %d reads", accepted, refused, reads)
}

// The shell (redis-cli) and Python (redis-py) examples, run as
// `leaseside run` runs them (LEASESIDE_LEASE and LEASESIDE_TOKEN in their
// environment): a token at least the highest writes, a lower one is
// refused with both tokens named, a non-zero exit, and the key unchanged.
func TestShellAndPythonExamples(t *testing.T) {
	c := testRedis(t)
	ctx := context.Background()
	clients, err := filepath.Abs("../../clients/python")
	if err != nil {
		t.Fatal(err)
	}
	url := c.Options().Addr
	examples := []struct {
		name, lease string
		argv        []string
	}{
		{name: "redis-cli", lease: "jobs/sh", argv: []string{"../examples/report_redis.sh"}},
		{name: "redis-py", lease: "jobs/py", argv: []string{"/usr/bin/python3", "../examples/report_redis.py"}},
	}
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			for _, step := range []struct {
				token string
				ok    bool
			}{{"5", true}, {"7", true}, {"7", true}, {"6", false}} {
				body := ex.name + " " + step.token
				cmd := exec.Command(ex.argv[0], append(ex.argv[1:], body)...)
				cmd.Env = append(os.Environ(), "REDIS_SOCKET="+url, "REDIS_URL=unix://"+url, "LEASESIDE_LEASE="+ex.lease,
					"LEASESIDE_TOKEN="+step.token, "PYTHONPATH="+clients, "PYTHONDONTWRITEBYTECODE=1")
				out, err := cmd.CombinedOutput()
				if step.ok != (err == nil) {
					t.Fatalf("token %s: %v\n%s", step.token, err, out)
				}
				if !step.ok && !(strings.Contains(string(out), "stale token 6") && strings.Contains(string(out), "highest seen 7")) {
					t.Fatalf("token %s refused without naming both tokens:\n%s", step.token, out)
				}
				want := ex.name + " 7"
				if step.ok {
					want = body
				}
				if got, err := c.Get(ctx, "report:daily").Result(); err != nil || got != want {
					t.Fatalf("after token %s the key holds %q (%v), want %q", step.token, got, err, want)
				}
			}
		})
	}
}
