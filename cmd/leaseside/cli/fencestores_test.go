package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"

	"github.com/leaseside/leaseside/internal/stores"
)

// `leaseside fence postgres install URL` installs leaseside.fence in a
// real database (twice: harmlessly), which then refuses a stale token;
// a bad URL is a usage error, an unreachable server an error.
func TestFencePostgresInstall(t *testing.T) {
	dsn, _ := stores.StartPostgres(t)
	for range 2 {
		var out, errb bytes.Buffer
		if c := execute(context.Background(), []string{"fence", "postgres", "install", dsn}, &out, &errb); c != ExitOK {
			t.Fatalf("exit %d: %s", c, errb.String())
		}
		if out.String() != "installed the leaseside fence (version 1) in postgres\n" {
			t.Fatalf("printed %q", out.String())
		}
	}
	conn, err := pgconn.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(context.Background(), "SELECT leaseside.fence('a', 2); SELECT leaseside.fence('a', 1)").ReadAll()
	if err == nil || !strings.Contains(err.Error(), "LS001") {
		t.Fatalf("stale fence after install: %v", err)
	}
	var out, errb bytes.Buffer
	if c := execute(context.Background(), []string{"fence", "postgres", "install", "postgres://x@h:port/db"}, &out, &errb); c != ExitUsage {
		t.Fatalf("bad URL: exit %d: %s", c, errb.String())
	}
	errb.Reset()
	if c := execute(context.Background(), []string{"fence", "postgres", "install", "postgres://x@/db?host=" + t.TempDir()}, &out, &errb); c != ExitError ||
		!strings.Contains(errb.String(), "connecting to PostgreSQL") {
		t.Fatalf("no server: exit %d: %s", c, errb.String())
	}
}

// `leaseside fence redis install URL` loads the library into a real
// server (twice: harmlessly), whose leaseside_set then refuses a stale
// token; a bad URL is a usage error, an unreachable server an error.
func TestFenceRedisInstall(t *testing.T) {
	url, _ := stores.StartRedis(t)
	for range 2 {
		var out, errb bytes.Buffer
		if c := execute(context.Background(), []string{"fence", "redis", "install", url}, &out, &errb); c != ExitOK {
			t.Fatalf("exit %d: %s", c, errb.String())
		}
	}
	opts, _ := redis.ParseURL(url)
	c := redis.NewClient(opts)
	defer c.Close()
	ctx := context.Background()
	if err := c.FCall(ctx, "leaseside_set", []string{"k", "leaseside:fence:a"}, 2, "v").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.FCall(ctx, "leaseside_set", []string{"k", "leaseside:fence:a"}, 1, "v").Err(); err == nil || !strings.HasPrefix(err.Error(), "LEASESIDE_STALE ") {
		t.Fatalf("stale set after install: %v", err)
	}
	var out, errb bytes.Buffer
	if code := execute(ctx, []string{"fence", "redis", "install", "http://x"}, &out, &errb); code != ExitUsage {
		t.Fatalf("bad URL: exit %d: %s", code, errb.String())
	}
	errb.Reset()
	if code := execute(ctx, []string{"fence", "redis", "install", "unix://" + t.TempDir() + "/none.sock"}, &out, &errb); code != ExitError || !strings.Contains(errb.String(), "none.sock") {
		t.Fatalf("no server: exit %d: %s", code, errb.String())
	}
}

// `leaseside fence postgres sql` and `fence redis lua` print what install
// runs.
func TestFencePrints(t *testing.T) {
	for _, c := range []struct {
		args []string
		has  string
	}{
		{args: []string{"fence", "postgres", "sql"}, has: "CREATE OR REPLACE FUNCTION leaseside.fence(lease text, token bigint)"},
		{args: []string{"fence", "redis", "lua"}, has: "#!lua name=leaseside\n"},
	} {
		var out, errb bytes.Buffer
		if code := execute(context.Background(), c.args, &out, &errb); code != ExitOK || !strings.Contains(out.String(), c.has) {
			t.Errorf("%v: exit %d, printed %d bytes without %q", c.args, code, out.Len(), c.has)
		}
	}
}

// Redis URLs are read as go-redis and redis-py read them; a bad one says
// what is wrong with it.
func TestParseRedisURL(t *testing.T) {
	tests := []struct {
		name, url      string
		network, addr  string
		user, password string
		tls            bool
		err            string
	}{
		{name: "default port", url: "redis://db.example", network: "tcp", addr: "db.example:6379"},
		{name: "password and db", url: "redis://:pw@10.0.0.1:7000/3", network: "tcp", addr: "10.0.0.1:7000", password: "pw"},
		{name: "user and password", url: "rediss://app:pw@db.example", network: "tcp", addr: "db.example:6379", user: "app", password: "pw", tls: true},
		{name: "password alone", url: "redis://pw@h", network: "tcp", addr: "h:6379", password: "pw"},
		{name: "unix", url: "unix:///run/redis.sock", network: "unix", addr: "/run/redis.sock"},
		{name: "scheme", url: "http://h", err: `scheme "http"`},
		{name: "port", url: "redis://h:99999", err: `port "99999"`},
		{name: "database", url: "redis://h/x", err: `database "x"`},
		{name: "unix without path", url: "unix://", err: "without a socket path"},
	}
	for _, tt := range tests {
		got, err := parseRedisURL(tt.url)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || got.network != tt.network || got.addr != tt.addr || got.user != tt.user || got.password != tt.password || (got.tls != nil) != tt.tls {
			t.Errorf("%s: %+v, %v", tt.name, got, err)
		}
	}
}
