package fence

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// rawRequest sends request line line with a body, as written, to srv
// and returns the status of the answer.
func rawRequest(t *testing.T, addr, line, body string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "%s\r\nHost: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", line, addr, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A fenced method whose request target is not an origin path (an
// absolute-form URL with no path, "*", a lower-case method) never reaches
// the backend without its token checked: the backend reads such targets
// as "/" or "/*", paths the proxy fences.
func TestProxyRequestTargetsAllFenced(t *testing.T) {
	b := newBackend(t)
	srv, _ := startProxy(t, b, filepath.Join(t.TempDir(), "proxy.fence"), nil)
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, line := range []string{
		"POST http://" + addr + " HTTP/1.1",
		"POST http://" + addr + "?x=1 HTTP/1.1",
		"PUT * HTTP/1.1",
		"post / HTTP/1.1",
		"POST / HTTP/1.0",
		"DELETE http://" + addr + "/ HTTP/1.1",
	} {
		if got := rawRequest(t, addr, line, "unfenced"); got < 400 {
			t.Errorf("%s: forwarded without a token (status %d)", line, got)
		}
	}
	for _, p := range []string{"/", "/*"} {
		if got := b.get(p); got != "" {
			t.Errorf("the backend's %s holds %q, written without a token", p, got)
		}
	}
}

// Fence headers sent in ways a backend or another proxy might read
// differently than this one: twice in different cases, two tokens in
// one header, a signed or spaced token. Each is refused, and the stale
// token behind it never reaches the backend.
func TestProxyHeaderSmugglingRefused(t *testing.T) {
	b := newBackend(t)
	srv, _ := startProxy(t, b, filepath.Join(t.TempDir(), "proxy.fence"), nil)
	addr := strings.TrimPrefix(srv.URL, "http://")
	if status, _, _ := send(t, srv, http.MethodPut, "/k", "jobs/a", "10", "new"); status != http.StatusOK {
		t.Fatalf("token 10: status %d", status)
	}
	for _, headers := range []string{
		"Leaseside-Lease: jobs/a\r\nLeaseside-Token: 10\r\nleaseside-token: 3",
		"Leaseside-Lease: jobs/a\r\nLeaseside-Token: 10, 3",
		"Leaseside-Lease: jobs/a\r\nLeaseside-Token: +3",
		"Leaseside-Lease: jobs/a\r\nLeaseside-Token: -3",
		"Leaseside-Lease: jobs/a\r\nLeaseside-Token: 3 10",
		"Leaseside-Lease: jobs/a\r\nleaseside-lease: jobs/b\r\nLeaseside-Token: 10",
		"Leaseside-Lease: jobs/a\r\nLeaseside-Token: 3\r\nConnection: Leaseside-Token",
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "PUT /k HTTP/1.1\r\nHost: %s\r\n%s\r\nContent-Length: 3\r\nConnection: close\r\n\r\nold", addr, headers)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil {
			t.Fatalf("%q: %v", headers, err)
		}
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("%q: forwarded (status %d)", headers, resp.StatusCode)
		}
	}
	if got := b.get("/k"); got != "new" {
		t.Fatalf("the backend holds %q after the refused requests, want new", got)
	}
}
