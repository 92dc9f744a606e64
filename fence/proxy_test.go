package fence

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// backend is a service behind the proxy: it keeps, per path, the last
// body PUT there and every token it was sent, in the order it got them.
type backend struct {
	mu     sync.Mutex
	data   map[string]string
	tokens []uint64
	srv    *httptest.Server
}

func newBackend(t *testing.T) *backend {
	b := &backend{data: map[string]string{}}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		defer b.mu.Unlock()
		if r.Method == http.MethodGet {
			io.WriteString(w, b.data[r.URL.Path])
			return
		}
		if tok := r.Header.Get(HeaderToken); tok != "" {
			n, _ := strconv.ParseUint(tok, 10, 64)
			b.tokens = append(b.tokens, n)
		}
		b.data[r.URL.Path] = string(body)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *backend) get(path string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.data[path]
}

// startProxy serves a Proxy in front of b with its record at rec.
func startProxy(t *testing.T, b *backend, rec string, tune func(*ProxyConfig)) (*httptest.Server, *Proxy) {
	t.Helper()
	cfg := DefaultProxyConfig()
	cfg.Backend, _ = url.Parse(b.srv.URL)
	r, err := OpenRecord(rec, false)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Record = r
	if tune != nil {
		tune(&cfg)
	}
	p, err := NewProxy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(func() {
		srv.Close()
		p.Close()
	})
	return srv, p
}

