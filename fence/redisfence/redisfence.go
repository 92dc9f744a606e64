// Package redisfence fences writes to Redis with leaseside's tokens: the
// Redis function library it ships (Library, loaded once by Install,
// `leaseside fence redis install URL` or `redis-cli -x FUNCTION LOAD
// REPLACE`) adds leaseside_set and leaseside_del, which compare the
// write's token with the highest recorded in the lease's token key
// (TokenKey), record it, and write, in one atomic step; a token below the
// highest is refused and writes nothing. It needs Redis 7 (functions).
package redisfence

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/leaseside/leaseside/fence"
	"github.com/leaseside/leaseside/fence/redisfence/library"
)

// Library is leaseside.lua, the function library "leaseside"
// (library.Lua).
var Library = library.Lua

// TokenKeyPrefix starts every lease's token key.
const TokenKeyPrefix = "leaseside:fence:"

// TokenKey is the key that holds the highest token of lease's writes. In
// Redis Cluster it must hash to the slot of the keys the lease guards:
// give the lease name and those keys one hash tag.
func TokenKey(lease string) string { return TokenKeyPrefix + lease }

// Caller calls Redis functions: a *redis.Client, *redis.ClusterClient,
// *redis.Ring, or a pipeline.
type Caller interface {
	FCall(ctx context.Context, function string, keys []string, args ...any) *redis.Cmd
}

// Loader loads function libraries: a *redis.Client, *redis.ClusterClient
// or *redis.Ring.
type Loader interface {
	FunctionLoadReplace(ctx context.Context, code string) *redis.StringCmd
}

// ErrEmptyLease is returned for a fenced write without a lease name.
var ErrEmptyLease = errors.New("redisfence: empty lease name")

// Install loads Library into c, replacing an older version of it (the
// data and the tokens stay).
func Install(ctx context.Context, c Loader) error {
	if err := c.FunctionLoadReplace(ctx, Library).Err(); err != nil {
		return fmt.Errorf("redisfence: loading leaseside.lua: %w", err)
	}
	return nil
}

// Set sets key to value if token is not below the highest recorded for
// lease, and records it, atomically. It returns a *fence.StaleTokenError
// (errors.Is ErrStaleToken) naming both tokens when the token is lower,
// and then writes nothing.
func Set(ctx context.Context, c Caller, key string, value any, lease string, token uint64) error {
	if lease == "" {
		return ErrEmptyLease
	}
	return Check(c.FCall(ctx, "leaseside_set", []string{key, TokenKey(lease)}, token, value).Err(), lease, token)
}

// Del deletes key if token is not below the highest recorded for lease,
// and records it, atomically, returning how many keys it removed (0 or
// 1). A lower token is refused as by Set.
func Del(ctx context.Context, c Caller, key, lease string, token uint64) (int64, error) {
	if lease == "" {
		return 0, ErrEmptyLease
	}
	n, err := c.FCall(ctx, "leaseside_del", []string{key, TokenKey(lease)}, token).Int64()
	return n, Check(err, lease, token)
}

// staleRE matches the library's refusal (a Redis error reply, whose first
// word is its code) and finds the highest in it.
var staleRE = regexp.MustCompile(`^LEASESIDE_STALE .*: highest seen ([0-9]+)$`)

// Check turns the error of an FCALL of leaseside_set or leaseside_del
// for lease and token into what Set returns: nil stays nil, a refusal
// becomes a *fence.StaleTokenError, anything else is returned as it is.
func Check(err error, lease string, token uint64) error {
	var re redis.Error
	if !errors.As(err, &re) {
		return err
	}
	m := staleRE.FindStringSubmatch(re.Error())
	if m == nil {
		return err
	}
	highest, perr := strconv.ParseUint(m[1], 10, 64)
	if perr != nil {
		return fmt.Errorf("redisfence: stale token, and a highest out of range: %w", err)
	}
	return &fence.StaleTokenError{Lease: lease, Token: token, Highest: highest}
}
