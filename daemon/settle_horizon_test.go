package daemon

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// msgHandler sends every log message to ch, while it has room.
type msgHandler struct{ ch chan string }

func (h msgHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h msgHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.ch <- r.Message:
	default:
	}
	return nil
}
func (h msgHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h msgHandler) WithGroup(string) slog.Handler      { return h }

// Issue 22 (chaos seed 506290559812): an acquire that got no answer is
// settled by retrying its request id, but never past idHorizon after its
// first attempt. The grantor keeps a quiet session's outcomes only so
// long (grantor: outcomeKeep, longer than idHorizon); an attempt after
// that would be judged afresh: a second answer to one id. At main the
// settle retried for as long as the daemon ran. Here the grantor never
// answers and the horizon is shortened to 2 s: the settle gives up, says
// so.
func TestSettleGivesUpAtTheIDHorizon(t *testing.T) {
	logs := make(chan string, 1024)
	r := newRigWith(t, func(c *Config) {
		c.RequestTimeout = 500 * time.Millisecond
		c.Logger = slog.New(msgHandler{ch: logs})
	})
	const horizon = 2 * time.Second
	r.d.g.mu.Lock()
	r.d.g.idHorizon = horizon
	r.d.g.mu.Unlock()
	r.g.set(func() { r.g.stallName, r.g.stall = "x", make(chan struct{}) })

	start := time.Now()
	_, err := r.c.Acquire(ctxT(t), "x", ipc.AcquireOptions{TTL: 10 * time.Second})
	var ie *ipc.Error
	if !errors.As(err, &ie) || ie.Code != ipc.CodeUnavailable {
		t.Fatalf("acquire: %v, want unavailable (the grantor never answered)", err)
	}
	ctx := ctxT(t)
	for gaveUp := false; !gaveUp; {
		select {
		case m := <-logs:
			gaveUp = strings.Contains(m, "what became of it stays unknown")
		case <-ctx.Done():
			t.Fatal("the settle of the unanswered acquire never gave up")
		}
	}
	if late := time.Since(start) - horizon; late < 0 {
		t.Fatalf("the settle gave up %v before the horizon", -late)
	}
}
