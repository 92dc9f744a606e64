package cli

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The documents whose shell and unit-file blocks are checked against the
// command tree: every leaseside command line in them names a subcommand
// that exists, with flags it has and arguments it accepts. (The README's
// and docs/'s client examples run in internal/integration.)
var documented = []string{"README.md", "docs/*.md", "systemd/README.md", "packaging/README.md", "ipc/PROTOCOL.md"}

// Every leaseside command line in the docs parses: a renamed subcommand
// or flag cannot leave a recipe behind that fails as written.
func TestDocumentedCommandsParse(t *testing.T) {
	var files []string
	for _, pattern := range documented {
		m, err := filepath.Glob(filepath.Join("../../..", pattern))
		if err != nil || len(m) == 0 {
			t.Fatalf("no document matches %s (%v)", pattern, err)
		}
		files = append(files, m...)
	}
	checked := 0
	for _, file := range files {
		doc, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range documentedCommands(string(doc)) {
			checked++
			if err := parseCommandLine(line); err != nil {
				t.Errorf("%s: %q: %v", strings.TrimPrefix(file, "../../../"), strings.Join(line, " "), err)
			}
		}
	}
	t.Logf("%d command lines checked", checked)
	if checked < 30 {
		t.Fatalf("found only %d leaseside command lines in the docs: is the extraction broken?", checked)
	}
}

// The check itself: a wrong command line is caught.
func TestParseCommandLineRefuses(t *testing.T) {
	for _, bad := range [][]string{
		{"acquire"},                            // NAME missing
		{"acquire", "x", "--no-such-flag"},     // unknown flag
		{"aquire", "x"},                        // unknown subcommand
		{"acquire", "x", "--ttl", "fortnight"}, // bad flag value
	} {
		if err := parseCommandLine(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if err := parseCommandLine([]string{"run", "x", "--ttl", "15s", "--", "./render", "--fast"}); err != nil {
		t.Errorf("a run with a command: %v", err)
	}
}

// parseCommandLine resolves args (after "leaseside") to a subcommand and
// parses its flags and arguments, without running it.
func parseCommandLine(args []string) error {
	root := NewRootCommand(io.Discard, io.Discard)
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if cmd == root && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return errUnknownCommand(args[0])
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return err
	}
	return cmd.ValidateArgs(cmd.Flags().Args())
}

type errUnknownCommand string

func (e errUnknownCommand) Error() string { return "unknown command " + string(e) }

var (
	block    = regexp.MustCompile("(?s)```(sh|ini)\n(.*?)```")
	subst    = regexp.MustCompile(`\$\(([^()]*)\)`)
	execKey  = regexp.MustCompile(`^Exec[A-Za-z]*=[-+@!:]*`)
	redirect = regexp.MustCompile(`^[0-9]*[<>]`)
)

// documentedCommands returns the argument lists (after the program name)
// of every leaseside command in doc's sh and ini blocks: commands after
// |, &&, ||, ; and inside $(...), after sudo, exec or VAR=value words.
func documentedCommands(doc string) [][]string {
	var out [][]string
	for _, b := range block.FindAllStringSubmatch(doc, -1) {
		text := strings.ReplaceAll(b[2], "\\\n", " ")
		for _, line := range strings.Split(text, "\n") {
			line = strings.TrimSpace(line)
			if b[1] == "ini" {
				if !execKey.MatchString(line) {
					continue
				}
				line = execKey.ReplaceAllString(line, "")
			}
			var simple []string
			for _, m := range subst.FindAllStringSubmatch(line, -1) {
				simple = append(simple, splitCommands(m[1])...)
			}
			line = subst.ReplaceAllString(line, "SUBST")
			simple = append(simple, splitCommands(line)...)
			for _, s := range simple {
				if args, ok := leasesideArgs(shellWords(s)); ok {
					out = append(out, args)
				}
			}
		}
	}
	return out
}

// splitCommands splits a line at |, &&, ||, ; and & outside quotes, and
// drops a comment.
func splitCommands(line string) []string {
	var parts []string
	var cur strings.Builder
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' '):
			return append(parts, cur.String())
		case r == '|' || r == ';' || r == '&':
			parts = append(parts, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	return append(parts, cur.String())
}

// shellWords splits a simple command into words, removing quotes,
// parentheses and redirections; a word with a $ expansion becomes "1"
// (tokens and pids, the only values the docs expand), except a bare $VAR
// standing for several flags, which goes.
func shellWords(s string) []string {
	var words []string
	all := regexp.MustCompile(`"[^"]*"|'[^']*'|\S+`).FindAllString(strings.Trim(strings.TrimSpace(s), "()"), -1)
	for i := 0; i < len(all); i++ {
		w := all[i]
		switch {
		case redirect.MatchString(w):
			if regexp.MustCompile(`^[0-9]*[<>]+$`).MatchString(w) {
				i++ // the target is the next word
			}
			continue
		case strings.HasPrefix(w, "$") && !strings.Contains(w, "{") && regexp.MustCompile(`^\$[A-Z]+$`).MatchString(w) && w != "$LEASESIDE_TOKEN":
			continue
		case strings.Contains(w, "$"):
			if strings.HasPrefix(w, "--") && strings.Contains(w, "=") {
				w = w[:strings.Index(w, "=")+1] + "1"
			} else {
				w = "1"
			}
		}
		words = append(words, strings.Trim(w, `"'`))
	}
	return words
}

// prefixWords come before a command's program name.
var prefixWords = map[string]bool{"sudo": true, "exec": true, "time": true, "do": true, "then": true, "else": true, "!": true}

// leasesideArgs returns the arguments of words if its program is
// leaseside (bin/leaseside, /usr/bin/leaseside), after prefixWords and
// VAR=value words.
func leasesideArgs(words []string) ([]string, bool) {
	for len(words) > 0 && (prefixWords[words[0]] || strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-")) {
		words = words[1:]
	}
	if len(words) == 0 || filepath.Base(words[0]) != "leaseside" {
		return nil, false
	}
	return words[1:], true
}
