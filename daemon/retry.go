package daemon

import (
	"math/rand/v2"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

// No herd (issue 25 item 3). When the grantor leader dies, every host
// whose renewal comes due during the election fails at once, and again at
// each retry; with a backoff of fixed steps they would all come back
// together when the new leader takes office. So a retry waits a random
// share of its backoff (full jitter: uniform in [0, backoff)), which
// spreads the hosts that failed together over the whole backoff rather
// than its upper half; and the backoff is bounded by the lease's own
// deadline: never more than a quarter of the validity the soonest lease
// in the session has left, so that a host still tries several times
// before any of its leases lapses, however short its term. Each session
// (term) backs off by its own failures and deadline (inflight.go).

// retryDelay is how long the renew loop waits after failures keepalives
// in a row failed, with left the validity the soonest lease has left, and
// u a uniform random number in [0, 1).
func retryDelay(failures int, left time.Duration, u float64) time.Duration {
	ceiling := min(backoff(failures), max(left/4, 0))
	return time.Duration(u * float64(ceiling))
}

// retryDelay is the wait before session sb is sent again, failures
// keepalives for it in a row having failed at now.
func (sb *sessionBatch) retryDelay(now clockwatch.Instant, failures int) time.Duration {
	left := time.Duration(1<<63 - 1)
	if sb.soonest != 0 {
		left = sb.soonest.Sub(now)
	}
	return retryDelay(failures, left, rand.Float64())
}
