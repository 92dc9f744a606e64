package integration

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// victimUID is the user whose per-user socket nobody squats: not root
// (root's clients use the system socket), not nobody.
const victimUID = 4242

// asVictim runs argv as uid victimUID (gid nobody, the system daemon's
// socket group) with no XDG_RUNTIME_DIR and TMPDIR tmp, so its per-user
// socket is tmp/leaseside-4242/leaseside.sock, in a mount namespace of
// its own where /run/leaseside/leaseside.sock is the system daemon's
// socket sysSocket: where clients look for it, without touching the
// host's /run.
func asVictim(t *testing.T, sysSocket, tmp string, argv ...string) result {
	t.Helper()
	script := `mount -t tmpfs tmpfs /run && mkdir /run/leaseside && touch /run/leaseside/leaseside.sock &&
		mount --bind "$1" /run/leaseside/leaseside.sock && shift && exec "$@"`
	args := append([]string{"-m", "--propagation", "private", "sh", "-c", script, "sh", sysSocket,
		"setpriv", "--reuid", strconv.Itoa(victimUID), "--regid", strconv.Itoa(nobody), "--clear-groups",
		"env", "-u", "XDG_RUNTIME_DIR", "-u", "LEASESIDE_SOCKET", "TMPDIR=" + tmp}, argv...)
	cmd := exec.Command("unshare", args...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: o.String(), stderr: e.String()}
}

// A squatted per-user socket (review R8-6): root runs the system daemon;
// nobody creates the victim's /tmp/leaseside-4242 first, runs its own
// `leaseside dev` there and opens it to all. The victim's CLI and Python
// client, given no socket, must not take leases from it: they warn,
// naming the directory's owner, and use the system daemon, where the
// lease then is (and not at nobody's daemon).
func TestSquattedUserSocketIsNotUsed(t *testing.T) {
	t.Parallel()
	sys := abuseDev(t, `{}`)
	tmp, err := os.MkdirTemp("", "lssq")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	if err := os.Chmod(tmp, os.ModeSticky|0o777); err != nil { // as /tmp is
		t.Fatal(err)
	}
	squat := filepath.Join(tmp, "leaseside-"+strconv.Itoa(victimUID))
	data := filepath.Join(tmp, "nobody-data")
	if err := exec.Command("setpriv", "--reuid", strconv.Itoa(nobody), "--regid", strconv.Itoa(nobody), "--clear-groups",
		"mkdir", "-m", "0750", squat, data).Run(); err != nil {
		t.Fatalf("nobody's mkdir: %v", err)
	}
	fake := filepath.Join(squat, "leaseside.sock")
	p := startProcess(t, "nobody's leaseside dev", asNobody(bin, "dev", "--socket", fake, "--data-dir", data))
	p.waitLine(t, 0, "leaseside dev ready")
	if err := errors.Join(os.Chmod(squat, 0o777), os.Chmod(fake, 0o666)); err != nil {
		t.Fatal(err)
	}

	r := asVictim(t, sys.socket, tmp, bin, "acquire", "jobs/x", "--detached")
	if r.code != 0 || !strings.Contains(r.stderr, "warning") || !strings.Contains(r.stderr, squat+" belongs to uid 65534") {
		t.Fatalf("the victim's acquire: exit %d\nstdout: %s\nstderr: %s\nwant exit 0 from the system daemon, warning that %s is nobody's", r.code, r.stdout, r.stderr, squat)
	}
	t.Logf("the victim's acquire: %s", strings.TrimSpace(r.stderr))
	if got := names(t, cli(t, sys.socket, "status", "--json").must(t, 0)); !slices.Equal(got, []string{"jobs/x"}) {
		t.Fatalf("the system daemon holds %v, want jobs/x", got)
	}
	if got := names(t, cli(t, fake, "status", "--json").must(t, 0)); len(got) != 0 {
		t.Fatalf("nobody's daemon holds %v: the victim took a lease from it", got)
	}

	// The Python client, a copy nobody and the victim may read. It prints
	// its peer: the system daemon's socket, by the name it was bound at.
	py := filepath.Join(tmp, "py")
	src, err := os.ReadFile("../../clients/python/leaseside.py")
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(os.Mkdir(py, 0o755), os.WriteFile(filepath.Join(py, "leaseside.py"), src, 0o644)); err != nil {
		t.Fatal(err)
	}
	r = asVictim(t, sys.socket, tmp, "/usr/bin/python3", "-B", "-c",
		"import sys; sys.path.insert(0, sys.argv[1]); import leaseside\nwith leaseside.Client() as c: print(c._sock.getpeername())", py)
	if r.code != 0 || strings.TrimSpace(r.stdout) != sys.socket || !strings.Contains(r.stderr, squat+" belongs to uid 65534") {
		t.Fatalf("the victim's Python client: exit %d\nstdout: %s\nstderr: %s\nwant it connected to the system socket, warning that %s is nobody's", r.code, r.stdout, r.stderr, squat)
	}
}
