package stores

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A PostgreSQL server started for a test answers psql on its socket, and
// stop removes its files.
func TestStartPostgres(t *testing.T) {
	dsn, stop := StartPostgres(t)
	out, err := exec.Command("psql", dsn, "-XAtc", "select current_user || ' ' || version()").CombinedOutput()
	if err != nil {
		t.Fatalf("psql: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "postgres PostgreSQL ") {
		t.Fatalf("psql answered %q", out)
	}
	dir := strings.TrimPrefix(dsn[strings.Index(dsn, "?"):], "?host=")
	stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s still there after stop: %v", dir, err)
	}
	stop()
}

// A redis-server started for a test answers PING on its socket once
// StartRedis returns, and stop removes its files.
func TestStartRedis(t *testing.T) {
	url, stop := StartRedis(t)
	sock := strings.TrimPrefix(url, "unix://")
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "+PONG\r\n" {
		t.Fatalf("PING answered %q, %v", line, err)
	}
	c.Close()
	stop()
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("%s still there after stop: %v", sock, err)
	}
	stop()
}

// recordingTB records what a test would be told, without stopping.
type recordingTB struct {
	testing.TB
	fatal, skip string
}

func (r *recordingTB) Helper()           {}
func (r *recordingTB) Fatal(args ...any) { r.fatal = fmt.Sprint(args...) }
func (r *recordingTB) Skip(args ...any)  { r.skip = fmt.Sprint(args...) }

// A missing server fails the test under CI=true, saying how to install
// it, and skips it elsewhere.
func TestMissingServerFailsUnderCI(t *testing.T) {
	for _, ci := range []string{"true", ""} {
		t.Setenv("CI", ci)
		r := &recordingTB{TB: t}
		missing(r, "redis-server")
		got, other := r.fatal, r.skip
		if ci != "true" {
			got, other = r.skip, r.fatal
		}
		if !strings.Contains(got, "redis-server not found") || !strings.Contains(got, "make deps") || other != "" {
			t.Errorf("CI=%q: fatal %q, skip %q", ci, r.fatal, r.skip)
		}
	}
}
