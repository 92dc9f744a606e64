package packaging

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The mock of systemd: a box has no systemd as PID 1, so the test does by
// hand what systemd would do with the installed unit files, read from the
// box (not from the source tree):
//
//   - start: makes RuntimeDirectory= (RuntimeDirectoryMode=, owned by the
//     unit's user and group) and StateDirectory= (StateDirectoryMode=; with
//     DynamicUser=, /var/lib/private/NAME and the symlink /var/lib/NAME),
//     then runs ExecStart= as User= (DynamicUser=: uid and gid 61184, the
//     first of systemd's dynamic range), Group= and SupplementaryGroups=,
//     with UMask=, systemd's PATH, RUNTIME_DIRECTORY and STATE_DIRECTORY,
//     in a process group of its own (the unit's cgroup). Type=notify: it
//     waits for the daemon's ready log line, which the daemon writes just
//     before it sends READY=1 (there is no NOTIFY_SOCKET);
//   - stop: KillSignal= (default SIGTERM) to the process group for
//     KillMode=control-group or mixed (the default control-group), to the
//     main process for process; SIGKILL after TimeoutStopSec= (default
//     90 s); then removes RuntimeDirectory= unless
//     RuntimeDirectoryPreserve= is yes or (on a restart) restart;
//   - restart: stop, then start with the binary now installed;
//   - systemctl, for the maintainer scripts (/run/systemd/system exists, so
//     they believe systemd runs): /usr/local/sbin/systemctl records every
//     call in /run/mock-systemd/calls, and stop, restart, try-restart, kill
//     and disable --now send SIGTERM to the process group of each named
//     unit the mock runs and wait for it to exit.
//
//   - socket activation: the socket unit's ListenStream= path is bound in
//     the box (by the test binary itself, chrooted there: TestMain) with
//     SocketUser=, SocketGroup=, SocketMode= and DirectoryMode=, and the
//     test holds the listening socket across the service's restarts, as
//     systemd does, and passes it as fd 3 with LISTEN_FDS, LISTEN_PID and
//     LISTEN_FDNAMES.
//
// Not reproduced: the sandboxing settings (ProtectSystem= and the
// like), the journal, and the bind mount that lets a DynamicUser= service reach /var/lib/private/NAME
// (the mock makes /var/lib/private 0711 instead of 0700).

// mockSystemctl is /usr/local/sbin/systemctl in the box.
const mockSystemctl = `#!/bin/sh
# The mock systemctl of packaging/systemd_test.go: records the call, and
# stops the named units the test runs (their pids in /run/mock-systemd).
echo "$*" >> /run/mock-systemd/calls
stop=
case "$1" in
stop | restart | try-restart | reload-or-restart | try-reload-or-restart | kill) stop=1 ;;
disable | mask) for a in "$@"; do [ "$a" = --now ] && stop=1; done ;;
esac
[ -n "$stop" ] || exit 0
for u in "$@"; do
	f=/run/mock-systemd/$u.pid
	[ -f "$f" ] || continue
	p=$(cat "$f")
	rm -f "$f"
	kill -TERM "-$p" 2>/dev/null || continue
	# systemd's SIGKILL after the default TimeoutStopSec, 90 s
	i=0
	while kill -0 "$p" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 900 ] || kill -KILL "-$p"
		sleep 0.1
	done
done
exit 0
`

// installMockSystemd makes the box look as if systemd ran: the
// /run/systemd/system directory the maintainer scripts test, and the mock
// systemctl.
func (b *box) installMockSystemd(t *testing.T) {
	t.Helper()
	b.run(t, "mkdir", "-p", "/run/systemd/system", "/run/mock-systemd")
	b.write(t, "/usr/local/sbin/systemctl", strings.NewReader(mockSystemctl), 0o755)
}

// systemctlCalls is what the maintainer scripts asked of systemctl so far.
func (b *box) systemctlCalls(t *testing.T) []string {
	t.Helper()
	out, _, _ := b.try(nil, "cat", "/run/mock-systemd/calls")
	var calls []string
	for _, l := range strings.Split(out, "\n") {
		if l != "" {
			calls = append(calls, l)
		}
	}
	return calls
}

// unit is the [Service] section of an installed unit file.
type unit struct {
	name     string
	settings map[string][]string
}

