package packaging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The versions the upgrade test installs, one after the other.
const (
	oldVersion    = "1.2.3-rc.1"
	newVersion    = "1.2.3"
	newDebVersion = "1.2.3"
)

// leaseTTL is every test lease's term: long enough that a loaded machine
// renews well within it.
const leaseTTL = "30s"

// childScript is the `leaseside run` holder's command: it records its pid
// and token, and every signal it gets (it goes on running after one).
const childScript = `for s in HUP INT QUIT USR1 USR2 TERM; do trap "echo $s >> /var/tmp/child.signals" $s; done
echo "$$ $LEASESIDE_TOKEN" > /var/tmp/child.new && mv /var/tmp/child.new /var/tmp/child.started
echo child started
while :; do sleep 1; done`

// TestDebUpgradeUnderLiveLeases installs the .deb of oldVersion in a box
// (a throwaway overlay copy of this machine), configures a one-grantor
// TLS cluster in /etc/leaseside as an admin would, starts the grantor and
// the sidecar (socket-activated, as `systemctl enable leaseside` sets it
// up) as the installed units tell systemd to (the mock: systemd_test.go),
// and holds leases of each owner kind through the installed CLI: a
// `leaseside run` holder, detached leases and a lease owned by a pid.
// Then:
//
//   - dpkg -i of newVersion's .deb: the maintainer scripts neither stop nor
//     restart the sidecar (the same process still runs, and the scripts
//     asked systemctl for nothing but daemon-reload), the edited configs
//     stay, and every lease is held with its token;
//   - `systemctl restart leaseside` (the mock: the unit's KillSignal to its
//     process group, RuntimeDirectory kept or removed as the unit says,
//     ExecStart again, now the new binary, on the same listening socket):
//     the new daemon resumes every lease with its token, the run holder's
//     connection resumes its lease, and its child got no signal;
//   - in each state, the grantor lists each lease once with the same
//     token, the sidecar lists the same, and another acquire of each name
//     is refused: nothing lost, nothing granted twice;
//   - dpkg --purge: the prerm stops the units (disable --now), the binary
//     and the configs go, and what postremove.sh promises to keep stays:
//     the grantor's raft log and the groups.
func TestDebUpgradeUnderLiveLeases(t *testing.T) {
	b := newBox(t)
	start := time.Now()
	oldPkg, newPkg := makePackage(t, oldVersion), makePackage(t, newVersion)
	for path, src := range map[string]string{"/var/tmp/pkg/old.deb": oldPkg.deb, "/var/tmp/pkg/new.deb": newPkg.deb} {
		f, err := os.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		b.write(t, path, f, 0o644)
		f.Close()
	}
	// What each step took, for a slow run.
	last := start
	lap := func(step string) {
		t.Logf("%s: %v", step, time.Since(last).Round(time.Millisecond))
		last = time.Now()
	}
	lap("two packages built")

	b.installMockSystemd(t)
	// man-db's trigger (mandb over every man page of the machine: half a
	// minute of each dpkg run on a loaded machine) is off, as in Debian's
	// container images; it is no part of what the test shows.
	b.run(t, "rm", "-f", "/var/lib/man-db/auto-update")
	b.run(t, "dpkg", "-i", "/var/tmp/pkg/old.deb")
	lap("dpkg -i " + oldVersion)
	configureCluster(t, b)
	grantor := b.startService(t, "leaseside-grantor.service", "")
	sidecar := b.startService(t, "leaseside.service", "leaseside.socket")
	checkServes(t, sidecar.main.pid(), sidecar.sockets[0])
	sidecar.main.waitFor(t, "reached the grantor leader", timeout)
	lap("configured and started")

	// Leases of every owner kind, through the installed CLI.
	want := map[string]string{} // lease name: token
	for i := range 3 {
		name := fmt.Sprintf("upgrade/detached-%d", i)
		want[name] = acquire(t, b, name, "--detached")
	}
	pidOwner := b.start(t, "pid owner", nil, nil, "sleep", "3600")
	want["upgrade/pid"] = acquire(t, b, "upgrade/pid", "--owner-pid", strconv.Itoa(pidOwner.pid()))
	holder := b.start(t, "leaseside run", nil, nil, "leaseside", "run", "upgrade/run", "--ttl", leaseTTL, "--", "sh", "-c", childScript)
	holder.waitFor(t, "child started", timeout)
	f := strings.Fields(b.run(t, "cat", "/var/tmp/child.started"))
	if len(f) != 2 {
		t.Fatalf("child.started: %q", f)
	}
	childPID, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-childPID, syscall.SIGKILL) }) // run makes its child a group leader
	want["upgrade/run"] = f[1]
	held := func(phase string) {
		t.Helper()
		checkHeld(t, b, phase, want)
		for _, p := range []*proc{grantor.main, sidecar.main, pidOwner, holder} {
			if !p.running() {
				t.Fatalf("%s: %s exited (%v)\n%s", phase, p.name, p.err, p.output())
			}
		}
		if err := syscall.Kill(childPID, 0); err != nil {
			t.Fatalf("%s: run's child %d: %v", phase, childPID, err)
		}
		if out, _, code := b.try(nil, "cat", "/var/tmp/child.signals"); code == 0 {
			t.Fatalf("%s: run's child was signalled: %q\n%s", phase, out, holder.output())
		}
	}
	lap("leases taken")
	held("installed " + oldVersion)
	lap("leases checked")

	// The upgrade: the old sidecar goes on running the leases.
	oldSidecar := sidecar.main
	b.run(t, "dpkg", "-i", "/var/tmp/pkg/new.deb")
	lap("dpkg -i " + newVersion)
	if got := b.run(t, "dpkg-query", "-W", "-f", "${Version}", "leaseside"); got != newDebVersion {
		t.Fatalf("installed version %q after dpkg -i, want %q", got, newDebVersion)
	}
	if got := b.run(t, "leaseside", "version"); !strings.Contains(got, newVersion) {
		t.Errorf("/usr/bin/leaseside version after the upgrade: %q, want %s", got, newVersion)
	}
	for _, c := range b.systemctlCalls(t) {
		if c != "daemon-reload" {
			t.Errorf("a maintainer script ran systemctl %s (install or upgrade: only daemon-reload)", c)
		}
	}
	if !oldSidecar.running() {
		t.Fatalf("dpkg -i stopped the sidecar\n%s", oldSidecar.output())
	}
	if cfg := b.run(t, "cat", "/etc/leaseside/leaseside.json"); !strings.Contains(cfg, "127.0.0.1:7403") {
		t.Errorf("the upgrade replaced the edited /etc/leaseside/leaseside.json:\n%s", cfg)
	}
	held("dpkg -i " + newVersion)

	// systemctl restart leaseside: the new binary takes over the leases.
	lap("upgrade checked")
	sidecar.restart(t)
	checkServes(t, sidecar.main.pid(), sidecar.sockets[0])
	// The daemon logs what it resumed before it is ready; the run holder
	// has 10 s to resume its lease.
	checkResumeLine(t, sidecar.main.output(), len(want))
	sidecar.main.waitFor(t, "a client resumed its lease", time.Minute)
	lap("restart: from SIGTERM to the run holder's resumed lease")
	held("systemctl restart leaseside")
	if strings.Contains(holder.output(), "lost") {
		t.Errorf("the run holder reported a loss\n%s", holder.output())
	}
	lap("restart checked")

	// Purge: the prerm stops the units; the raft log stays.
	b.run(t, "dpkg", "--purge", "leaseside")
	calls := b.systemctlCalls(t)
	if !slices.Contains(calls, "disable --now leaseside.socket leaseside.service leaseside-grantor.service") {
		t.Errorf("dpkg --purge did not stop and disable the units: systemctl calls %q", calls)
	}
	// The mock systemctl waited for both to exit.
	sidecar.main.waitExit(t, 10*time.Second)
	grantor.main.waitExit(t, 10*time.Second)
	for _, p := range []string{"/usr/bin/leaseside", "/etc/leaseside/leaseside.json", "/etc/leaseside/grantor.json", "/lib/systemd/system/leaseside.service"} {
		if b.exists(p) {
			t.Errorf("%s left after dpkg --purge", p)
		}
	}
	if ls := b.run(t, "ls", "/var/lib/leaseside/"); !strings.Contains(ls, "raft") {
		t.Errorf("/var/lib/leaseside after dpkg --purge holds %q, want the grantor's raft log (postremove.sh keeps it)", ls)
	}
	for _, g := range []string{"leaseside", "leaseside-grantor"} {
		b.gid(t, g)
	}
	lap("purged and checked")
}

