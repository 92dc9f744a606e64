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
	t.Parallel()
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
	t.Parallel()
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

// Every relative link of the repository's Markdown files points at a file
// that exists, and a link to a heading (file.md#heading) at a heading that
// exists: docs that moved leave no link behind.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headings := map[string]map[string]bool{}
	anchors := func(path string) map[string]bool {
		if a, ok := headings[path]; ok {
			return a
		}
		a := map[string]bool{}
		if doc, err := os.ReadFile(path); err == nil {
			inCode := false
			for _, line := range strings.Split(string(doc), "\n") {
				if strings.HasPrefix(line, "```") {
					inCode = !inCode
				}
				if !inCode && strings.HasPrefix(line, "#") {
					a[slug(strings.TrimLeft(line, "# "))] = true
				}
			}
		}
		headings[path] = a
		return a
	}
	checked := 0
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "node_modules" || d.Name() == "dist"):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".md"):
			return nil
		}
		doc, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := regexp.MustCompile("(?s)```.*?```").ReplaceAllString(string(doc), "")
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			resolved := path
			if file != "" {
				resolved = filepath.Join(filepath.Dir(path), file)
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s: link to %s: no such file", strings.TrimPrefix(path, "../../"), target)
					continue
				}
			}
			checked++
			if anchor != "" && strings.HasSuffix(resolved, ".md") && !anchors(resolved)[anchor] {
				t.Errorf("%s: link to %s: no such heading in %s", strings.TrimPrefix(path, "../../"), target, strings.TrimPrefix(resolved, "../../"))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("only %d relative links found: is the link pattern broken?", checked)
	}
}

// slug is the anchor a Markdown heading gets: lower case, spaces to
// hyphens, punctuation other than hyphens and underscores dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}
