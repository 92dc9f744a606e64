package daemon

import (
	"log/slog"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

// warnEvery is how often a warning that repeats while the grantors are
// out of reach (a failed keepalive, about 1.5 a second) is logged.
const warnEvery = 30 * time.Second

// rateLog logs a repeating warning at most once per every: the first at
// once, then one per interval saying how many were left out meanwhile;
// ok logs once that the trouble is over, with how many there were and
// for how long. Not safe for concurrent use (the renew loop's own).
type rateLog struct {
	log   *slog.Logger
	every time.Duration
	// failures since the last ok; firstAt the first of them; loggedAt
	// the last line logged; left how many were not logged since.
	failures          int
	firstAt, loggedAt clockwatch.Instant
	left              int
}

// warn logs msg with args at now, unless one was logged less than every
// ago.
func (r *rateLog) warn(now clockwatch.Instant, msg string, args ...any) {
	if r.failures == 0 {
		r.firstAt = now
	}
	r.failures++
	if r.failures > 1 && now.Sub(r.loggedAt) < r.every {
		r.left++
		return
	}
	if r.left > 0 {
		args = append(args, "more_since_last_line", r.left)
	}
	r.log.Warn(msg, args...)
	r.loggedAt, r.left = now, 0
}

// ok logs msg, with how many warnings there were and for how long, if
// any came since the last ok, and starts afresh.
func (r *rateLog) ok(now clockwatch.Instant, msg string) {
	if r.failures == 0 {
		return
	}
	r.log.Info(msg, "failures", r.failures, "for", now.Sub(r.firstAt).Round(time.Millisecond).String())
	r.failures, r.left = 0, 0
}
