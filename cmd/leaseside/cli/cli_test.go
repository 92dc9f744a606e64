package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// runMain runs the command line in-process and returns its output.
func runMain(args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	code = Main(args, &o, &e)
	return o.String(), e.String(), code
}

// allCommands walks the command tree, root excluded.
func allCommands(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, s := range c.Commands() {
		if s.Hidden || s.Name() == "help" {
			continue
		}
		out = append(out, s)
		out = append(out, allCommands(s)...)
	}
	return out
}

// Every subcommand teaches: a one-line description, a long help, examples
// that start with "leaseside", and flags spelled --flag; `help CMD` and
// `CMD --help` print the same text, on stdout, exit 0.
func TestHelpForEverySubcommand(t *testing.T) {
	root := NewRootCommand(nil, nil)
	cmds := allCommands(root)
	if len(cmds) < len(subcommands) {
		t.Fatalf("found %d commands, want at least the %d subcommands", len(cmds), len(subcommands))
	}
	dashFlag := regexp.MustCompile(`(?m)^\s+-[a-z][a-z-]+\s`)
	for _, c := range cmds {
		path := strings.Fields(c.CommandPath())[1:]
		t.Run(strings.Join(path, "_"), func(t *testing.T) {
			if c.Short == "" || strings.Contains(c.Short, "\n") {
				t.Errorf("short description %q: want one line", c.Short)
			}
			if c.Long == "" {
				t.Errorf("no long help")
			}
			if c.Example == "" {
				t.Errorf("no examples")
			}
			for _, line := range strings.Split(c.Example, "\n") {
				l := strings.TrimPrefix(strings.TrimSpace(line), "sudo ")
				if !strings.HasPrefix(l, "leaseside "+path[0]) && !strings.HasPrefix(line, "      ") && !strings.Contains(l, "(leaseside "+path[0]) {
					t.Errorf("example line %q does not run 'leaseside %s'", line, path[0])
				}
			}
			viaHelp, errHelp, code := runMain(append([]string{"help"}, path...)...)
			if code != ExitOK || errHelp != "" {
				t.Fatalf("leaseside help %v: exit %d, stderr %q", path, code, errHelp)
			}
			viaFlag, _, code := runMain(append(path, "--help")...)
			if code != ExitOK {
				t.Fatalf("leaseside %v --help: exit %d", path, code)
			}
			if viaHelp != viaFlag {
				t.Errorf("help %v and %v --help differ:\n%s\n---\n%s", path, path, viaHelp, viaFlag)
			}
			if !strings.Contains(viaHelp, c.Long) || !strings.Contains(viaHelp, "Usage:\n  leaseside "+strings.Join(path, " ")) {
				t.Errorf("help %v lacks the long help or the usage line:\n%s", path, viaHelp)
			}
			if m := dashFlag.FindString(viaHelp); m != "" {
				t.Errorf("help %v lists a single-dash long flag %q", path, m)
			}
		})
	}
}

