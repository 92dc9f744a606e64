package integration

import (
	"bufio"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// No Markdown file of the repository holds a merge's conflict markers (one
// landed in packaging/README.md once; Go files with them do not build).
func TestDocsHaveNoConflictMarkers(t *testing.T) {
	// The opening and closing markers: a line of "=" alone is also a
	// Markdown heading's underline.
	marker := regexp.MustCompile(`^(<<<<<<<|>>>>>>>) `)
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "node_modules"):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".md"):
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			if marker.MatchString(sc.Text()) {
				t.Errorf("%s:%d: a merge conflict marker: %.60s", path, n, sc.Text())
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}

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
