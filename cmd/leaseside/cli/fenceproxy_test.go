package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/leaseside/leaseside/fence"
)

// fencedPut sends a PUT with the fence headers (none if lease is "")
// and returns the status and the proxy's JSON answer, if any.
func fencedPut(t *testing.T, url, lease, token, body string) (int, fence.ProxyError) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	if lease != "" {
		req.Header.Set(fence.HeaderLease, lease)
		req.Header.Set(fence.HeaderToken, token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var pe fence.ProxyError
	if resp.Header.Get("Content-Type") == "application/json" {
		json.NewDecoder(resp.Body).Decode(&pe)
	}
	return resp.StatusCode, pe
}

// The real binary in front of a real backend: fenced writes pass or get
// 409 naming both tokens, a restart keeps the highest token, a second
// proxy on the same state is refused, and --check-token asks the grantors
// through a real dev about a token it has not seen.
func TestFenceProxyCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	var mu sync.Mutex
	stored := ""
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodPut {
			stored = string(b)
		}
		io.WriteString(w, stored)
	}))
	defer backend.Close()
	get := func() string {
		mu.Lock()
		defer mu.Unlock()
		return stored
	}
	state := filepath.Join(t.TempDir(), "proxy.fence")
	start := func(extra ...string) (*proc, string) {
		p := startProc(t, "fence-proxy", append([]string{"fence-proxy", "--listen", "127.0.0.1:0", "--backend", backend.URL, "--state", state}, extra...)...)
		return p, "http://" + field(p.waitLine(t, "leaseside fence-proxy ready"), "listen") + "/obj"
	}
	p, url := start()
	if st, _ := fencedPut(t, url, "jobs/p", "4", "four"); st != 200 {
		t.Fatalf("token 4: %d", st)
	}
	if st, pe := fencedPut(t, url, "jobs/p", "3", "three"); st != 409 || pe.Highest != "4" || pe.Token != "3" {
		t.Fatalf("token 3 after 4: %d %+v", st, pe)
	}
	p.waitLine(t, "request refused", "status=409", "error=stale_token", "lease=jobs/p", "token=3", "highest=4")
	if st, pe := fencedPut(t, url, "", "", "bare"); st != 428 || pe.Error != "fence_required" {
		t.Fatalf("no headers: %d %+v", st, pe)
	}
	second := startProc(t, "second fence-proxy", "fence-proxy", "--listen", "127.0.0.1:0", "--backend", backend.URL, "--state", state)
	if code := second.waitExit(t); code != ExitError || !strings.Contains(second.output(), "in use by another process") {
		t.Fatalf("a second proxy on the state: exit %d\n%s", code, second.output())
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.waitExit(t); code != 0 {
		t.Fatalf("fence-proxy exit %d on SIGTERM", code)
	}

	sock := startDevSocket(t)
	tok := strings.TrimSpace(must(runCLI(t, "acquire", "jobs/q", "--detached", "--socket", sock)))
	n, _ := strconv.ParseUint(tok, 10, 64)
	_, url = start("--check-token", "--socket", sock)
	if st, pe := fencedPut(t, url, "jobs/p", "3", "three"); st != 409 || pe.Highest != "4" {
		t.Fatalf("after a restart, token 3: %d %+v", st, pe)
	}
	if st, pe := fencedPut(t, url, "jobs/q", strconv.FormatUint(n+1, 10), "not live"); st != 409 || pe.Error != "token_not_live" {
		t.Fatalf("a token the grantors never granted: %d %+v", st, pe)
	}
	if st, pe := fencedPut(t, url, "jobs/q", tok, "live"); st != 200 {
		t.Fatalf("the live token %s: %d %+v", tok, st, pe)
	}
	if got := get(); got != "live" {
		t.Fatalf("backend holds %q, want the live token's write", got)
	}
}
