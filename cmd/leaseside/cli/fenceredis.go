package cli

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// `leaseside fence redis install` speaks RESP itself: it sends AUTH (when
// the URL has a password) and FUNCTION LOAD REPLACE, nothing else, and
// linking go-redis for that made the binary 8 MB (40%) larger.

// redisTarget is where a Redis URL points.
type redisTarget struct {
	network, addr  string
	user, password string
	tls            *tls.Config
}

// parseRedisURL reads redis://[[USER]:PASSWORD@]HOST[:PORT][/DB],
// rediss://... (TLS) and unix://[[USER]:PASSWORD@]/PATH, as go-redis and
// redis-py do (the database number is accepted and unused: functions are
// the server's, not a database's).
func parseRedisURL(s string) (*redisTarget, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	t := &redisTarget{}
	if u.User != nil {
		t.user = u.User.Username()
		t.password, _ = u.User.Password()
		if t.password == "" {
			// redis://PASSWORD@host is taken as a password, as redis-cli -u does.
			t.user, t.password = "", t.user
		}
	}
	switch u.Scheme {
	case "redis", "rediss":
		host, port := u.Hostname(), u.Port()
		if host == "" {
			host = "localhost"
		}
		if port == "" {
			port = "6379"
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("port %q: want 1 to 65535", port)
		}
		if db := strings.TrimPrefix(u.Path, "/"); db != "" {
			if _, err := strconv.Atoi(db); err != nil {
				return nil, fmt.Errorf("database %q: want a number", db)
			}
		}
		t.network, t.addr = "tcp", net.JoinHostPort(host, port)
		if u.Scheme == "rediss" {
			t.tls = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
		}
	case "unix":
		if u.Path == "" {
			return nil, errors.New("unix:// URL without a socket path")
		}
		t.network, t.addr = "unix", u.Path
	default:
		return nil, fmt.Errorf("scheme %q: want redis://, rediss:// or unix://", u.Scheme)
	}
	return t, nil
}

// redisLoad loads a function library into the server at t, replacing
// one of the same name.
func redisLoad(ctx context.Context, t *redisTarget, lib string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, t.network, t.addr)
	if err != nil {
		return fmt.Errorf("connecting to Redis: %w", err)
	}
	defer c.Close()
	if t.tls != nil {
		tc := tls.Client(c, t.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("connecting to Redis: %w", err)
		}
		c = tc
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	r := bufio.NewReader(c)
	if t.password != "" {
		args := []string{"AUTH", t.password}
		if t.user != "" {
			args = []string{"AUTH", t.user, t.password}
		}
		if _, err := redisCall(c, r, args...); err != nil {
			return fmt.Errorf("AUTH: %w", err)
		}
	}
	if _, err := redisCall(c, r, "FUNCTION", "LOAD", "REPLACE", lib); err != nil {
		return fmt.Errorf("FUNCTION LOAD: %w", err)
	}
	return nil
}

// redisCall sends one command and reads its reply: a simple string, an
// integer or a bulk string; an error reply is returned as an error.
func redisCall(w io.Writer, r *bufio.Reader, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < -1 || n > 1<<20 {
			return "", fmt.Errorf("bad bulk reply %q", line)
		}
		if n == -1 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}
