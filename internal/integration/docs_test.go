package integration

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// The shell and Python examples in ipc/PROTOCOL.md run as written against
// a real daemon, so the protocol document cannot drift from the code.
func TestProtocolExamplesRun(t *testing.T) {
	doc, err := os.ReadFile("../../ipc/PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```(python|sh)\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 2 {
		t.Fatalf("found %d examples in PROTOCOL.md, want the shell and the Python one", len(blocks))
	}
	socket := tempSocket(t)
	startDev(t, socket, t.TempDir())
	for i, b := range blocks {
		lang, code := b[1], b[2]
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		interp := map[string]string{"python": "python3", "sh": "sh"}[lang]
		cmd := exec.CommandContext(ctx, interp, "-c", code)
		cmd.Env = append(os.Environ(), "LEASESIDE_SOCKET="+socket)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("example %d (%s) failed: %v\n%s\n--- code:\n%s", i, lang, err, out, code)
		}
		if !strings.Contains(string(out), `"ok"`) && !strings.Contains(string(out), "'ok'") {
			t.Errorf("example %d (%s) printed no reply: %s", i, lang, out)
		}
	}
}
