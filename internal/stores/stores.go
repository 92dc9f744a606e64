// Package stores starts real, throwaway data stores for tests: a
// PostgreSQL server (initdb and pg_ctl, as an unprivileged user when the
// tests run as root) and a redis-server, each listening only on a Unix
// socket in a temporary directory of its own, and each stopped and
// removed when the test ends. The servers are Debian's packages, which
// `make deps` installs.
//
// A missing server fails the test with a message that says how to install
// it when CI=true, and skips it otherwise.
package stores

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startTimeout bounds a server's start (initdb included) on a loaded
// machine.
const startTimeout = 2 * time.Minute

// missing fails t under CI=true and skips it otherwise.
func missing(t testing.TB, what string) {
	t.Helper()
	msg := what + " not found: `make deps` installs it (Debian packages postgresql-15 and redis-server)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	} else {
		t.Skip(msg)
	}
}

// postgresBin finds the directory of initdb and pg_ctl: on PATH, else the
// newest of Debian's /usr/lib/postgresql/VERSION/bin.
func postgresBin() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(filepath.Dir(d), "initdb")); err == nil {
			return filepath.Dir(d), nil
		}
	}
	return "", fmt.Errorf("no pg_ctl and initdb on PATH or in /usr/lib/postgresql/*/bin")
}

// version is the major version in /usr/lib/postgresql/VERSION/bin/pg_ctl.
func version(pgCtl string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(pgCtl))))
	return v
}

// serverUser is who runs a server: nobody when the tests run as root
// (PostgreSQL refuses to run as root), else the caller (nil).
func serverUser(t testing.TB) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("stores: the tests run as root and there is no user nobody to run PostgreSQL as: %v", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
}

// serverDir makes a directory for a server's data, socket and log, owned
// by who runs it. It is not under t.TempDir, whose parents only root may
// enter.
func serverDir(t testing.TB, prefix string, cred *syscall.Credential) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			t.Fatal(err)
		}
	}
	return dir
}

// runAs runs a command as cred (nil: as the caller) and returns its
// combined output.
func runAs(cred *syscall.Credential, dir string, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PGTZ=UTC")
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Env = append(cmd.Env, "HOME="+dir)
	}
	cmd.WaitDelay = startTimeout
	return cmd.CombinedOutput()
}

// StartPostgres starts a PostgreSQL server for the test (initdb, then
// pg_ctl start, waiting until it accepts connections) and returns a
// connection URL for its database postgres, as superuser postgres, on its
// Unix socket (libpq's form, which psql, psycopg2 and pgx take:
// postgres://postgres@/postgres?host=DIR), and a function that stops the
// server and removes its files. stop runs at the end of the test too; it
// is safe to call twice. The server runs without fsync (a throwaway).
func StartPostgres(t testing.TB) (dsn string, stop func()) {
	t.Helper()
	bin, err := postgresBin()
	if err != nil {
		missing(t, "PostgreSQL server ("+err.Error()+")")
	}
	cred := serverUser(t)
	dir := serverDir(t, "leaseside-pg-", cred)
	data := filepath.Join(dir, "data")
	if out, err := runAs(cred, dir, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
		"--no-sync", "--no-instructions", "-E", "UTF8", "--locale=C"); err != nil {
		os.RemoveAll(dir)
		t.Fatalf("stores: initdb: %v\n%s", err, out)
	}
	// listen_addresses='' : no TCP port; the socket is in dir.
	opts := fmt.Sprintf("-c listen_addresses='' -k %s -c fsync=off -c full_page_writes=off -c max_connections=100", dir)
	if out, err := runAs(cred, dir, filepath.Join(bin, "pg_ctl"), "start", "-D", data, "-w", "-t", strconv.Itoa(int(startTimeout/time.Second)),
		"-l", filepath.Join(dir, "postgres.log"), "-o", opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
		os.RemoveAll(dir)
		t.Fatalf("stores: pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if out, err := runAs(cred, dir, filepath.Join(bin, "pg_ctl"), "stop", "-D", data, "-w", "-m", "immediate"); err != nil {
				t.Errorf("stores: pg_ctl stop: %v\n%s", err, out)
			}
			os.RemoveAll(dir)
		})
	}
	t.Cleanup(stop)
	return "postgres://postgres@/postgres?host=" + dir, stop
}

// StartRedis starts a redis-server for the test, without persistence,
// and returns its URL (unix:///DIR/redis.sock, which go-redis and
// redis-py take; redis-cli takes the path after unix:// with -s) once it
// says it is ready, and a function that stops it and removes its files.
// stop runs at the end of the test too; it is safe to call twice.
func StartRedis(t testing.TB) (url string, stop func()) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		missing(t, "redis-server")
	}
	dir := serverDir(t, "leaseside-redis-", nil)
	sock := filepath.Join(dir, "redis.sock")
	// redis-server tells a systemd-style notify socket READY=1 once it
	// serves (--supervised systemd): the test waits on that, not on a
	// poll.
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "notify.sock"), Net: "unixgram"})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	defer notify.Close()
	logf, err := os.Create(filepath.Join(dir, "redis.log"))
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
		"--dir", dir, "--supervised", "systemd", "--daemonize", "no", "--logfile", "")
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+filepath.Join(dir, "notify.sock"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		os.RemoveAll(dir)
		t.Fatalf("stores: redis-server: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cmd.Process.Kill()
			<-exited
			logf.Close()
			os.RemoveAll(dir)
		})
	}
	ready := make(chan error, 1)
	go func() { ready <- waitReady(notify) }()
	select {
	case err = <-ready:
	case err = <-exited:
		exited <- err
		err = fmt.Errorf("exited before it was ready: %v", err)
	case <-time.After(startTimeout):
		err = fmt.Errorf("not ready within %v", startTimeout)
	}
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		stop()
		t.Fatalf("stores: redis-server: %v\n%s", err, log)
	}
	t.Cleanup(stop)
	return "unix://" + sock, stop
}

// waitReady reads notify messages until one says READY=1.
func waitReady(c *net.UnixConn) error {
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(strings.NewReader(string(buf[:n])))
		for sc.Scan() {
			if sc.Text() == "READY=1" {
				return nil
			}
		}
	}
}