// send makes a request through the proxy; lease "" sends no fence
// headers, a token with a comma sends one Leaseside-Token header for each
// of its parts.
func send(t *testing.T, srv *httptest.Server, method, path, lease, token, body string) (int, ProxyError, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if lease != "" {
		req.Header.Set(HeaderLease, lease)
		for _, tok := range strings.Split(token, ",") {
			req.Header.Add(HeaderToken, tok)
		}
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var pe ProxyError
	if resp.Header.Get("Content-Type") == "application/json" {
		json.NewDecoder(resp.Body).Decode(&pe)
	}
	return resp.StatusCode, pe, resp.Header
}

// Each kind of request, through a real proxy to a real backend: a higher
// or equal token forwarded, a lower one refused 409 naming both tokens
// (body and header) with the backend's data untouched; a fenced request
// without headers 428; bad headers 400; unfenced methods and paths pass.
// A proxy restarted on the same state still refuses the older token.
func TestProxyFences(t *testing.T) {
	b := newBackend(t)
	rec := filepath.Join(t.TempDir(), "proxy.fence")
	srv, p := startProxy(t, b, rec, func(c *ProxyConfig) { c.PathPrefixes = []string{"/data/"} })
	steps := []struct {
		name, method, path, lease, token, body string
		status                                 int
		code                                   string
		highest                                string
	}{
		{name: "first write", method: "PUT", path: "/data/x", lease: "jobs/x", token: "5", body: "five", status: 200},
		{name: "same token", method: "PUT", path: "/data/x", lease: "jobs/x", token: "5", body: "five again", status: 200},
		{name: "newer token", method: "PUT", path: "/data/x", lease: "jobs/x", token: "8", body: "eight", status: 200},
		{name: "older token", method: "PUT", path: "/data/x", lease: "jobs/x", token: "6", body: "six", status: 409, code: "stale_token", highest: "8"},
		{name: "older token, DELETE", method: "DELETE", path: "/data/x", lease: "jobs/x", token: "7", status: 409, code: "stale_token", highest: "8"},
		{name: "another lease", method: "POST", path: "/data/y", lease: "jobs/y", token: "1", body: "y1", status: 200},
		{name: "no headers", method: "PUT", path: "/data/x", body: "bare", status: 428, code: "fence_required"},
		{name: "lower-case method is fenced too", method: "put", path: "/data/x", body: "bare", status: 428, code: "fence_required"},
		{name: "token 0", method: "PUT", path: "/data/x", lease: "jobs/x", token: "0", status: 400, code: "bad_token"},
		{name: "token not a number", method: "PUT", path: "/data/x", lease: "jobs/x", token: "8x", status: 400, code: "bad_token"},
		{name: "two tokens", method: "PUT", path: "/data/x", lease: "jobs/x", token: "9,1", status: 400, code: "bad_token"},
		{name: "lease with a space", method: "PUT", path: "/data/x", lease: "jobs x", token: "9", status: 400, code: "bad_lease"},
		{name: "path around the prefix", method: "PUT", path: "/other/../data/x", lease: "jobs/x", token: "1", status: 400, code: "path_not_canonical"},
		{name: "encoded slash", method: "PUT", path: "/data%2Fx", lease: "jobs/x", token: "1", status: 400, code: "path_not_canonical"},
		{name: "GET is not fenced", method: "GET", path: "/data/x", status: 200},
		{name: "unfenced path", method: "PUT", path: "/other/z", body: "free", status: 200},
	}
	for _, s := range steps {
		status, pe, h := send(t, srv, s.method, s.path, s.lease, s.token, s.body)
		if status != s.status || pe.Error != s.code || h.Get(HeaderHighest) != s.highest || pe.Highest != s.highest {
			t.Fatalf("%s: %d %+v (header highest %q), want %d %s highest %q", s.name, status, pe, h.Get(HeaderHighest), s.status, s.code, s.highest)
		}
		if s.code == "stale_token" && (pe.Token != s.token || pe.Lease != s.lease || !strings.Contains(pe.Message, s.token) || !strings.Contains(pe.Message, s.highest)) {
			t.Fatalf("%s: refusal %+v does not name both tokens", s.name, pe)
		}
	}
	if got := b.get("/data/x"); got != "eight" {
		t.Fatalf("backend holds %q at /data/x, want the newer token's", got)
	}
	if got := b.get("/other/z"); got != "free" {
		t.Fatalf("backend holds %q at /other/z", got)
	}

	// A restart: a new proxy on the same state file.
	srv.Close()
	p.Close()
	srv2, _ := startProxy(t, b, rec, nil)
	if status, pe, _ := send(t, srv2, "PUT", "/data/x", "jobs/x", "7", "seven"); status != 409 || pe.Highest != "8" {
		t.Fatalf("after a restart, token 7 got %d %+v, want 409 below 8", status, pe)
	}
	if got := b.get("/data/x"); got != "eight" {
		t.Fatalf("after a restart the older token wrote %q", got)
	}
}

// A second proxy on a state file in use is refused.
func TestProxyStateInUse(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "proxy.fence")
	r, err := OpenRecord(rec, false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := OpenRecord(rec, false); !errors.Is(err, ErrRecordInUse) {
		t.Fatalf("second open: %v", err)
	}
}

// With CheckToken, a token above the highest is checked before it is
// recorded: not live is refused (and not recorded), a failed check 503;
// a token already seen is not asked about again.
func TestProxyCheckToken(t *testing.T) {
	b := newBackend(t)
	var mu sync.Mutex
	live := map[uint64]bool{3: true}
	var asked []uint64
	checkErr := errors.New("no daemon")
	srv, _ := startProxy(t, b, filepath.Join(t.TempDir(), "p.fence"), func(c *ProxyConfig) {
		c.CheckToken = func(_ context.Context, lease string, token uint64) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, token)
			if token == 99 {
				return false, checkErr
			}
			return live[token], nil
		}
	})
	steps := []struct {
		token  string
		status int
		code   string
	}{
		{token: "3", status: 200},
		{token: "3", status: 200},
		{token: "5", status: 409, code: "token_not_live"},
		{token: "99", status: 503, code: "check_unavailable"},
		{token: "3", status: 200},
	}
	for _, s := range steps {
		status, pe, _ := send(t, srv, "PUT", "/k", "jobs/k", s.token, "v"+s.token)
		if status != s.status || pe.Error != s.code {
			t.Fatalf("token %s: %d %+v, want %d %s", s.token, status, pe, s.status, s.code)
		}
	}
	if want := []uint64{3, 5, 99}; len(asked) != len(want) || asked[0] != 3 || asked[1] != 5 || asked[2] != 99 {
		t.Fatalf("asked about %v, want %v", asked, want)
	}
}

