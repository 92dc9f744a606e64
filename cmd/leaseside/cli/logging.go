package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
)

// Logging of the subcommands that run for long (dev, daemon, grantor):
// one event per line, as key=value pairs (text) or a JSON object (json),
// on stderr. When stderr is the journal (systemd sets JOURNAL_STREAM to
// its device and inode), each line starts with its syslog priority
// (<3> error, <4> warning, <6> info, <7> debug), which journald takes as
// the entry's priority and strips (journalctl -p warning works), and text
// lines leave out the time, which the journal records itself.

// logFlags are the logging flags.
type logFlags struct {
	verbose bool
	format  string // "" means text
}

// logFormats are the values --log-format takes.
var logFormats = []string{"text", "json"}

func (l *logFlags) register(fs *pflag.FlagSet) {
	fs.BoolVarP(&l.verbose, "verbose", "v", false, "log debug detail")
	fs.StringVar(&l.format, "log-format", "", `log format, one event per line: "text" (key=value pairs) or "json" (a JSON object); `+
		`under journald each line carries its priority (default "text")`)
}

// newLogger returns the logger l asks for, writing to e.stderr; an unknown
// format is a usage error naming the flag.
func newLogger(e *env, l logFlags) (*slog.Logger, error) {
	return newLoggerOn(e.stderr, isJournal(e.stderr), l)
}

// newLoggerOn returns the logger l asks for, writing to out, with the
// journal's priority prefixes when journal is set (out is, or leads to,
// the stream systemd connected to the journal).
func newLoggerOn(out io.Writer, journal bool, l logFlags) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if l.verbose {
		opts.Level = slog.LevelDebug
	}
	var w = out
	var pw *priorityWriter
	if journal {
		pw = &priorityWriter{out: out}
		w = pw
	}
	var h slog.Handler
	switch l.format {
	case "", "text":
		if journal {
			opts.ReplaceAttr = dropTime
		}
		h = slog.NewTextHandler(w, opts)
	case "json":
		opts.ReplaceAttr = durationText
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, usagef("--log-format %q: want one of %q", l.format, logFormats)
	}
	if journal {
		h = &journalHandler{inner: h, w: pw}
	}
	return slog.New(h), nil
}

// durationText writes a duration in a JSON record as the text lines do,
// "1.5s" or "250ms" (Go's duration syntax), not integer nanoseconds: the
// two formats say the same, and a person reads either.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// dropTime removes the time of a text record (the journal has its own).
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// isJournal reports whether w is the stream systemd connected to the
// journal: JOURNAL_STREAM names its device and inode.
func isJournal(w io.Writer) bool {
	f, ok := w.(*os.File)
	js := os.Getenv("JOURNAL_STREAM")
	if !ok || js == "" {
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return false
	}
	return js == fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// syslogPriority is the sd-daemon prefix for a level.
func syslogPriority(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "<3>"
	case l >= slog.LevelWarn:
		return "<4>"
	case l >= slog.LevelInfo:
		return "<6>"
	}
	return "<7>"
}

// priorityWriter writes each line with the prefix its handler set. slog's
// handlers write a record in one Write; journalHandler holds mu around it.
type priorityWriter struct {
	mu     sync.Mutex
	out    io.Writer
	prefix string
}

func (p *priorityWriter) Write(b []byte) (int, error) {
	if _, err := p.out.Write(append([]byte(p.prefix), b...)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// journalHandler sets the priority prefix of each record it passes on.
type journalHandler struct {
	inner slog.Handler
	w     *priorityWriter
}

func (j *journalHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return j.inner.Enabled(ctx, l)
}

func (j *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	j.w.mu.Lock()
	defer j.w.mu.Unlock()
	j.w.prefix = syslogPriority(r.Level)
	return j.inner.Handle(ctx, r)
}

func (j *journalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &journalHandler{inner: j.inner.WithAttrs(as), w: j.w}
}

func (j *journalHandler) WithGroup(name string) slog.Handler {
	return &journalHandler{inner: j.inner.WithGroup(name), w: j.w}
}
