package grantor

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestHCLogAdapter(t *testing.T) {
	var buf bytes.Buffer
	l := newHCLog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), "raft")
	l.Debug("hidden")
	l.Named("wal").Info("formatted", "servers", hclog.Fmt("%d-%s", 7, "x"))
	got := buf.String()
	if strings.Contains(got, "hidden") {
		t.Errorf("debug line passed an info handler: %s", got)
	}
	for _, want := range []string{"logger=raft.wal", "servers=7-x", "msg=formatted"} {
		if !strings.Contains(got, want) {
			t.Errorf("log %q lacks %q", got, want)
		}
	}
	if l.IsDebug() || !l.IsInfo() {
		t.Error("levels not taken from the handler")
	}
}
