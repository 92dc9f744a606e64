package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The headers a fenced request carries, and the one a refusal answers with.
const (
	HeaderLease   = "Leaseside-Lease"
	HeaderToken   = "Leaseside-Token"
	HeaderHighest = "Leaseside-Highest-Token"
)

// maxIdlePerBackend is how many idle connections to the backend the
// proxy keeps.
const maxIdlePerBackend = 256

// ProxyConfig configures a Proxy.
type ProxyConfig struct {
	// Backend is the service the proxy forwards to (http or https URL).
	Backend *url.URL
	// Record is where the highest token per lease is kept (OpenRecord);
	// the proxy owns it and closes it in Close.
	Record *Record
	// Methods are the fenced HTTP methods (upper case).
	Methods []string
	// PathPrefixes are the fenced paths: a request is fenced if its
	// method is in Methods and its path starts with one of these.
	PathPrefixes []string
	// BackendTimeout bounds a forwarded request. The backend's answer is
	// waited for even if the client goes away, so that the next request
	// of the lease is not forwarded while it may still be applied.
	BackendTimeout time.Duration
	// Logger, if set, gets a line for each request the proxy refuses.
	Logger *slog.Logger
	// MaxLeases bounds the leases the record keeps: a request of a lease
	// new to it beyond that is refused (507, lease_limit), so that
	// clients making up lease names cannot grow the state without bound.
	MaxLeases int
	// CheckToken, if set, is asked about a token higher than any seen for
	// its lease before the proxy records it: live says the grantors hold
	// it as a live grant of lease. It must be safe for concurrent use.
	CheckToken func(ctx context.Context, lease string, token uint64) (live bool, err error)
}

// DefaultProxyConfig fences POST, PUT, DELETE and PATCH on every path.
func DefaultProxyConfig() ProxyConfig {
	return ProxyConfig{
		Methods:        []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch},
		PathPrefixes:   []string{"/"},
		BackendTimeout: time.Minute,
		MaxLeases:      65536,
	}
}

// Validate says what is wrong with c.
func (c ProxyConfig) Validate() error {
	switch {
	case c.Backend == nil || (c.Backend.Scheme != "http" && c.Backend.Scheme != "https") || c.Backend.Host == "":
		return errors.New("fence: the backend must be an http:// or https:// URL with a host")
	case c.Record == nil:
		return errors.New("fence: the proxy needs a record")
	case len(c.Methods) == 0:
		return errors.New("fence: no method to fence")
	case len(c.PathPrefixes) == 0:
		return errors.New("fence: no path prefix to fence")
	case c.BackendTimeout <= 0:
		return errors.New("fence: the backend timeout must be more than 0s")
	case c.MaxLeases <= 0:
		return errors.New("fence: the lease limit must be at least 1")
	}
	for _, m := range c.Methods {
		if m == "" || m != strings.ToUpper(m) || strings.ContainsAny(m, " \t,") {
			return fmt.Errorf("fence: method %q: give HTTP methods in upper case, one word each", m)
		}
	}
	for _, p := range c.PathPrefixes {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("fence: path prefix %q does not start with /", p)
		}
	}
	return nil
}

// Proxy is a reverse proxy that forwards a fenced request only if its
// token (HeaderToken) is not lower than the highest the proxy has seen
// for its lease (HeaderLease); it answers 409 with the highest otherwise,
// and 428 to a fenced request without the headers. For each lease the
// check, the record (durable before the request goes on) and the forward
// are one step: a request of a lease is forwarded only after the one
// before it was answered, so a stale request cannot overtake a newer one.
type Proxy struct {
	cfg     ProxyConfig
	rp      *httputil.ReverseProxy
	methods map[string]bool
	// strict: some prefix is narrower than "/", so the path must be one
	// the backend reads as the proxy does (no "..", "//", "%2F").
	strict bool

	mu sync.Mutex
	// turns holds the lock of each lease with a request in the proxy,
	// held across check, record and forward; an entry goes when its last
	// request does, so the map is bounded by the requests in flight.
	turns map[string]*turn
}

// turn is a lease's lock and how many requests hold or wait for it.
type turn struct {
	sync.Mutex
	users int
}

