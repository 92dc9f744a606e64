package grantor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// hclogAdapter sends the logs of raft and raft-wal (which speak hclog) to
// the node's slog.Logger, with raft's routine errors demoted (routine).
type hclogAdapter struct {
	l       *slog.Logger
	name    string
	implied []any
	quiet   *routineLimiter // shared by every logger derived from one newHCLog
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func newHCLog(l *slog.Logger, name string) hclog.Logger {
	return newHCLogAt(l, name, time.Now)
}

// newHCLogAt is newHCLog with the clock that paces routine lines.
func newHCLogAt(l *slog.Logger, name string, now func() time.Time) hclog.Logger {
	return &hclogAdapter{l: l, name: name, quiet: &routineLimiter{now: now, last: map[string]routineSeen{}}}
}

// Raft's routine errors. hashicorp/raft logs at ERROR every RPC that
// fails to reach a peer, on every retry (several a second per dead peer):
// during a failover, a rolling restart or while a grantor is down, that is
// normal operation, and it buried real errors. A line with one of the
// messages below whose error says the peer could not be reached (refused,
// reset, closed, timed out: unreachable) goes out at WARN instead, at
// most once per message and peer every routineEvery, the next one saying
// how many were left out (repeated=N; those go out at DEBUG, seen with
// -v). The same messages with any other error (a peer that answered with
// one) and every other ERROR line (storage, snapshots, decoding) keep
// their level.
var routineUnreachable = map[string]bool{
	"failed to appendEntries to":        true,
	"failed to heartbeat to":            true,
	"failed to make requestVote RPC":    true,
	"failed to pipeline appendEntries":  true,
	"failed to send snapshot to":        true,
	"failed to install snapshot":        true,
	"failed to decode incoming command": true, // a peer's connection dropped mid-command
}

// routineStepDown is what a leader logs, at ERROR and once, when it learns
// that another node was elected: a leadership change, logged at WARN.
const routineStepDown = "peer has newer term, stopping replication"

// routineEvery paces the routine lines of one message and peer.
const routineEvery = 30 * time.Second

// routine reports whether an ERROR line of raft is routine, and the key
// (message and peer) that paces it; "" means it is not paced.
func routine(msg string, args []any) (bool, string) {
	if msg == routineStepDown {
		return true, ""
	}
	if !routineUnreachable[msg] {
		return false, ""
	}
	var err error
	var peer any
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "error":
			err, _ = args[i+1].(error)
		case "peer", "target":
			peer = args[i+1]
		}
	}
	if !unreachable(err) {
		return false, ""
	}
	return true, fmt.Sprint(msg, " ", peer)
}

// unreachable reports whether err says a peer could not be reached or
// went away, as opposed to a peer that answered with an error.
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, raft.ErrTransportShutdown)
}

// routineLimiter paces routine lines by key. Safe for concurrent use.
type routineLimiter struct {
	now  func() time.Time
	mu   sync.Mutex
	last map[string]routineSeen // keys: message and peer, a few per peer
}

type routineSeen struct {
	at   time.Time // when the last line of the key went out at WARN
	left int       // lines of the key left out since
}

// allow reports whether a line of key goes out now, and how many were
// left out since the last one that did.
func (q *routineLimiter) allow(key string) (ok bool, repeated int) {
	now := q.now()
	q.mu.Lock()
	defer q.mu.Unlock()
	s, seen := q.last[key]
	if seen && now.Sub(s.at) < routineEvery {
		s.left++
		q.last[key] = s
		return false, 0
	}
	q.last[key] = routineSeen{at: now}
	return true, s.left
}

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (h *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	if level == hclog.Error {
		if ok, key := routine(msg, args); ok {
			level = hclog.Warn
			if key != "" {
				if ok, repeated := h.quiet.allow(key); !ok {
					level = hclog.Debug
				} else if repeated > 0 {
					args = append(slicesClone(args), "repeated", repeated)
				}
			}
		}
	}
	lv := slogLevel(level)
	if !h.l.Enabled(context.Background(), lv) {
		return
	}
	out := make([]any, 0, len(args)+2)
	if h.name != "" {
		out = append(out, "logger", h.name)
	}
	for _, a := range args {
		// hclog.Fmt("%+v", x) is a value hclog formats when it writes.
		if f, ok := a.(hclog.Format); ok && len(f) > 0 {
			if format, ok := f[0].(string); ok {
				a = fmt.Sprintf(format, f[1:]...)
			}
		}
		out = append(out, a)
	}
	h.l.Log(context.Background(), lv, msg, out...)
}

func (h *hclogAdapter) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogAdapter) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogAdapter) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogAdapter) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogAdapter) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hclogAdapter) enabled(level hclog.Level) bool {
	return h.l.Enabled(context.Background(), slogLevel(level))
}

func (h *hclogAdapter) IsTrace() bool { return h.enabled(hclog.Trace) }
func (h *hclogAdapter) IsDebug() bool { return h.enabled(hclog.Debug) }
func (h *hclogAdapter) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *hclogAdapter) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *hclogAdapter) IsError() bool { return h.enabled(hclog.Error) }

func (h *hclogAdapter) ImpliedArgs() []any { return h.implied }

func (h *hclogAdapter) With(args ...any) hclog.Logger {
	return &hclogAdapter{l: h.l.With(args...), name: h.name, implied: append(slicesClone(h.implied), args...), quiet: h.quiet}
}

func (h *hclogAdapter) Name() string { return h.name }

func (h *hclogAdapter) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return &hclogAdapter{l: h.l, name: name, implied: h.implied, quiet: h.quiet}
}

func (h *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{l: h.l, name: name, implied: h.implied, quiet: h.quiet}
}

// SetLevel does nothing: the slog handler decides.
func (h *hclogAdapter) SetLevel(hclog.Level) {}

func (h *hclogAdapter) GetLevel() hclog.Level {
	for _, lv := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if h.enabled(lv) {
			return lv
		}
	}
	return hclog.Off
}

func (h *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		h.Info(strings.TrimSpace(string(p)))
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func slicesClone(s []any) []any { return append([]any(nil), s...) }
