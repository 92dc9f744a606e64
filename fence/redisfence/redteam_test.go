package redisfence_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leaseside/leaseside/fence"
	"github.com/leaseside/leaseside/fence/redisfence"
)

// A fenced write whose key is a token key (its own lease's, or another
// lease's) is refused: written, it would lower or delete that lease's
// highest, and an older token of that lease would then be accepted.
func TestFencedWriteCannotTouchATokenKey(t *testing.T) {
	c := testRedis(t)
	ctx := context.Background()
	for _, lease := range []string{"jobs/a", "jobs/b"} {
		if err := redisfence.Set(ctx, c, "k:"+lease, "v", lease, 10); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, fn string
		args     []any
	}{
		{name: "set a token key to 1", fn: "leaseside_set", args: []any{10, "1"}},
		{name: "delete a token key", fn: "leaseside_del", args: []any{10}},
	} {
		for _, victim := range []string{"jobs/a", "jobs/b"} {
			err := c.FCall(ctx, tc.fn, []string{redisfence.TokenKey(victim), redisfence.TokenKey("jobs/a")}, tc.args...).Err()
			var re redis.Error
			if !errors.As(err, &re) || !strings.HasPrefix(re.Error(), "LEASESIDE_BADARG ") {
				t.Errorf("%s (token key of %s): %v", tc.name, victim, err)
			}
		}
	}
	for _, lease := range []string{"jobs/a", "jobs/b"} {
		if err := redisfence.Set(ctx, c, "k:"+lease, "stale", lease, 9); !errors.Is(err, fence.ErrStaleToken) {
			t.Errorf("%s: token 9 after 10 was accepted (%v)", lease, err)
		}
	}
}