// NewProxy returns a Proxy for cfg.
func NewProxy(cfg ProxyConfig) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, methods: map[string]bool{}, turns: map[string]*turn{}}
	for _, m := range cfg.Methods {
		p.methods[m] = true
	}
	for _, pre := range cfg.PathPrefixes {
		p.strict = p.strict || pre != "/"
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Keep a connection to the backend for each request in flight, as
	// clients come many at once (the default keeps 2 and redials).
	tr.MaxIdleConnsPerHost = maxIdlePerBackend
	p.rp = &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(cfg.Backend)
			r.SetXForwarded()
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// A fenced request's lease and token (admitted: recorded
			// already) are named; nil for an unfenced one.
			f, _ := r.Context().Value(fencedKey{}).(map[string]string)
			p.refuse(w, r, http.StatusBadGateway, "backend_unavailable", "the backend did not answer: "+err.Error(), f)
		},
	}
	return p, nil
}

// fencedPath says whether a request of a fenced method to u must carry a
// lease and a token.
func (p *Proxy) fencedPath(u *url.URL) bool {
	for _, pre := range p.cfg.PathPrefixes {
		if strings.HasPrefix(u.Path, pre) {
			return true
		}
	}
	return false
}

// ServeHTTP forwards r, fenced if its method and path say so.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.methods[strings.ToUpper(r.Method)] {
		p.rp.ServeHTTP(w, r)
		return
	}
	if !strings.HasPrefix(r.URL.Path, "/") {
		// "*" or an absolute URL with no path: the backend would get "/*"
		// or "/", which no prefix check here has seen.
		p.refuse(w, r, http.StatusBadRequest, "path_not_canonical",
			fmt.Sprintf("request target %q has no path starting with '/': the proxy fences by path", r.RequestURI), nil)
		return
	}
	if p.strict && !canonical(r.URL) {
		p.refuse(w, r, http.StatusBadRequest, "path_not_canonical",
			fmt.Sprintf("path %q is not canonical (no '.', '..', '//' or encoded '/'): the proxy fences by path prefix", r.URL.EscapedPath()), nil)
		return
	}
	if !p.fencedPath(r.URL) {
		p.rp.ServeHTTP(w, r)
		return
	}
	if len(r.Header.Values(HeaderLease)) > 1 || len(r.Header.Values(HeaderToken)) > 1 {
		p.refuse(w, r, http.StatusBadRequest, "bad_token",
			fmt.Sprintf("more than one %s or %s header: send one of each (the backend might read another than the proxy checked)", HeaderLease, HeaderToken), nil)
		return
	}
	lease, tok := r.Header.Get(HeaderLease), r.Header.Get(HeaderToken)
	if lease == "" || tok == "" {
		p.refuse(w, r, http.StatusPreconditionRequired, "fence_required",
			fmt.Sprintf("%s %s is fenced: send the %s and %s headers", r.Method, r.URL.Path, HeaderLease, HeaderToken), nil)
		return
	}
	if err := CheckLease(lease); err != nil {
		p.refuse(w, r, http.StatusBadRequest, "bad_lease", HeaderLease+": "+err.Error(), nil)
		return
	}
	token, err := strconv.ParseUint(tok, 10, 64)
	if err != nil || token == 0 {
		p.refuse(w, r, http.StatusBadRequest, "bad_token", fmt.Sprintf("%s %q: a token is a positive decimal integer", HeaderToken, tok), nil)
		return
	}
	t := p.take(lease)
	defer p.leave(lease, t)
	if !p.admit(w, r, lease, token) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), p.cfg.BackendTimeout)
	defer cancel()
	ctx = context.WithValue(ctx, fencedKey{}, named(lease, token))
	p.rp.ServeHTTP(w, r.WithContext(ctx))
}

// fencedKey is the context key of a forwarded fenced request's lease and
// token (named), for the backend's error handler.
type fencedKey struct{}

// named is the lease and tokens a refusal names (ProxyError), the
// highest token seen if given.
func named(lease string, token uint64, highest ...uint64) map[string]string {
	m := map[string]string{"lease": lease, "token": strconv.FormatUint(token, 10)}
	for _, h := range highest {
		m["highest"] = strconv.FormatUint(h, 10)
	}
	return m
}

