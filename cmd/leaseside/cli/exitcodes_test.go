package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sharedDir returns a directory every local user may enter (t.TempDir is
// 0700), removed at the end of the test.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "leaseside-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// sharedBin returns the leaseside binary at a path any local user may run.
func sharedBin(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(leasesideBin(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "leaseside")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// nobody is the uid and gid of a user in no group of ours.
const nobody = 65534

// runAs runs bin with args as uid (with its own group only), env added
// to a bare environment, and returns stderr and the exit code.
func runAs(t *testing.T, uid int, env []string, bin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=/", "GORACE=atexit_sleep_ms=0"}, env...)
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: nobody, Groups: []uint32{}}}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if err != nil && code <= 0 {
		t.Fatalf("leaseside %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

// The exit code and the message for each situation a script meets, on
// real processes: a dev daemon whose socket belongs to a group, a daemon
// whose only grantor never elects a leader, and no daemon at all. The
// messages speak in the user's words: no protocol codes, no gRPC
// statuses, no "context deadline exceeded".
func TestExitCodes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it runs the client as another user")
	}
	dir := sharedDir(t)
	bin := sharedBin(t, dir)
	sock := filepath.Join(dir, "run", "leaseside.sock")
	dev := startProc(t, "dev", "dev", "--socket", sock, "--socket-group", "adm", "--data-dir", filepath.Join(t.TempDir(), "dev"))
	dev.waitLine(t, "leaseside dev ready")

	// A grantor that waits for a second one before it bootstraps: there
	// is never a leader. A daemon in front of it answers every acquire
	// with unavailable.
	lonely := startProc(t, "lonely grantor", "grantor", "--node-id", "lonely", "--bootstrap-expect", "2", "--data-dir", filepath.Join(t.TempDir(), "g"),
		"--rpc-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0")
	rpc := field(lonely.waitLine(t, "leaseside grantor ready"), "rpc")
	noLeader := filepath.Join(dir, "noleader.sock")
	d := startProc(t, "daemon without a leader", "daemon", "--grantors", rpc, "--socket", noLeader)
	d.waitLine(t, "leaseside daemon ready")

	out, stderr, code := runAs(t, 0, nil, bin, "acquire", "held", "--detached", "--socket", sock)
	tok := strings.TrimSpace(out)
	if code != 0 || tok == "" {
		t.Fatalf("acquire held: exit %d, token %q: %s", code, tok, stderr)
	}

	// Issue 24 item 8: once no grantor leader has answered the daemon for
	// a while, an acquire that may not wait is refused at once, not after
	// the daemon's request timeout. Until then one is tried (and runs
	// into --timeout): ask until the refusal comes.
	for began := time.Now(); ; {
		asked := time.Now()
		_, stderr, code := runAs(t, 0, nil, bin, "acquire", "x", "--timeout", "5s", "--socket", noLeader)
		took := time.Since(asked)
		if strings.Contains(stderr, "no grantor leader has answered this sidecar for") {
			if code != ExitUnavailable || took > 2*time.Second || !strings.Contains(stderr, "the grantor cluster has no leader") ||
				!strings.Contains(stderr, "an acquire with a wait keeps trying") {
				t.Errorf("no wait, no leader: exit %d after %v: %s", code, took, stderr)
			}
			break
		}
		if code != ExitUnavailable || time.Since(began) > time.Minute {
			t.Fatalf("no wait, no leader: exit %d after %v, never refused at once: %s", code, took, stderr)
		}
	}

	const ttlRange = "is outside the terms this daemon accepts: 1s to 24h"
	tests := []struct {
		name string
		uid  int
		env  []string
		args []string
		code int
		want []string
		// stdout: what stdout must say (--json failures)
		stdout []string
	}{
		{name: "acquired", args: []string{"acquire", "free", "--detached", "--socket", sock}, code: ExitOK},
		{name: "held, no wait", args: []string{"acquire", "held", "--socket", sock}, code: ExitHeld,
			want: []string{"lease held is held elsewhere (token " + tok + ")", "--wait DURATION waits for it"}},
		{name: "held, wait ran out", args: []string{"acquire", "held", "--wait", "1s", "--socket", sock}, code: ExitHeld,
			want: []string{"lease held is held elsewhere (token " + tok + "); --wait 1s ran out"}},
		{name: "run: held, wait ran out", args: []string{"run", "held", "--wait", "1s", "--socket", sock, "--", "true"}, code: ExitHeld,
			want: []string{"--wait 1s ran out"}},
		{name: "ttl 0", args: []string{"acquire", "x", "--ttl", "0", "--socket", sock}, code: ExitUsage, want: []string{"--ttl 0s " + ttlRange}},
		{name: "ttl 1ns", args: []string{"acquire", "x", "--ttl", "1ns", "--socket", sock}, code: ExitUsage, want: []string{"--ttl 1ns " + ttlRange}},
		{name: "ttl 999ms", args: []string{"acquire", "x", "--ttl", "999ms", "--socket", sock}, code: ExitUsage, want: []string{"--ttl 999ms " + ttlRange}},
		{name: "ttl 25h", args: []string{"acquire", "x", "--ttl", "25h", "--socket", sock}, code: ExitUsage, want: []string{"--ttl 25h " + ttlRange}},
		{name: "run ttl 999ms", args: []string{"run", "x", "--ttl", "999ms", "--socket", sock, "--", "true"}, code: ExitUsage, want: []string{"--ttl 999ms " + ttlRange}},
		{name: "ttl not whole ms", args: []string{"acquire", "x", "--ttl", "1500us", "--socket", sock}, code: ExitUsage,
			want: []string{"--ttl 1.5ms: a term is a whole number of milliseconds"}},
		{name: "negative wait", args: []string{"acquire", "x", "--wait", "-1s", "--socket", sock}, code: ExitUsage,
			want: []string{`invalid argument "-1s" for "--wait" flag: must be 0s or more, or forever`}},
		{name: "held, --conflict-exit-code", args: []string{"acquire", "held", "--conflict-exit-code", "9", "--socket", sock}, code: 9,
			want: []string{"lease held is held elsewhere (token " + tok + ")"}},
		{name: "run: held, --conflict-exit-code 0", args: []string{"run", "held", "--conflict-exit-code", "0", "--socket", sock, "--", "false"}, code: 0,
			want: []string{"lease held is held elsewhere"}},
		{name: "elect: held, wait ran out, --conflict-exit-code", args: []string{"elect", "held", "--value", "v", "--wait", "1s", "--conflict-exit-code", "4",
			"--socket", sock, "--", "true"}, code: 4, want: []string{"--wait 1s ran out"}},
		{name: "held, --json", args: []string{"acquire", "held", "--json", "--socket", sock}, code: ExitHeld,
			want:   []string{"lease held is held elsewhere"},
			stdout: []string{`"code": "lease_held"`, `"exit_code": 75`, `"holder_token": "` + tok + `"`, `"message": "lease held is held elsewhere (token ` + tok}},
		{name: "no daemon, --json", args: []string{"acquire", "x", "--json", "--socket", filepath.Join(dir, "none.sock")}, code: ExitUnavailable,
			stdout: []string{`"code": "no_daemon"`, `"exit_code": 69`, `"message": "no leaseside daemon at `}},
		{name: "conflict exit code 256", args: []string{"acquire", "x", "--conflict-exit-code", "256", "--socket", sock}, code: ExitUsage,
			want: []string{"an exit code is a number from 0 to 255"}},
		{name: "name with a space", args: []string{"acquire", "a b", "--socket", sock}, code: ExitUsage,
			want: []string{`NAME "a b": lease name has ' ' at byte 1`}},
		{name: "check: not held", args: []string{"check", "nothing", "--socket", sock}, code: ExitNotHeld},
		{name: "release: not held", args: []string{"release", "nothing", "--socket", sock}, code: ExitError},
		{name: "no daemon", args: []string{"status", "--socket", filepath.Join(dir, "none.sock")}, code: ExitUnavailable,
			want: []string{"no leaseside daemon at " + filepath.Join(dir, "none.sock") + " (given with --socket): start one with 'leaseside dev'"}},
		{name: "outside the socket's group", uid: nobody, args: []string{"acquire", "x", "--socket", sock}, code: ExitUnavailable,
			want: []string{"permission denied: add yourself to group adm (sudo usermod -aG adm $USER", sock + " (given with --socket)"}},
		{name: "outside the group, socket from the environment", uid: nobody, env: []string{"LEASESIDE_SOCKET=" + sock}, args: []string{"status"},
			code: ExitUnavailable, want: []string{"permission denied: add yourself to group adm", sock + " (from $LEASESIDE_SOCKET)"}},
		{name: "no leader, --timeout ran out", args: []string{"run", "x", "--wait", "1s", "--timeout", "2s", "--socket", noLeader, "--", "true"}, code: ExitUnavailable,
			want: []string{"no answer within --wait 1s plus --timeout 2s: the grantor cluster may have no leader"}},
		{name: "no leader, --wait and --timeout ran out", args: []string{"acquire", "x", "--wait", "1s", "--timeout", "1s", "--socket", noLeader},
			code: ExitUnavailable, want: []string{"no answer within --wait 1s plus --timeout 1s"}},
		{name: "no leader, the daemon gives up", args: []string{"acquire", "x", "--socket", noLeader}, code: ExitUnavailable,
			want: []string{"grantor"}},
		{name: "run: no leader", args: []string{"run", "x", "--wait", "1s", "--timeout", "2s", "--socket", noLeader, "--", "true"}, code: ExitUnavailable,
			want: []string{"no answer within --wait 1s plus --timeout 2s"}},
		{name: "leader: no leader, --timeout ran out", args: []string{"leader", "x", "--timeout", "2s", "--socket", noLeader}, code: ExitUnavailable,
			want: []string{"no answer within --timeout 2s"}},
		{name: "check-token: no leader", args: []string{"check-token", "x", "1", "--timeout", "2s", "--socket", noLeader}, code: ExitUnavailable,
			want: []string{"no answer within --timeout 2s"}},
		{name: "elect: no leader", args: []string{"elect", "x", "--value", "v", "--wait", "1s", "--timeout", "1s", "--socket", noLeader, "--", "true"},
			code: ExitUnavailable},
		{name: "elect: held, wait ran out", args: []string{"elect", "held", "--value", "v", "--wait", "1s", "--socket", sock, "--", "true"}, code: ExitHeld,
			want: []string{"lease held is held elsewhere (token " + tok + "); --wait 1s ran out"}},
		{name: "elect: no daemon", args: []string{"elect", "x", "--value", "v", "--socket", filepath.Join(dir, "none.sock"), "--", "true"}, code: ExitUnavailable,
			want: []string{"no leaseside daemon at"}},
		{name: "observe: no daemon", args: []string{"observe", "x", "--socket", filepath.Join(dir, "none.sock")}, code: ExitUnavailable,
			want: []string{"no leaseside daemon at"}},
		{name: "leader: none", args: []string{"leader", "nobody", "--socket", sock}, code: ExitNotHeld, want: []string{"nobody leads nobody"}},
		{name: "check-token: not live", args: []string{"check-token", "held", "1" + tok, "--socket", sock}, code: ExitNotHeld,
			want: []string{"is not live (live: token " + tok + ")"}},
		{name: "check-token: live", args: []string{"check-token", "held", tok, "--socket", sock}, code: ExitOK},
		{name: "run: another limit", args: []string{"run", "held", "--limit", "2", "--socket", sock, "--", "true"}, code: ExitUsage,
			want: []string{"--limit 2 refused", "limit 1"}},
		{name: "elect: value with a control character", args: []string{"elect", "x", "--value", "a\tb", "--socket", sock, "--", "true"}, code: ExitUsage,
			want: []string{"--value has control character"}},
		{name: "run: no such jeopardy signal", args: []string{"run", "x", "--jeopardy-signal", "SIGNOPE", "--socket", sock, "--", "true"}, code: ExitUsage,
			want: []string{"--jeopardy-signal SIGNOPE: no such signal"}},
		{name: "unknown command", args: []string{"aquire", "x"}, code: ExitUsage, want: []string{"did you mean acquire?"}},
	}
	raw := []string{"rpc error", "code =", "context deadline exceeded", "bad_request", "invalid_ttl", "ttl_ms", "unavailable:"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runAs(t, tt.uid, tt.env, bin, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			for _, w := range tt.stdout {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout does not say %q:\n%s", w, stdout)
				}
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr)
				}
			}
			for _, r := range raw {
				if strings.Contains(stderr, r) {
					t.Errorf("stderr has the raw %q:\n%s", r, stderr)
				}
			}
		})
	}
}
