package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// logLines logs one record of each level (and a message with a newline)
// through the logger lf gives and returns what reached stderr, by line.
func logLines(t *testing.T, stderr io.Writer, lf logFlags) {
	t.Helper()
	log, err := newLogger(&env{stdout: io.Discard, stderr: stderr}, lf)
	if err != nil {
		t.Fatal(err)
	}
	log = log.With("part", "test", "took", 1500*time.Millisecond)
	log.Debug("debug line")
	log.Info("info line", "err", "two\nlines")
	log.Warn("warn line")
	log.Error("error line")
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// Text and JSON write one event per line (a newline in a value is
// escaped); an unknown format is a usage error naming the flag.
func TestLogFormats(t *testing.T) {
	dir := t.TempDir()
	for _, format := range []string{"", "text", "json"} {
		path := filepath.Join(dir, "log-"+format)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		logLines(t, f, logFlags{verbose: true, format: format})
		f.Close()
		lines := readLines(t, path)
		if len(lines) != 4 {
			t.Fatalf("format %q: %d lines, want 4:\n%s", format, len(lines), strings.Join(lines, "\n"))
		}
		for i, l := range lines {
			level := []string{"DEBUG", "INFO", "WARN", "ERROR"}[i]
			if format == "json" {
				var rec map[string]any
				if err := json.Unmarshal([]byte(l), &rec); err != nil || rec["level"] != level || rec["part"] != "test" || rec["time"] == nil {
					t.Errorf("json line %q: %v %v", l, rec, err)
				}
				if rec["took"] != "1.5s" {
					t.Errorf("json line %q: took %v, want the duration as text, 1.5s", l, rec["took"])
				}
				continue
			}
			if !strings.HasPrefix(l, "time=") || !strings.Contains(l, "level="+level) || !strings.Contains(l, "part=test") || !strings.Contains(l, "took=1.5s") {
				t.Errorf("text line %q", l)
			}
		}
	}
	_, err := newLogger(&env{stdout: io.Discard, stderr: io.Discard}, logFlags{format: "yaml"})
	var u usageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "--log-format") {
		t.Errorf("--log-format yaml: %v, want a usage error naming the flag", err)
	}
}

// Under journald (JOURNAL_STREAM names stderr's device and inode), every
// line starts with its syslog priority, and text lines leave the time
// to the journal; another stream named there changes nothing.
func TestLogUnderJournald(t *testing.T) {
	dir := t.TempDir()
	for _, format := range []string{"text", "json"} {
		path := filepath.Join(dir, "journal-"+format)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", st.Dev, st.Ino))
		logLines(t, f, logFlags{verbose: true, format: format})
		f.Close()
		lines := readLines(t, path)
		for i, l := range lines {
			prio := []string{"<7>", "<6>", "<4>", "<3>"}[i]
			rest, ok := strings.CutPrefix(l, prio)
			if !ok {
				t.Errorf("%s line %q lacks the priority %s", format, l, prio)
				continue
			}
			switch format {
			case "json":
				if err := json.Unmarshal([]byte(rest), new(map[string]any)); err != nil {
					t.Errorf("json line %q after its priority: %v", l, err)
				}
			case "text":
				if strings.Contains(rest, "time=") || !strings.HasPrefix(rest, "level=") {
					t.Errorf("text line %q under journald", l)
				}
			}
		}
		// The same variable naming another stream: plain lines.
		other := filepath.Join(dir, "other-"+format)
		g, err := os.Create(other)
		if err != nil {
			t.Fatal(err)
		}
		logLines(t, g, logFlags{format: format})
		g.Close()
		for _, l := range readLines(t, other) {
			if strings.HasPrefix(l, "<") {
				t.Errorf("%s line %q has a priority though stderr is not the journal", format, l)
			}
		}
	}
}

// `leaseside dev --log-format json` (a sidecar and a grantor, raft and
// gossip included) writes nothing on stderr that is not one JSON object
// per line, from its start to its stop.
func TestDevLogsJSON(t *testing.T) {
	dir, err := os.MkdirTemp("", "lslog") // short: a socket path must fit sun_path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := startProc(t, "dev", "dev", "--log-format", "json", "--socket", filepath.Join(dir, "s.sock"), "--data-dir", filepath.Join(dir, "data"))
	p.waitLine(t, `"msg":"leaseside dev ready"`)
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.waitExit(t); code != 0 {
		t.Fatalf("dev exited %d after SIGTERM", code)
	}
	out := p.output()
	lines := strings.Split(out, "\n")
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec["msg"] == nil || rec["level"] == nil {
			t.Errorf("not a JSON log record: %q (%v)", l, err)
		}
	}
	if !strings.Contains(out, `"logger":"raft"`) || !strings.Contains(out, `"msg":"leaseside dev stopped","why":"terminated signal received"`) {
		t.Errorf("raft's lines or the stop line missing:\n%s", out)
	}
}