// configureCluster sets up what an admin would in the box's /etc/leaseside
// before starting the units: a cluster CA, a grantor and a sidecar
// certificate, a gossip key, and configs for one grantor on loopback
// (the box has its own network namespace, so the packaged ports are free).
func configureCluster(t *testing.T, b *box) {
	t.Helper()
	const dir = "/etc/leaseside/tls"
	b.run(t, "leaseside", "tls", "ca", "create", "--dir", dir)
	b.run(t, "leaseside", "tls", "cert", "create", "--dir", dir, "--grantor", "grantor1", "--group", "leaseside-grantor")
	b.run(t, "leaseside", "tls", "cert", "create", "--dir", dir, "--sidecar", "host1")
	key := b.run(t, "leaseside", "tls", "gossip-key")
	b.write(t, "/etc/leaseside/gossip.key", strings.NewReader(key), 0o640)
	b.run(t, "chgrp", "leaseside-grantor", "/etc/leaseside/gossip.key")
	editJSON(t, b, "/etc/leaseside/grantor.json", map[string]any{
		"raft_addr": "127.0.0.1:7402", "gossip_addr": "127.0.0.1:7403", "join": []string{}, "bootstrap_expect": 1,
	})
	editJSON(t, b, "/etc/leaseside/leaseside.json", map[string]any{"join": []string{"127.0.0.1:7403"}})
}