// Clients at once with interleaved tokens: the backend receives each
// lease's tokens in non-decreasing order, the last write is the highest
// token's, and every refusal named a higher token.
func TestProxyConcurrentInterleavedTokens(t *testing.T) {
	b := newBackend(t)
	srv, p := startProxy(t, b, filepath.Join(t.TempDir(), "p.fence"), nil)
	const clients, rounds = 8, 30
	for r := 0; r < rounds; r++ {
		order := rand.Perm(clients)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for c := 0; c < clients; c++ {
			tok := strconv.Itoa(r*clients + order[c] + 1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				status, pe, _ := send(t, srv, "PUT", "/reg", "jobs/reg", tok, tok)
				if status != 200 && (status != 409 || pe.Error != "stale_token") {
					t.Errorf("token %s: %d %+v", tok, status, pe)
				}
			}()
		}
		close(start)
		wg.Wait()
		if got, want := b.get("/reg"), strconv.Itoa((r+1)*clients); got != want {
			t.Fatalf("round %d: backend holds token %s's write, want the round's highest %s", r, got, want)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := 1; i < len(b.tokens); i++ {
		if b.tokens[i] < b.tokens[i-1] {
			t.Fatalf("the backend got token %d after %d", b.tokens[i], b.tokens[i-1])
		}
	}
	t.Logf("%d of %d requests forwarded", len(b.tokens), clients*rounds)
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.turns) != 0 {
		t.Fatalf("%d turns kept with no request in flight", len(p.turns))
	}
}

// Leases new to the record beyond MaxLeases are refused (507); the ones
// it keeps go on.
func TestProxyLeaseLimit(t *testing.T) {
	b := newBackend(t)
	srv, _ := startProxy(t, b, filepath.Join(t.TempDir(), "p.fence"), func(c *ProxyConfig) { c.MaxLeases = 2 })
	for _, s := range []struct {
		lease  string
		status int
		code   string
	}{
		{lease: "a", status: 200},
		{lease: "b", status: 200},
		{lease: "c", status: 507, code: "lease_limit"},
		{lease: "a", status: 200},
	} {
		if status, pe, _ := send(t, srv, "PUT", "/k", s.lease, "1", "v"); status != s.status || pe.Error != s.code {
			t.Fatalf("lease %s: %d %+v, want %d %s", s.lease, status, pe, s.status, s.code)
		}
	}
}

func TestProxyConfigValidate(t *testing.T) {
	u, _ := url.Parse("http://127.0.0.1:1")
	good := DefaultProxyConfig()
	good.Backend, good.Record = u, &Record{}
	tests := []struct {
		name string
		edit func(*ProxyConfig)
		says string
	}{
		{name: "no backend", edit: func(c *ProxyConfig) { c.Backend = nil }, says: "backend"},
		{name: "backend without scheme", edit: func(c *ProxyConfig) { c.Backend = &url.URL{Host: "x"} }, says: "backend"},
		{name: "no record", edit: func(c *ProxyConfig) { c.Record = nil }, says: "record"},
		{name: "no methods", edit: func(c *ProxyConfig) { c.Methods = nil }, says: "no method"},
		{name: "lower-case method", edit: func(c *ProxyConfig) { c.Methods = []string{"put"} }, says: `"put"`},
		{name: "prefix without slash", edit: func(c *ProxyConfig) { c.PathPrefixes = []string{"data"} }, says: `"data"`},
		{name: "no timeout", edit: func(c *ProxyConfig) { c.BackendTimeout = 0 }, says: "timeout"},
		{name: "no lease limit", edit: func(c *ProxyConfig) { c.MaxLeases = 0 }, says: "lease limit"},
	}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		c := good
		tt.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: %v, want an error saying %q", tt.name, err, tt.says)
		}
	}
}

// A fenced request the backend does not answer is refused 502 naming its
// lease and token, in the body and in the log line (issue 24: the log
// said lease="" token=""); an unfenced one names none.
func TestProxyBackendDownNamesTheRequest(t *testing.T) {
	b := newBackend(t)
	var logs strings.Builder
	var mu sync.Mutex
	srv, _ := startProxy(t, b, filepath.Join(t.TempDir(), "p.fence"), func(c *ProxyConfig) {
		c.Logger = slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil))
	})
	b.srv.Close() // the backend is gone
	for _, tc := range []struct {
		name, method, lease, token string
		want                       string
	}{
		{name: "fenced", method: "PUT", lease: "jobs/k", token: "7", want: `lease=jobs/k token=7`},
		{name: "unfenced", method: "GET", want: `lease="" token=""`},
	} {
		mu.Lock()
		logs.Reset()
		mu.Unlock()
		status, pe, _ := send(t, srv, tc.method, "/k", tc.lease, tc.token, "v")
		if status != http.StatusBadGateway || pe.Error != "backend_unavailable" || pe.Lease != tc.lease || pe.Token != tc.token {
			t.Fatalf("%s: %d %+v, want 502 backend_unavailable naming lease %q token %q", tc.name, status, pe, tc.lease, tc.token)
		}
		mu.Lock()
		line := logs.String()
		mu.Unlock()
		if !strings.Contains(line, "error=backend_unavailable") || !strings.Contains(line, tc.want) {
			t.Fatalf("%s: log %q, want %s", tc.name, line, tc.want)
		}
	}
}

// lockedWriter is a writer shared by the proxy's handlers and the test.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