// admit checks and records token under the lease's turn, and answers the
// refusal itself; true means forward.
func (p *Proxy) admit(w http.ResponseWriter, r *http.Request, lease string, token uint64) bool {
	h := p.cfg.Record.Highest(lease)
	if token < h {
		p.refuse(w, r, http.StatusConflict, "stale_token", (&StaleTokenError{Lease: lease, Token: token, Highest: h}).Error(), named(lease, token, h))
		return false
	}
	if h == 0 && p.cfg.Record.Leases() >= p.cfg.MaxLeases {
		p.refuse(w, r, http.StatusInsufficientStorage, "lease_limit",
			fmt.Sprintf("the proxy keeps the tokens of %d leases, its limit: %s is not one of them", p.cfg.MaxLeases, lease), named(lease, token))
		return false
	}
	if token > h && p.cfg.CheckToken != nil {
		live, err := p.cfg.CheckToken(r.Context(), lease, token)
		switch {
		case err != nil:
			p.refuse(w, r, http.StatusServiceUnavailable, "check_unavailable", fmt.Sprintf("cannot check token %d of %s with the grantors: %v", token, lease, err), named(lease, token))
			return false
		case !live:
			p.refuse(w, r, http.StatusConflict, "token_not_live", fmt.Sprintf("token %d is not a live grant of %s at the grantors", token, lease), named(lease, token, h))
			return false
		}
	}
	if err := p.cfg.Record.Admit(lease, token); err != nil {
		var st *StaleTokenError
		if errors.As(err, &st) { // cannot happen under the turn; refuse all the same
			p.refuse(w, r, http.StatusConflict, "stale_token", st.Error(), named(lease, token, st.Highest))
			return false
		}
		p.refuse(w, r, http.StatusInternalServerError, "record_failed", err.Error(), named(lease, token))
		return false
	}
	return true
}

// take waits for lease's turn and returns it, held.
func (p *Proxy) take(lease string) *turn {
	p.mu.Lock()
	t := p.turns[lease]
	if t == nil {
		t = &turn{}
		p.turns[lease] = t
	}
	t.users++
	p.mu.Unlock()
	t.Lock()
	return t
}

// leave ends the turn t of lease.
func (p *Proxy) leave(lease string, t *turn) {
	t.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if t.users--; t.users == 0 {
		delete(p.turns, lease)
	}
}

// Close closes the record and the idle connections to the backend. Call
// it after the server in front has stopped.
func (p *Proxy) Close() error {
	p.rp.Transport.(*http.Transport).CloseIdleConnections()
	return p.cfg.Record.Close()
}

// canonical says whether u's path is one a backend reads as the proxy
// does: cleaned (a trailing slash allowed) and with no encoded slash.
func canonical(u *url.URL) bool {
	if u.RawPath != "" && strings.Contains(strings.ToLower(u.RawPath), "%2f") {
		return false
	}
	p := u.Path
	c := path.Clean(p)
	return p == c || p == c+"/"
}

// ProxyError is the JSON body of the proxy's own answers.
type ProxyError struct {
	// Error is a stable code: fence_required, bad_lease, bad_token,
	// stale_token, token_not_live, check_unavailable, record_failed,
	// lease_limit, path_not_canonical, backend_unavailable.
	Error   string `json:"error"`
	Message string `json:"message"`
	// Lease and Token (a decimal string) name the refused request's
	// lease and token once the proxy has read them (every refusal but
	// fence_required, bad_lease, bad_token and path_not_canonical, and
	// backend_unavailable of an unfenced request); Highest the highest
	// token seen for the lease, of a stale_token or token_not_live
	// refusal.
	Lease   string `json:"lease,omitempty"`
	Token   string `json:"token,omitempty"`
	Highest string `json:"highest,omitempty"`
}

// refuse answers r with the proxy's own status and JSON body, and logs
// it: at warning level what an operator acts on (a stale or dead token,
// the limit, the state or the backend failing), at debug level a client's
// malformed request.
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, status int, code, msg string, tokens map[string]string) {
	body := ProxyError{Error: code, Message: msg, Lease: tokens["lease"], Token: tokens["token"], Highest: tokens["highest"]}
	if log := p.cfg.Logger; log != nil {
		level := slog.LevelWarn
		if status == http.StatusBadRequest || status == http.StatusPreconditionRequired {
			level = slog.LevelDebug
		}
		log.Log(r.Context(), level, "request refused", "status", status, "error", code, "method", r.Method, "path", r.URL.Path,
			"remote", r.RemoteAddr, "lease", body.Lease, "token", body.Token, "highest", body.Highest, "message", msg)
	}
	if body.Highest != "" {
		w.Header().Set(HeaderHighest, body.Highest)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}