// mockedKeys are the [Service] settings the mock does what systemd would
// with, or that do not change how it starts or stops the service; a unit
// with any other setting fails the test, which would not know what it
// leaves out.
var mockedKeys = []string{"Type", "ExecStart", "ExecReload", "Restart", "RestartSec", "RestartPreventExitStatus",
	"User", "Group", "DynamicUser", "SupplementaryGroups", "UMask", "KillSignal", "KillMode", "TimeoutStopSec",
	"RuntimeDirectory", "RuntimeDirectoryMode", "RuntimeDirectoryPreserve", "StateDirectory", "StateDirectoryMode", "LimitNOFILE",
	// Sandboxing, not reproduced.
	"NoNewPrivileges", "CapabilityBoundingSet", "ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices",
	"ProtectProc", "ProcSubset", "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs",
	"ProtectControlGroups", "ProtectHostname", "PrivateMounts", "RestrictAddressFamilies", "RestrictNamespaces",
	"RestrictRealtime", "RestrictSUIDSGID", "LockPersonality", "MemoryDenyWriteExecute", "SystemCallArchitectures",
	"SystemCallFilter", "SystemCallErrorNumber"}

// readUnit reads the [Service] section of /lib/systemd/system/NAME in the
// box.
func (b *box) readUnit(t *testing.T, name string) unit {
	t.Helper()
	return b.readSection(t, name, "[Service]", mockedKeys)
}

// readSection reads section of /lib/systemd/system/NAME in the box; a
// setting not in keys fails t.
func (b *box) readSection(t *testing.T, name, want string, keys []string) unit {
	t.Helper()
	u := unit{name: name, settings: map[string][]string{}}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(b.run(t, "cat", "/lib/systemd/system/"+name)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			section = line
		case section == want:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: line %q", name, line)
			}
			if !slices.Contains(keys, k) {
				t.Fatalf("%s sets %s, which the mock of systemd does not do (systemd_test.go)", name, k)
			}
			u.settings[k] = append(u.settings[k], v)
		}
	}
	return u
}

// get is the unit's last value of key, def if none.
func (u unit) get(key, def string) string {
	if v := u.settings[key]; len(v) > 0 {
		return v[len(v)-1]
	}
	return def
}

// service is a unit the mock runs.
type service struct {
	unit
	b       *box
	main    *proc
	sockets []*os.File // the socket unit's listening sockets, passed in
	socket  string     // the socket unit's name (LISTEN_FDNAMES)
}

// boolSetting is systemd's reading of a boolean setting.
func boolSetting(v string) bool {
	switch v {
	case "yes", "true", "on", "1":
		return true
	}
	return false
}

// gid is the id of group name in the box.
func (b *box) gid(t *testing.T, name string) string {
	t.Helper()
	f := strings.Split(strings.TrimSpace(b.run(t, "getent", "group", name)), ":")
	if len(f) < 3 {
		t.Fatalf("getent group %s: %q", name, f)
	}
	return f[2]
}

// startService starts the installed unit name as systemd would, with the
// sockets of the socket unit socket ("" for none: the service's own).
func (b *box) startService(t *testing.T, name, socket string) *service {
	t.Helper()
	s := &service{unit: b.readUnit(t, name), b: b, socket: socket}
	if socket != "" {
		s.sockets = []*os.File{b.listen(t, socket)}
	}
	s.start(t)
	return s
}

