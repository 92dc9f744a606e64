package gossip

import (
	"context"
	"log/slog"
	"strings"
)

// logWriter turns memberlist's log lines ("[WARN] memberlist: ...") into
// slog records at the matching level. memberlist writes one line per Write.
type logWriter struct{ l *slog.Logger }

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

func (w logWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := slog.LevelInfo
	for _, lv := range logLevels {
		if rest, ok := strings.CutPrefix(line, lv.prefix); ok {
			level, line = lv.level, strings.TrimSpace(rest)
			break
		}
	}
	if !w.l.Enabled(context.Background(), level) {
		return len(p), nil
	}
	line = strings.TrimPrefix(line, "memberlist: ")
	var args []any
	if classifyKeyError(line) != "" {
		// A peer's gossip could not be decrypted (or was not encrypted):
		// say what that means in words an operator can act on. Which side
		// is wrong cannot be told from here.
		args = append(args, "hint", "the gossip key is wrong or missing on this member or on the peer")
	}
	w.l.Log(context.Background(), level, line, args...)
	return len(p), nil
}