// editJSON sets keys in the JSON file path in the box.
func editJSON(t *testing.T, b *box, path string, set map[string]any) {
	t.Helper()
	cfg := map[string]any{}
	if err := json.Unmarshal([]byte(b.run(t, "cat", path)), &cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	maps.Copy(cfg, set)
	out, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b.write(t, path, bytes.NewReader(out), 0o644)
}

// acquire takes the lease name through the box's leaseside and returns
// its token.
func acquire(t *testing.T, b *box, name string, args ...string) string {
	t.Helper()
	var g struct {
		Token string `json:"token"`
	}
	out := b.run(t, append([]string{"leaseside", "acquire", name, "--ttl", leaseTTL, "--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &g); err != nil || g.Token == "" {
		t.Fatalf("acquire %s: %v: %q", name, err, out)
	}
	return g.Token
}

// checkHeld checks that the sidecar holds exactly the leases in want
// (name: token), that the grantor lists each once with that token, and
// that nobody else gets one of them now.
func checkHeld(t *testing.T, b *box, phase string, want map[string]string) {
	t.Helper()
	var st struct {
		Leases []struct {
			Lease string `json:"lease"`
			Token string `json:"token"`
		} `json:"leases"`
	}
	out := b.run(t, "leaseside", "status", "--json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("%s: status --json: %v: %q", phase, err, out)
	}
	got := map[string]string{}
	for _, l := range st.Leases {
		if _, dup := got[l.Lease]; dup {
			t.Errorf("%s: the sidecar lists %s twice", phase, l.Lease)
		}
		got[l.Lease] = l.Token
	}
	if !maps.Equal(got, want) {
		t.Errorf("%s: the sidecar holds %v, want %v", phase, got, want)
	}

	var cl struct {
		Leases []struct {
			Lease   string `json:"lease"`
			Holders []struct {
				Token string `json:"token"`
			} `json:"holders"`
		} `json:"leases"`
	}
	out = b.run(t, "leaseside", "leases", "--prefix", "upgrade/", "--json")
	if err := json.Unmarshal([]byte(out), &cl); err != nil {
		t.Fatalf("%s: leases --json: %v: %q", phase, err, out)
	}
	got = map[string]string{}
	for _, l := range cl.Leases {
		if len(l.Holders) != 1 {
			t.Errorf("%s: the grantor lists %d holders of %s: %+v", phase, len(l.Holders), l.Lease, l.Holders)
			continue
		}
		got[l.Lease] = l.Holders[0].Token
	}
	if !maps.Equal(got, want) {
		t.Errorf("%s: the grantor lists %v, want %v", phase, got, want)
	}

	for name := range want {
		out, errOut, code := b.try(nil, "leaseside", "acquire", name, "--detached", "--ttl", leaseTTL)
		if code != 75 {
			t.Errorf("%s: another acquire of %s: exit %d, want 75 (held)\n%s%s", phase, name, code, out, errOut)
		}
	}
}

// resumeCount is a count in the daemon's "resumed the previous daemon's
// leases" log line.
var resumeCount = regexp.MustCompile(`\b(leases|lapsed|owner_gone|awaiting_resume)=(\d+)`)

// checkResumeLine checks the new daemon's account of what it resumed: n
// leases kept, none lapsed or gone, the run holder's awaited; anything
// else fails t at once.
func checkResumeLine(t *testing.T, log string, n int) {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "resumed the previous daemon's leases") {
			continue
		}
		counts := map[string]string{}
		for _, m := range resumeCount.FindAllStringSubmatch(line, -1) {
			counts[m[1]] = m[2]
		}
		want := map[string]string{"leases": strconv.Itoa(n), "lapsed": "0", "owner_gone": "0", "awaiting_resume": "1"}
		if !maps.Equal(counts, want) {
			t.Fatalf("resumed %v, want %v: %s", counts, want, line)
		}
		return
	}
	t.Fatalf("the new daemon resumed nothing: no resume line in its log:\n%s", log)
}