func (s *service) start(t *testing.T) {
	t.Helper()
	b := s.b
	uid, gid := "0", "0"
	dynamic := boolSetting(s.get("DynamicUser", "no"))
	switch user := s.get("User", ""); {
	case dynamic:
		uid, gid = "61184", "61184"
	case user != "" && user != "root":
		t.Fatalf("%s: User=%s: the mock runs root or a DynamicUser only", s.name, user)
	}
	if g := s.get("Group", ""); g != "" {
		gid = b.gid(t, g)
	}
	var groups []string
	for _, v := range s.settings["SupplementaryGroups"] {
		for _, g := range strings.Fields(v) {
			groups = append(groups, b.gid(t, g))
		}
	}
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"}
	if d := s.get("RuntimeDirectory", ""); d != "" {
		p := "/run/" + d
		b.run(t, "install", "-d", "-m", s.get("RuntimeDirectoryMode", "0755"), "-o", uid, "-g", gid, p)
		env = append(env, "RUNTIME_DIRECTORY="+p)
	}
	if d := s.get("StateDirectory", ""); d != "" {
		p := "/var/lib/" + d
		if dynamic {
			b.run(t, "install", "-d", "-m", "0711", "/var/lib/private")
			b.run(t, "install", "-d", "-m", s.get("StateDirectoryMode", "0755"), "-o", uid, "-g", gid, "/var/lib/private/"+d)
			if !b.exists(p) {
				b.run(t, "ln", "-s", "private/"+d, p)
			}
		} else {
			b.run(t, "install", "-d", "-m", s.get("StateDirectoryMode", "0755"), "-o", uid, "-g", gid, p)
		}
		env = append(env, "STATE_DIRECTORY="+p)
	}
	exec := strings.Fields(s.get("ExecStart", ""))
	if len(exec) == 0 || !strings.HasPrefix(exec[0], "/") {
		t.Fatalf("%s: ExecStart=%q: the mock takes an absolute path without prefixes", s.name, s.get("ExecStart", ""))
	}
	opts := []string{"--userspec=" + uid + ":" + gid}
	if len(groups) > 0 {
		opts = append(opts, "--groups="+strings.Join(groups, ","))
	} else {
		opts = append(opts, "--groups="+gid)
	}
	script := `umask "$0" && exec "$@"`
	if len(s.sockets) > 0 {
		env = append(env, "LISTEN_FDS="+strconv.Itoa(len(s.sockets)), "LISTEN_FDNAMES="+s.socket)
		script = `umask "$0" && LISTEN_PID=$$ && export LISTEN_PID && exec "$@"`
	}
	cmd := b.command(env, opts, append([]string{"sh", "-c", script, s.get("UMask", "0022")}, exec...)...)
	cmd.ExtraFiles = s.sockets // from fd 3, as systemd passes them
	s.main = startCommand(t, s.name, cmd)
	b.write(t, "/run/mock-systemd/"+s.name+".pid", strings.NewReader(strconv.Itoa(s.main.pid())), 0o644)
	if s.get("Type", "simple") == "notify" {
		s.main.waitFor(t, " ready", timeout)
	}
}

// stop stops the service as systemd would; restarting says whether a
// start follows (RuntimeDirectoryPreserve=restart).
func (s *service) stop(t *testing.T, restarting bool) {
	t.Helper()
	sig := syscall.SIGTERM
	switch ks := strings.TrimPrefix(s.get("KillSignal", "SIGTERM"), "SIG"); ks {
	case "TERM":
	case "INT":
		sig = syscall.SIGINT
	case "QUIT":
		sig = syscall.SIGQUIT
	case "HUP":
		sig = syscall.SIGHUP
	default:
		t.Fatalf("%s: KillSignal=%s: not in the mock", s.name, ks)
	}
	target := -s.main.pid()
	switch km := s.get("KillMode", "control-group"); km {
	case "control-group", "mixed":
	case "process":
		target = s.main.pid()
	default:
		t.Fatalf("%s: KillMode=%s: not in the mock", s.name, km)
	}
	stopTimeout := 90 * time.Second
	if v := s.get("TimeoutStopSec", ""); v != "" {
		if _, err := strconv.Atoi(v); err == nil {
			v += "s"
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s: TimeoutStopSec=%s: %v", s.name, v, err)
		}
		stopTimeout = d
	}
	s.b.run(t, "rm", "-f", "/run/mock-systemd/"+s.name+".pid")
	if err := syscall.Kill(target, sig); err != nil {
		t.Fatalf("stopping %s: %v", s.name, err)
	}
	select {
	case <-s.main.exited:
	case <-time.After(stopTimeout):
		s.main.kill()
		t.Fatalf("%s did not stop within TimeoutStopSec (%v) after %v; systemd would have sent SIGKILL\n%s", s.name, stopTimeout, sig, s.main.output())
	}
	if s.main.err != nil {
		t.Errorf("%s exited with %v after %v\n%s", s.name, s.main.err, sig, s.main.output())
	}
	preserve := s.get("RuntimeDirectoryPreserve", "no")
	if d := s.get("RuntimeDirectory", ""); d != "" && !boolSetting(preserve) && !(restarting && preserve == "restart") {
		s.b.run(t, "rm", "-rf", "/run/"+d)
	}
}

// restart is `systemctl restart`: stop, then start the binary installed
// now.
func (s *service) restart(t *testing.T) {
	t.Helper()
	s.stop(t, true)
	s.start(t)
}
