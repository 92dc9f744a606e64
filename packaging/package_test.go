package packaging

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// timeout bounds the package build (cold build caches on a busy 2-core
// machine) and every wait on an event; passing runs stay far below it.
const timeout = 5 * time.Minute

// testVersion is a prerelease, so the test sees the semver-to-package
// mapping too (1.2.3-rc.1 is 1.2.3~rc.1 in a .deb and an .rpm).
const (
	testVersion    = "1.2.3-rc.1"
	testDebVersion = "1.2.3~rc.1"
)

// debArch is the Debian name of each GOARCH the test knows.
var debArch = map[string]string{"amd64": "amd64", "arm64": "arm64", "386": "i386", "arm": "armhf", "riscv64": "riscv64"}

// built is the packages `make package` left in a temporary directory.
type built struct {
	deb, rpm string
}

// packages are the packages this run of the tests built, by version, so
// that TestDeb and TestDebUpgradeUnderLiveLeases build one only once; in
// directories under packages.dir, which TestMain removes.
var packages struct {
	sync.Mutex
	dir string
	m   map[string]built
}

func TestMain(m *testing.M) {
	if os.Getenv(bindPathEnv) != "" { // the socket binder: socket_test.go
		if err := bindSocket(); err != nil {
			fmt.Fprintln(os.Stderr, "binding the socket:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if packages.dir != "" {
		os.RemoveAll(packages.dir)
	}
	os.Exit(code)
}

// makePackage runs `make package` of version with every output in a
// temporary directory, so the test writes nothing into the source tree;
// the packages are read-only to the tests.
func makePackage(t *testing.T, version string) built {
	t.Helper()
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb not installed")
	}
	packages.Lock()
	defer packages.Unlock()
	if b, ok := packages.m[version]; ok {
		return b
	}
	if packages.dir == "" {
		d, err := os.MkdirTemp("", "leaseside-packages-")
		if err != nil {
			t.Fatal(err)
		}
		packages.dir, packages.m = d, map[string]built{}
	}
	dir, err := os.MkdirTemp(packages.dir, version+"-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "-C", "..", "package",
		"PKG_VERSION="+version,
		"PKG_ARCH="+runtime.GOARCH,
		"PKG_BIN="+filepath.Join(dir, "leaseside"),
		"NFPM="+filepath.Join(dir, "nfpm"),
		"DIST="+filepath.Join(dir, "dist"))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make package: %v\n%s", err, out)
	}
	t.Logf("make package %s took %v", version, time.Since(start).Round(time.Millisecond))
	var b built
	for _, pat := range []struct {
		glob string
		dst  *string
	}{{"*.deb", &b.deb}, {"*.rpm", &b.rpm}} {
		m, _ := filepath.Glob(filepath.Join(dir, "dist", pat.glob))
		if len(m) != 1 {
			t.Fatalf("dist/%s: found %v, want one package\n%s", pat.glob, m, out)
		}
		*pat.dst = m[0]
	}
	packages.m[version] = b
	return b
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

func TestDeb(t *testing.T) {
	b := makePackage(t, testVersion)

	if got, want := filepath.Base(b.deb), fmt.Sprintf("leaseside_%s_%s.deb", testDebVersion, debArch[runtime.GOARCH]); debArch[runtime.GOARCH] != "" && got != want {
		t.Errorf("package file %s, want %s", got, want)
	}
	for field, want := range map[string]string{
		"Package":      "leaseside",
		"Version":      testDebVersion,
		"Architecture": debArch[runtime.GOARCH],
		"Section":      "net",
	} {
		got := strings.TrimSpace(run(t, "dpkg-deb", "-f", b.deb, field))
		if want != "" && got != want {
			t.Errorf("control %s: %q, want %q", field, got, want)
		}
	}

	t.Run("contents", func(t *testing.T) { checkDebContents(t, b.deb) })

	ctrl := filepath.Join(t.TempDir(), "control")
	run(t, "dpkg-deb", "-e", b.deb, ctrl)
	t.Run("conffiles", func(t *testing.T) {
		got, err := os.ReadFile(filepath.Join(ctrl, "conffiles"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Fields(string(got))
		slices.Sort(lines)
		want := []string{"/etc/leaseside/grantor.json", "/etc/leaseside/leaseside.json"}
		if !slices.Equal(lines, want) {
			t.Errorf("conffiles %q, want %q", lines, want)
		}
	})
	t.Run("scripts", func(t *testing.T) {
		for ctl, src := range map[string]string{"postinst": "postinstall.sh", "prerm": "preremove.sh", "postrm": "postremove.sh"} {
			p := filepath.Join(ctrl, ctl)
			fi, err := os.Stat(p)
			if err != nil {
				t.Errorf("%s: %v", ctl, err)
				continue
			}
			if fi.Mode().Perm() != 0o755 {
				t.Errorf("%s mode %v, want 0755", ctl, fi.Mode().Perm())
			}
			sameFile(t, p, filepath.Join("scripts", src))
			run(t, "sh", "-n", p)
		}
	})

	root := filepath.Join(t.TempDir(), "root")
	run(t, "dpkg-deb", "-x", b.deb, root)
	t.Run("files match the sources", func(t *testing.T) {
		for dst, src := range map[string]string{
			"lib/systemd/system/leaseside.service":                    "../systemd/leaseside.service",
			"lib/systemd/system/leaseside.socket":                     "../systemd/leaseside.socket",
			"lib/systemd/system/leaseside-grantor.service":            "../systemd/leaseside-grantor.service",
			"lib/systemd/system/leaseside-lease@.service":             "../systemd/leaseside-lease@.service",
			"usr/lib/tmpfiles.d/leaseside.conf":                       "../systemd/leaseside.tmpfiles",
			"etc/leaseside/leaseside.json":                            "etc/leaseside.json",
			"etc/leaseside/grantor.json":                              "etc/grantor.json",
			"usr/share/doc/leaseside/copyright":                       "copyright",
			"usr/share/doc/leaseside/METRICS.md":                      "../METRICS.md",
			"usr/share/doc/leaseside/examples/grafana-dashboard.json": "grafana-dashboard.json",
			"usr/share/doc/leaseside/examples/prometheus-rules.yml":   "prometheus-rules.yml",
			"usr/share/leaseside/fence/leaseside.sql":                 "../fence/pgfence/leaseside.sql",
			"usr/share/leaseside/fence/leaseside.lua":                 "../fence/redisfence/library/leaseside.lua",
			"usr/share/doc/leaseside/examples/fence/report_redis.sh":  "../fence/examples/report_redis.sh",
		} {
			sameFile(t, filepath.Join(root, dst), src)
		}
	})
	t.Run("changelog", func(t *testing.T) {
		checkDebChangelog(t, filepath.Join(root, "usr/share/doc/leaseside/changelog.Debian.gz"))
	})
	bin := filepath.Join(root, "usr/bin/leaseside")
	t.Run("version stamped", func(t *testing.T) {
		var v struct {
			Version string `json:"version"`
		}
		out := run(t, bin, "version", "--json")
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("leaseside version --json: %v: %s", err, out)
		}
		if v.Version != testVersion {
			t.Errorf("packaged leaseside says version %q, want %q", v.Version, testVersion)
		}
	})
	t.Run("daemon takes the packaged config", func(t *testing.T) {
		checkSidecarConfig(t, bin, filepath.Join(root, "etc/leaseside/leaseside.json"))
	})
	t.Run("grantor config keys", func(t *testing.T) {
		var cfg map[string]any
		b, err := os.ReadFile(filepath.Join(root, "etc/leaseside/grantor.json"))
		if err == nil {
			err = json.Unmarshal(b, &cfg)
		}
		if err != nil {
			t.Fatal(err)
		}
		keys := slices.Sorted(maps.Keys(cfg))
		want := []string{"audit_log", "bootstrap_expect", "data_dir", "epsilon", "gossip_addr", "gossip_key_file", "join", "limits",
			"max_request_bytes", "metrics_addr", "name_rules", "node_id", "raft_addr", "rho", "rpc_addr", "tls_ca", "tls_cert", "tls_key"}
		if !slices.Equal(keys, want) {
			t.Errorf("grantor.json keys %q, want %q", keys, want)
		}
	})

	t.Run("man pages and completions", func(t *testing.T) { checkManAndCompletions(t, root, bin) })
	t.Run("rpm", func(t *testing.T) { checkRPM(t, b.rpm) })
	t.Run("rpm man pages and completions", func(t *testing.T) { checkRPMManAndCompletions(t, b.rpm) })
}

// debEntry is one line of `dpkg-deb -c`.
type debEntry struct {
	perm, owner string
}

func checkDebContents(t *testing.T, deb string) {
	entries := map[string]debEntry{}
	for _, line := range strings.Split(strings.TrimSpace(run(t, "dpkg-deb", "-c", deb)), "\n") {
		// -rwxr-xr-x root/root  15519906 2026-11-29 08:47 ./usr/bin/leaseside
		f := strings.Fields(line)
		if len(f) < 6 {
			t.Fatalf("dpkg-deb -c line %q", line)
		}
		path := strings.TrimSuffix(strings.TrimPrefix(f[5], "."), "/")
		entries[path] = debEntry{perm: f[0], owner: f[1]}
	}
	want := map[string]string{
		"/usr/bin/leaseside":                                         "-rwxr-xr-x",
		"/lib/systemd/system/leaseside.service":                      "-rw-r--r--",
		"/lib/systemd/system/leaseside.socket":                       "-rw-r--r--",
		"/lib/systemd/system/leaseside-grantor.service":              "-rw-r--r--",
		"/lib/systemd/system/leaseside-lease@.service":               "-rw-r--r--",
		"/usr/lib/tmpfiles.d/leaseside.conf":                         "-rw-r--r--",
		"/etc/leaseside":                                             "drwxr-xr-x",
		"/etc/leaseside/leaseside.json":                              "-rw-r--r--",
		"/etc/leaseside/grantor.json":                                "-rw-r--r--",
		"/usr/share/doc/leaseside/README.md":                         "-rw-r--r--",
		"/usr/share/doc/leaseside/PROTOCOL.md":                       "-rw-r--r--",
		"/usr/share/doc/leaseside/systemd.md":                        "-rw-r--r--",
		"/usr/share/doc/leaseside/packaging.md":                      "-rw-r--r--",
		"/usr/share/doc/leaseside/examples/lease-gate.conf":          "-rw-r--r--",
		"/usr/share/doc/leaseside/copyright":                         "-rw-r--r--",
		"/usr/share/doc/leaseside/changelog.Debian.gz":               "-rw-r--r--",
		"/usr/share/doc/leaseside/METRICS.md":                        "-rw-r--r--",
		"/usr/share/doc/leaseside/examples/grafana-dashboard.json":   "-rw-r--r--",
		"/usr/share/doc/leaseside/examples/prometheus-rules.yml":     "-rw-r--r--",
		"/usr/share/leaseside/fence/leaseside.sql":                   "-rw-r--r--",
		"/usr/share/leaseside/fence/leaseside.lua":                   "-rw-r--r--",
		"/usr/share/doc/leaseside/examples/fence/report_postgres.sh": "-rwxr-xr-x",
		"/usr/share/doc/leaseside/examples/fence/report_postgres.py": "-rw-r--r--",
		"/usr/share/doc/leaseside/SECURITY.md":                       "-rw-r--r--",
		"/etc/leaseside/tls":                                         "drwxr-xr-x",
	}
	for path, perm := range want {
		e, ok := entries[path]
		switch {
		case !ok:
			t.Errorf("%s missing from the package", path)
		case e.perm != perm:
			t.Errorf("%s is %s, want %s", path, e.perm, perm)
		}
	}
	for path, e := range entries {
		// nfpm writes the changelog it generates with numeric ids only.
		if e.owner != "root/root" && e.owner != "0/0" {
			t.Errorf("%s owned by %s, want root/root", path, e.owner)
		}
		if strings.HasPrefix(path, "/usr/lib/systemd") {
			t.Errorf("%s: the .rpm's unit directory in the .deb", path)
		}
	}
}

// checkSidecarConfig starts the packaged binary as the sidecar on the
// packaged config, with only the grantors (loopback, nothing listening),
// the socket and its group changed, and waits for its ready line: the
// config loader refuses unknown keys and bad values, so ready means the
// file is one the daemon takes.
func checkSidecarConfig(t *testing.T, bin, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "lspkg") // short: a socket path must fit sun_path
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// The cluster's TLS files and gossip key, made by the packaged
	// binary; grantors on loopback rather than gossip seeds.
	run(t, bin, "tls", "ca", "create", "--dir", dir)
	run(t, bin, "tls", "cert", "create", "--dir", dir, "--sidecar", "host1")
	key := filepath.Join(dir, "gossip.key")
	if err := os.WriteFile(key, []byte(run(t, bin, "tls", "gossip-key")), 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"tls_ca": "ca.pem", "tls_cert": "sidecar-host1.pem", "tls_key": "sidecar-host1-key.pem", "gossip_key_file": "gossip.key"} {
		if _, ok := cfg[k]; !ok {
			t.Errorf("the packaged sidecar config has no %s", k)
		}
		cfg[k] = filepath.Join(dir, v)
	}
	delete(cfg, "join")
	cfg["grantors"] = []string{"127.0.0.1:1"}
	cfg["socket"] = filepath.Join(dir, "s.sock")
	cfg["socket_group"] = fmt.Sprint(os.Getgid())
	b, _ = json.Marshal(cfg)
	conf := filepath.Join(dir, "leaseside.json")
	if err := os.WriteFile(conf, b, 0o644); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin, "daemon", "--config", conf)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "LISTEN_") || strings.HasPrefix(kv, "NOTIFY_SOCKET=")
	})
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer // the reader's until exited delivers
	ready := make(chan struct{})
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if !signalled && strings.Contains(sc.Text(), "leaseside daemon ready") {
				close(ready)
				signalled = true
			}
		}
		io.Copy(io.Discard, stderr)
		exited <- cmd.Wait()
	}()
	select {
	case <-ready:
	case err := <-exited:
		t.Fatalf("the packaged daemon exited on the packaged config: %v\n%s", err, log.String())
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("the packaged daemon not ready after %v\n%s", timeout, log.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("daemon exited with %v after SIGTERM\n%s", err, log.String())
		}
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-exited
		t.Errorf("daemon did not stop on SIGTERM\n%s", log.String())
	}
}

