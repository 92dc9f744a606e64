package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Issue 24, item 3: in a command substitution (with a pipeline in it, or
// more than one command) the lease belongs to the shell that reads the
// output, not to the subshell that ends with the substitution; a subshell
// whose output goes elsewhere (one end of a pipeline) keeps its lease.
// In dash and bash, on the real binary; the shell's exit releases what it
// owned.
func TestShellSubstitutionOwner(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	dev := startProc(t, "dev", "dev", "--socket", sock, "--data-dir", filepath.Join(t.TempDir(), "dev"))
	dev.waitLine(t, "leaseside dev ready")
	dir := t.TempDir()
	if err := os.Symlink(leasesideBin(t), filepath.Join(dir, "leaseside")); err != nil {
		t.Fatal(err)
	}
	script := `echo "shell $$"
a=$(leaseside acquire "$1/pipe" --json | tr -d '\n'); echo "pipe $a"
b=$(leaseside acquire "$1/list" --json; true); echo "list $b" | tr -d '\n'; echo
c=$(echo "$(leaseside acquire "$1/nested" --json | tr -d '\n')"); echo "nested $c"
( leaseside acquire "$1/elsewhere" --json | tr -d '\n'; echo ) | sed 's/^/elsewhere /'
leaseside check "$1/pipe" >/dev/null && echo "held after the substitution"`
	for _, sh := range []string{"sh", "bash"} {
		t.Run(sh, func(t *testing.T) {
			cmd := exec.Command(sh, "-c", script, sh, "shell-"+sh)
			cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "LEASESIDE_SOCKET="+sock, "GORACE=atexit_sleep_ms=0")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", sh, err, out)
			}
			lines := map[string]string{}
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				k, v, _ := strings.Cut(l, " ")
				lines[k] = v
			}
			shell, _ := strconv.Atoi(lines["shell"])
			owner := func(k string) int {
				var g struct {
					OwnerPID int `json:"owner_pid"`
				}
				if err := json.Unmarshal([]byte(lines[k]), &g); err != nil || g.OwnerPID == 0 {
					t.Fatalf("%s: no grant (%v):\n%s", k, err, out)
				}
				return g.OwnerPID
			}
			for _, k := range []string{"pipe", "list", "nested"} {
				if got := owner(k); got != shell {
					t.Errorf("%s: owner pid %d, want the shell's, %d:\n%s", k, got, shell, out)
				}
			}
			if got := owner("elsewhere"); got == shell {
				t.Errorf("elsewhere: owner is the shell (%d), want the subshell whose output goes to sed:\n%s", got, out)
			}
			if _, ok := lines["held"]; !ok {
				t.Errorf("the lease taken in a substitution was not held after it:\n%s", out)
			}
			// The shell is gone: what it owned is released.
			for _, k := range []string{"pipe", "list", "nested"} {
				c := exec.Command(leasesideBin(t), "acquire", "shell-"+sh+"/"+k, "--detached", "--wait", "30s", "--socket", sock)
				if b, err := c.CombinedOutput(); err != nil {
					t.Errorf("%s after the shell's exit: %v: %s", k, err, b)
				}
			}
		})
	}
}