// The command line says what was wrong, and exits 2.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "no command", args: nil, want: ""},
		{name: "misspelt command", args: []string{"aquire", "x"}, want: `unknown command "aquire" for "leaseside": did you mean acquire?`},
		{name: "misspelt subcommand", args: []string{"members", "remov", "g1"}, want: "did you mean remove?"},
		{name: "missing name", args: []string{"acquire"}, want: "missing NAME"},
		{name: "extra argument", args: []string{"release", "a", "b"}, want: `unexpected argument "b"`},
		{name: "argument to a command without", args: []string{"status", "x"}, want: `unexpected argument "x": 'leaseside status' takes no arguments`},
		{name: "two names to watch", args: []string{"watch", "a", "b"}, want: `unexpected argument "b"`},
		{name: "run without --", args: []string{"run", "x", "sleep", "1"}, want: "missing '-- CMD'"},
		{name: "run without a command", args: []string{"run", "x", "--"}, want: "missing CMD after '--'"},
		{name: "run without a name", args: []string{"run", "--", "true"}, want: "missing NAME"},
		{name: "single-dash long flag", args: []string{"acquire", "x", "-ttl", "5s"}, want: "unknown flag -ttl: spell it --ttl"},
		{name: "unknown flag", args: []string{"status", "--ttl", "5s"}, want: "unknown flag: --ttl"},
		{name: "bad duration", args: []string{"acquire", "x", "--wait", "soon"}, want: `invalid argument "soon" for "--wait"`},
		{name: "exclusive flags", args: []string{"acquire", "x", "--detached", "--owner-pid", "5"}, want: "--detached and --owner-pid exclude each other"},
		{name: "members remove without grantors", args: []string{"members", "remove", "g2"}, want: "needs --grantors"},
		{name: "bench without grantors", args: []string{"bench"}, want: "bench needs --grantors"},
		{name: "daemon without grantors", args: []string{"daemon"}, want: "give --join (gossip) or --grantors"},
		{name: "grantor names without TLS", args: []string{"daemon", "--grantors", "127.0.0.1:1", "--grantor-names", "g1"}, want: "--grantor-names needs TLS"},
		{name: "elect without --value", args: []string{"elect", "x", "--", "true"}, want: "missing --value"},
		{name: "elect without a command", args: []string{"elect", "x", "--value", "v"}, want: "missing '-- CMD'"},
		{name: "watch --holders without a name", args: []string{"watch", "--holders"}, want: "--holders needs NAME"},
		{name: "limit 0", args: []string{"acquire", "x", "--limit", "0"}, want: "--limit 0: how many may hold NAME at once, 1 (the default: one holder, an exclusive lease) to 256"},
		{name: "run limit 300", args: []string{"run", "x", "--limit", "300", "--", "true"}, want: "--limit 300: how many may hold NAME at once, 1 (the default: one holder, an exclusive lease) to 256"},
		{name: "check-token without a token", args: []string{"check-token", "x"}, want: "missing TOKEN"},
		{name: "check-token of a token that is none", args: []string{"check-token", "x", "0"}, want: `TOKEN "0": a token is a positive decimal integer`},
		{name: "write without a path", args: []string{"write", "x"}, want: "missing PATH"},
		{name: "write with an empty path", args: []string{"write", "x", ""}, want: "PATH is empty"},
		{name: "write with token 0", args: []string{"write", "x", "f", "--token", "0"}, want: `--token "0": a token is a positive decimal integer`},
		{name: "write with a bad name", args: []string{"write", "a b", "f", "--token", "1"}, want: `NAME "a b"`},
		{name: "fence-proxy without --listen", args: []string{"fence-proxy", "--backend", "http://x", "--state", "s"}, want: "missing --listen ADDR"},
		{name: "fence-proxy with a bad backend", args: []string{"fence-proxy", "--listen", ":0", "--backend", "x:1", "--state", "s"}, want: `--backend "x:1": give an http:// or https:// URL`},
		{name: "fence-proxy with a relative prefix", args: []string{"fence-proxy", "--listen", ":0", "--backend", "http://x", "--state", "s", "--fence-path-prefix", "data/"},
			want: `--fence-path-prefix "data/": a path prefix starts with /`},
		{name: "jeopardy signal 99", args: []string{"run", "x", "--jeopardy-signal", "99", "--", "true"}, want: "--jeopardy-signal 99: signal numbers are 1 to 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := runMain(tt.args...)
			if code != ExitUsage {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, ExitUsage, stderr)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q, want it to say %q", stderr, tt.want)
			}
			if tt.args != nil && !strings.Contains(stderr, "--help' for usage.") {
				t.Errorf("stderr %q does not point at the help", stderr)
			}
		})
	}
}

// --version and `version` print the same line.
func TestVersion(t *testing.T) {
	flag, _, code := runMain("--version")
	if code != ExitOK || !strings.HasPrefix(flag, "leaseside "+Version+" (protocol ") {
		t.Fatalf("--version: exit %d, %q", code, flag)
	}
	sub, _, code := runMain("version")
	if code != ExitOK || sub != flag {
		t.Errorf("version: exit %d, %q; --version printed %q", code, sub, flag)
	}
}

