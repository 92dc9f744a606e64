package gossip

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// logWriter turns memberlist's log lines ("[WARN] memberlist: ...") into
// slog records at the matching level. memberlist writes one line per Write.
//
// A warning or error about something a peer sent (memberlist ends those
// with "from=ADDR": a packet it discards, a stream it refuses) is a line
// that anyone who reaches the gossip port decides to cause, by UDP from
// any source address it likes (review R8-10). Those are logged at WARN,
// at most once per message every refusedLogInterval, the next one saying
// how many were held back (suppressed), and counted (refused).
type logWriter struct {
	l       *slog.Logger
	now     func() time.Time
	refused atomic.Uint64

	mu   sync.Mutex
	seen map[string]*heldBack // by message, without its from=
}

// heldBack is what the limiter knows of one message.
type heldBack struct {
	written    time.Time
	suppressed int
}

const (
	// refusedLogInterval is the least time between two lines of one
	// message about what a peer sent.
	refusedLogInterval = 10 * time.Second
	// refusedLogKeys bounds the limiter's memory (messages that differ
	// in more than their source): past it, it starts again.
	refusedLogKeys = 256
)

// closedConn is the text of net.ErrClosed: a socket this process closed.
const closedConn = "use of closed network connection"

// fallbackPing starts memberlist's ERROR line when a peer did not answer
// the TCP ping it tries after an unanswered UDP one: a peer that is down
// or slow, which is what failure detection is for (memberlist suspects
// it next).
const fallbackPing = "Failed fallback TCP ping"

func newLogWriter(l *slog.Logger) *logWriter {
	return &logWriter{l: l, now: time.Now, seen: map[string]*heldBack{}}
}

var logLevels = []struct {
	prefix string
	level  slog.Level
}{
	{"[DEBUG]", slog.LevelDebug},
	{"[INFO]", slog.LevelInfo},
	{"[WARN]", slog.LevelWarn},
	{"[ERR]", slog.LevelError},
	{"[ERROR]", slog.LevelError},
}

func (w *logWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := slog.LevelInfo
	for _, lv := range logLevels {
		if rest, ok := strings.CutPrefix(line, lv.prefix); ok {
			level, line = lv.level, strings.TrimSpace(rest)
			break
		}
	}
	line = strings.TrimPrefix(line, "memberlist: ")
	if level >= slog.LevelWarn && strings.Contains(line, closedConn) {
		// memberlist's gossip and probes still running when Shutdown
		// closes its sockets fail at ERROR ("Failed to send gossip to
		// ...: use of closed network connection"): on every clean
		// shutdown, and only then (only this process closes them).
		level = slog.LevelDebug
	}
	if level > slog.LevelWarn && strings.HasPrefix(line, fallbackPing) {
		// Routine in every failover, and under load for a live peer
		// (TestClusterFailoverLogsNoErrors failed on it at load 25).
		level = slog.LevelWarn
	}
	var args []any
	if msg, from, ok := strings.Cut(line, " from="); ok && level >= slog.LevelWarn {
		w.refused.Add(1)
		suppressed, ok := w.allow(msg)
		if !ok {
			return len(p), nil
		}
		level, line = slog.LevelWarn, msg
		args = append(args, "from", from)
		if suppressed > 0 {
			args = append(args, "suppressed", suppressed)
		}
	}
	if !w.l.Enabled(context.Background(), level) {
		return len(p), nil
	}
	if classifyKeyError(line) != "" {
		// A peer's gossip could not be decrypted (or was not encrypted):
		// say what that means in words an operator can act on. Which side
		// is wrong cannot be told from here.
		args = append(args, "hint", "the gossip key is wrong or missing on this member or on the peer")
	}
	w.l.Log(context.Background(), level, line, args...)
	return len(p), nil
}

// allow reports whether a line of msg may be written now, and how many
// were held back since the last one.
func (w *logWriter) allow(msg string) (suppressed int, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	h := w.seen[msg]
	switch {
	case h == nil:
		if len(w.seen) >= refusedLogKeys {
			clear(w.seen)
		}
		w.seen[msg] = &heldBack{written: now}
		return 0, true
	case now.Sub(h.written) < refusedLogInterval:
		h.suppressed++
		return 0, false
	}
	suppressed = h.suppressed
	*h = heldBack{written: now}
	return suppressed, true
}
