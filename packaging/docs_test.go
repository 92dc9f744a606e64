package packaging

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/leaseside/leaseside/cmd/leaseside/cli"
)

// manPages lists the man page of leaseside and of each subcommand, as
// file names, with the command each documents.
func manPages() map[string]*cobra.Command {
	pages := map[string]*cobra.Command{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		pages[strings.ReplaceAll(c.CommandPath(), " ", "-")+".1.gz"] = c
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() && !s.IsAdditionalHelpTopicCommand() {
				walk(s)
			}
		}
	}
	walk(cli.NewRootCommand(io.Discard, io.Discard))
	return pages
}

// completionFiles are where the .deb puts each shell's completion script.
var completionFiles = map[string]string{
	"bash": "usr/share/bash-completion/completions/leaseside",
	"zsh":  "usr/share/zsh/vendor-completions/_leaseside",
	"fish": "usr/share/fish/vendor_completions.d/leaseside.fish",
}

// checkManAndCompletions checks, in the unpacked .deb at root, a man page
// for leaseside and each subcommand (and no other), generated from the
// same definitions as --help, of the packaged version, and rendering; and
// the shell completions, the packaged binary's own, working in bash.
func checkManAndCompletions(t *testing.T, root, bin string) {
	mandir := filepath.Join(root, "usr/share/man/man1")
	entries, err := os.ReadDir(mandir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	pages := manPages()
	want := slices.Sorted(func(yield func(string) bool) {
		for p := range pages {
			if !yield(p) {
				return
			}
		}
	})
	if !slices.Equal(got, want) {
		t.Errorf("man pages %q, want one per command: %q", got, want)
	}
	_, manErr := exec.LookPath("man")
	for name, cmd := range pages {
		f, err := os.Open(filepath.Join(mandir, name))
		if err != nil {
			continue // reported above
		}
		z, err := gzip.NewReader(f)
		var page []byte
		if err == nil {
			page, err = io.ReadAll(z)
		}
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		title := strings.ToUpper(strings.TrimSuffix(name, ".1.gz"))
		firstExample, _, _ := strings.Cut(strings.TrimSpace(cmd.Example), "\n")
		for _, w := range []string{`.TH "` + title + `" "1"`, `"leaseside ` + testVersion + `"`, cmd.Short, strings.Fields(firstExample)[1]} {
			if !bytes.Contains(page, []byte(w)) {
				t.Errorf("%s lacks %q", name, w)
			}
		}
		if manErr == nil {
			out, err := exec.Command("man", "-l", filepath.Join(mandir, name)).CombinedOutput()
			if err != nil || !bytes.Contains(out, []byte("NAME")) || !bytes.Contains(out, []byte("SYNOPSIS")) {
				t.Errorf("man -l %s: %v\n%s", name, err, out)
			}
		}
	}

	for shell, path := range completionFiles {
		sameBytes(t, filepath.Join(root, path), run(t, bin, "completion", shell))
	}
	const bashCompletion = "/usr/share/bash-completion/bash_completion"
	if _, err := os.Stat(bashCompletion); err != nil {
		t.Fatal("bash-completion is needed to try the completion (make deps installs it)")
	}
	for line, want := range map[string]string{
		"leaseside acq":              "acquire",
		"leaseside acquire x --tt":   "--ttl",
		"leaseside members rem":      "remove",
		"leaseside completion f":     "fish",
		"leaseside acquire x --wa":   "--wait",
		"leaseside run x --lock-del": "--lock-delay",
	} {
		words := strings.Fields(line)
		script := `source ` + bashCompletion + `; source "$1"; COMP_LINE="$2"; COMP_POINT=${#COMP_LINE}; read -ra COMP_WORDS <<< "$2"; COMP_CWORD=$((${#COMP_WORDS[@]}-1)); ` +
			`__start_leaseside leaseside "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}"; printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command("bash", "-c", script, "bash", filepath.Join(root, completionFiles["bash"]), line)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil || !slices.Contains(strings.Fields(string(out)), want) {
			t.Errorf("bash completes %q (%d words) to %q (%v), want %q among them", line, len(words), out, err, want)
		}
	}
}

// sameBytes fails t unless the file at path holds want.
func sameBytes(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Error(err)
		return
	}
	if string(got) != want {
		t.Errorf("%s differs from what the packaged binary generates", path)
	}
}

// checkRPMManAndCompletions checks the .rpm carries the man pages and the
// completions, at the rpm distributions' paths.
func checkRPMManAndCompletions(t *testing.T, rpm string) {
	if _, err := exec.LookPath("rpm"); err != nil {
		t.Skip("rpm not installed")
	}
	files := strings.Fields(run(t, "rpm", "-qpl", rpm))
	want := []string{"/usr/share/bash-completion/completions/leaseside", "/usr/share/zsh/site-functions/_leaseside", "/usr/share/fish/vendor_completions.d/leaseside.fish"}
	for p := range manPages() {
		want = append(want, "/usr/share/man/man1/"+p)
	}
	for _, w := range want {
		if !slices.Contains(files, w) {
			t.Errorf("%s missing from the rpm", w)
		}
	}
}