// checkRPM checks the .rpm's header and file list where rpm(8) is
// installed; nfpm builds it without rpm, so elsewhere there is only the
// file to see.
func checkRPM(t *testing.T, rpm string) {
	if fi, err := os.Stat(rpm); err != nil || fi.Size() < 1<<20 {
		t.Fatalf("%s: %v (or smaller than the binary could be)", rpm, err)
	}
	if _, err := exec.LookPath("rpm"); err != nil {
		t.Skip("rpm not installed: only the .rpm file's presence checked")
	}
	head := run(t, "rpm", "-qp", "--qf", "%{NAME} %{VERSION} %{RELEASE}", rpm)
	if want := "leaseside " + testDebVersion + " 1"; head != want {
		t.Errorf("rpm header %q, want %q", head, want)
	}
	files := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(run(t, "rpm", "-qp", "--qf", `[%{FILENAMES} %{FILEMODES:perms} %{FILEFLAGS:fflags}\n]`, rpm)), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			files[f[0]] = strings.Join(f[1:], " ")
		}
	}
	for path, want := range map[string]string{
		"/usr/bin/leaseside":                                "-rwxr-xr-x",
		"/usr/lib/systemd/system/leaseside.service":         "-rw-r--r--",
		"/usr/lib/systemd/system/leaseside.socket":          "-rw-r--r--",
		"/usr/lib/systemd/system/leaseside-grantor.service": "-rw-r--r--",
		"/usr/lib/systemd/system/leaseside-lease@.service":  "-rw-r--r--",
		"/usr/lib/tmpfiles.d/leaseside.conf":                "-rw-r--r--",
		"/etc/leaseside/leaseside.json":                     "-rw-r--r-- cn",
		"/etc/leaseside/grantor.json":                       "-rw-r--r-- cn",
		"/usr/share/doc/leaseside/copyright":                "-rw-r--r--",
		"/usr/share/licenses/leaseside/LICENSE":             "-rw-r--r-- l",
	} {
		if got, ok := files[path]; !ok {
			t.Errorf("%s missing from the rpm", path)
		} else if got != want {
			t.Errorf("%s: %q, want %q (mode, config flags)", path, got, want)
		}
	}
	if cl, want := run(t, "rpm", "-qp", "--changelog", rpm), "- "+newestChangelogVersion(t); !strings.Contains(cl, want) {
		t.Errorf("rpm --changelog lacks %q:\n%s", want, cl)
	}
	scripts := run(t, "rpm", "-qp", "--scripts", rpm)
	for _, s := range []string{"postinstall scriptlet", "preuninstall scriptlet", "postuninstall scriptlet", "groupadd --system leaseside"} {
		if !strings.Contains(scripts, s) {
			t.Errorf("rpm scripts lack %q", s)
		}
	}
}

// sameFile fails t unless the files at got and want hold the same bytes.
func sameFile(t *testing.T, got, want string) {
	t.Helper()
	g, err := os.ReadFile(got)
	if err != nil {
		t.Error(err)
		return
	}
	w, err := os.ReadFile(want)
	if err != nil {
		t.Error(err)
		return
	}
	if !bytes.Equal(g, w) {
		t.Errorf("%s differs from its source %s", got, want)
	}
}
