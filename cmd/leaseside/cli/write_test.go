package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/leaseside/leaseside/ipc"
)

// writeCLI runs `leaseside write` with stdin and extra environment, and
// returns stdout, stderr and the exit code.
func writeCLI(t *testing.T, stdin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(leasesideBin(t), append([]string{"write"}, args...)...)
	cmd.Env = append(append(os.Environ(), "GORACE=atexit_sleep_ms=0", EnvLease+"=", EnvToken+"="), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if err != nil && code <= 0 {
		t.Fatalf("leaseside write %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

// The token from each of its sources, a stale one refused with exit 4
// naming both tokens and leaving the file, and --json.
func TestWriteCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	sock := startDevSocket(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	held := strings.TrimSpace(must(runCLI(t, "acquire", "w/held", "--detached", "--socket", sock)))
	tests := []struct {
		name    string
		lease   string
		content string
		env     []string
		args    []string
		code    int
		says    []string
	}{
		{name: "--token", lease: "w/a", content: "five", args: []string{"--token", "5"}},
		{name: "older --token", lease: "w/a", content: "three", args: []string{"--token", "3"}, code: ExitStale,
			says: []string{"token 3 of w/a is stale, token 5 has written it since"}},
		{name: "from run's environment", lease: "w/a", content: "seven", env: []string{EnvLease + "=w/a", EnvToken + "=7"}},
		{name: "older from run's environment", lease: "w/a", content: "six", env: []string{EnvLease + "=w/a", EnvToken + "=6"}, code: ExitStale,
			says: []string{"token 6 of w/a is stale, token 7"}},
		{name: "--token over the environment", lease: "w/a", content: "eight", env: []string{EnvLease + "=w/a", EnvToken + "=6"}, args: []string{"--token", "8"}},
		{name: "bad token in the environment", lease: "w/a", content: "x", env: []string{EnvLease + "=w/a", EnvToken + "=x"}, code: ExitUsage,
			says: []string{`$LEASESIDE_TOKEN "x": a token is a positive decimal integer`}},
		{name: "another lease's environment asks the daemon", lease: "w/held", content: "held", env: []string{EnvLease + "=w/a", EnvToken + "=9"}},
		{name: "not held here", lease: "w/free", content: "x", code: ExitNotHeld, says: []string{"no token to write under", "or give --token"}},
		{name: "no daemon", lease: "w/free", content: "x", args: []string{"--socket", filepath.Join(dir, "none.sock")}, code: ExitUnavailable,
			says: []string{"no leaseside daemon at"}},
	}
	want := ""
	for _, tt := range tests {
		args := append([]string{tt.lease, path, "--socket", sock}, tt.args...)
		_, stderr, code := writeCLI(t, tt.content, tt.env, args...)
		if code != tt.code {
			t.Fatalf("%s: exit %d, want %d: %s", tt.name, code, tt.code, stderr)
		}
		for _, s := range tt.says {
			if !strings.Contains(stderr, s) {
				t.Fatalf("%s: stderr %q does not say %q", tt.name, stderr, s)
			}
		}
		if code == ExitOK {
			want = tt.content
		}
		if b, _ := os.ReadFile(path); string(b) != want {
			t.Fatalf("%s: file holds %q, want %q", tt.name, b, want)
		}
	}
	out, _, code := writeCLI(t, "again", nil, "w/a", path, "--token", "2", "--json")
	var res writeResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != ExitStale {
		t.Fatalf("--json of a refused write: exit %d, %q: %v", code, out, err)
	}
	if res.Written || res.Highest != "8" || res.Token != "2" || res.Lease != "w/a" || res.Path != path {
		t.Fatalf("--json of a refused write: %+v, want token 2 below highest 8", res)
	}
	var refusal struct{ Error jsonErrorBody }
	if json.Unmarshal([]byte(out), &refusal); refusal.Error.Code != "stale_token" || refusal.Error.ExitCode != ExitStale {
		t.Fatalf("--json of a refused write: error %+v, want stale_token, exit 4", refusal.Error)
	}
	out, _, code = writeCLI(t, "x", nil, "w/free", path, "--socket", sock, "--json")
	if json.Unmarshal([]byte(out), &refusal); code != ExitNotHeld || refusal.Error.Code != ipc.CodeNotHeld || refusal.Error.ExitCode != ExitNotHeld {
		t.Fatalf("--json of a write under no token: exit %d, %q", code, out)
	}
	res = writeResult{}
	out, _, code = writeCLI(t, "again", nil, "w/held", path, "--socket", sock, "--json")
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != ExitOK || !res.Written || res.Token != held {
		t.Fatalf("--json of a write: exit %d, %q: %v", code, out, err)
	}
}

// jsonErrorBody is the "error" object of --json's failures.
type jsonErrorBody struct {
	Code     string `json:"code"`
	ExitCode int    `json:"exit_code"`
}

func must(stdout, stderr string, code int) string {
	if code != 0 {
		panic(fmt.Sprintf("exit %d: %s", code, stderr))
	}
	return stdout
}

// Writer processes at once with interleaved tokens, in rounds: after each
// round the file is the round's highest token's.
func TestWriteCommandConcurrentProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	path := filepath.Join(t.TempDir(), "f")
	const writers, rounds = 6, 3
	for r := 0; r < rounds; r++ {
		order := rand.Perm(writers)
		var wg sync.WaitGroup
		codes := make([]int, writers)
		for w := range writers {
			tok := strconv.Itoa(r*writers + order[w] + 1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, codes[w] = writeCLI(t, "token "+tok, nil, "w/c", path, "--token", tok)
			}()
		}
		wg.Wait()
		for w, c := range codes {
			if c != ExitOK && c != ExitStale {
				t.Fatalf("round %d, token %d: exit %d", r, r*writers+order[w]+1, c)
			}
		}
		if b, _ := os.ReadFile(path); string(b) != "token "+strconv.Itoa((r+1)*writers) {
			t.Fatalf("round %d: file holds %q, want the round's highest token's", r, b)
		}
	}
}
