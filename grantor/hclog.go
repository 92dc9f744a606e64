package grantor

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter sends the logs of raft and raft-wal (which speak hclog) to
// the node's slog.Logger.
type hclogAdapter struct {
	l       *slog.Logger
	name    string
	implied []any
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func newHCLog(l *slog.Logger, name string) hclog.Logger {
	return &hclogAdapter{l: l, name: name}
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
	return &hclogAdapter{l: h.l.With(args...), name: h.name, implied: append(slicesClone(h.implied), args...)}
}

func (h *hclogAdapter) Name() string { return h.name }

func (h *hclogAdapter) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return &hclogAdapter{l: h.l, name: name, implied: h.implied}
}

func (h *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{l: h.l, name: name, implied: h.implied}
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