// --timeout adds to --wait only on the commands that have --wait, and
// run's --lock-delay states one default.
func TestFlagHelpFitsTheCommand(t *testing.T) {
	root := NewRootCommand(nil, nil)
	for _, c := range allCommands(root) {
		to := c.Flags().Lookup("timeout")
		if to == nil {
			continue
		}
		hasWait := c.Flags().Lookup("wait") != nil
		if says := strings.Contains(to.Usage, "--wait"); says != hasWait {
			t.Errorf("%s: --timeout help %q (command has --wait: %v)", c.CommandPath(), to.Usage, hasWait)
		}
	}
	help, _, _ := runMain("run", "--help")
	for _, line := range strings.Split(help, "\n") {
		if strings.Contains(line, "--lock-delay") && strings.Count(line, "default") != 1 {
			t.Errorf("run --lock-delay: %q, want one default", line)
		}
	}
	for _, cmd := range []string{"dev", "daemon", "grantor"} {
		help, _, _ := runMain(cmd, "--help")
		if !strings.Contains(help, "packaging/README.md") || !strings.Contains(help, configDocPath) {
			t.Errorf("%s --config does not say where its keys are documented:\n%s", cmd, help)
		}
	}
}

// Every config key --config names is documented where its help points.
func TestConfigKeysDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../packaging/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, keys := range []string{jsonKeys(fileConfig{}), jsonKeys(grantorFileConfig{})} {
		if keys == "" {
			t.Fatal("no keys")
		}
		for _, k := range strings.Split(keys, ", ") {
			if !strings.Contains(string(doc), "`"+k+"`") {
				t.Errorf("config key %q is not in packaging/README.md", k)
			}
		}
	}
}

// The sidecar's config file sets --metrics-addr (a packaged sidecar has no
// other way to export metrics), and the flag wins over it.
func TestSidecarConfigMetricsAddr(t *testing.T) {
	f := filepath.Join(t.TempDir(), "leaseside.json")
	if err := os.WriteFile(f, []byte(`{"grantors": ["127.0.0.1:7401"], "metrics_addr": "127.0.0.1:9464"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := sidecarFlags{configFile: f}
	if _, err := s.config(); err != nil {
		t.Fatal(err)
	}
	if s.metricsAddr != "127.0.0.1:9464" {
		t.Errorf("metrics_addr from the file: %q", s.metricsAddr)
	}
	s = sidecarFlags{configFile: f, metricsAddr: "127.0.0.1:1"}
	if _, err := s.config(); err != nil {
		t.Fatal(err)
	}
	if s.metricsAddr != "127.0.0.1:1" {
		t.Errorf("--metrics-addr did not win over the file: %q", s.metricsAddr)
	}
}

// The help lists the exit codes in ascending order (issue 24: 65 came
// after 79).
func TestExitCodesHelpInOrder(t *testing.T) {
	var codes []int
	for _, l := range strings.Split(exitCodesHelp, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || !strings.HasPrefix(l, "  ") || strings.HasPrefix(l, "   ") {
			continue
		}
		n, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		codes = append(codes, n)
	}
	if len(codes) < 8 || !slices.IsSorted(codes) {
		t.Errorf("exit codes in the help: %v, want all of them in ascending order", codes)
	}
}

// TestSubcommandNames: each entry of subcommands is named as its command
// is, so that a command line naming it builds that command alone, and
// the tree built for one command runs it as the whole tree does.
func TestSubcommandNames(t *testing.T) {
	e := &env{stdout: io.Discard, stderr: io.Discard}
	seen := map[string]bool{}
	for _, sub := range subcommands {
		c := sub.new(e)
		if c.Name() != sub.name {
			t.Errorf("subcommands names %q, its command is %q", sub.name, c.Name())
		}
		if len(c.Aliases) > 0 {
			t.Errorf("%s has aliases %v: commandFor would build every command for them", sub.name, c.Aliases)
		}
		if seen[sub.name] {
			t.Errorf("%s listed twice", sub.name)
		}
		seen[sub.name] = true
	}
	tests := []struct {
		name string
		args []string
		want int // subcommands built
	}{
		{name: "a client command", args: []string{"release", "a/b"}, want: 1},
		{name: "the version", args: []string{"version", "--json"}, want: 1},
		{name: "help", args: []string{"help", "release"}, want: len(subcommands)},
		{name: "a flag first", args: []string{"--version"}, want: len(subcommands)},
		{name: "completion", args: []string{"completion", "bash"}, want: len(subcommands)},
		{name: "an unknown command", args: []string{"relase"}, want: len(subcommands)},
		{name: "nothing", args: nil, want: len(subcommands)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := len(commandFor(tc.args)); got != tc.want {
				t.Fatalf("%q builds %d subcommands, want %d", tc.args, got, tc.want)
			}
		})
	}
}
