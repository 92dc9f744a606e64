package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// The monitoring the packages ship (packaging/prometheus-rules.yml and
// packaging/grafana-dashboard.json), tried on a real Prometheus (Debian's
// prometheus package, which `make deps` installs) scraping a real cluster:
// three grantors and a sidecar holding a lease, all with --metrics-addr.

const (
	rulesFile     = "../../packaging/prometheus-rules.yml"
	dashboardFile = "../../packaging/grafana-dashboard.json"
	metricsDoc    = "../../METRICS.md"
)

// later are the families that have no series until the cluster has run
// longer than this test lets it, and why.
var later = map[string]string{
	"leaseside_clock_drift_ppm": "the drift rate is known after 10 keepalives over 2 minutes",
}

// pollEvery is how often the test asks Prometheus's HTTP API whether what
// it waits for has happened: an API offers no event to wait on.
const pollEvery = 250 * time.Millisecond

// poll calls cond until it holds or timeout passes.
func poll(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%s: not after %v (%s)", what, timeout, state)
		}
	}
}

// promAPI is a Prometheus server's HTTP API.
type promAPI struct {
	t    *testing.T
	base string
}

// get GETs path with query and decodes the API's envelope into data; it
// returns the API's error, if any.
func (p promAPI) get(path string, query url.Values, data any) error {
	p.t.Helper()
	resp, err := http.Get(p.base + path + "?" + query.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var env struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("%s: %v: %s", path, err, body)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s: %s", env.Status, env.ErrorType, env.Error)
	}
	return json.Unmarshal(env.Data, data)
}

// query runs an instant PromQL query and returns how many series it gave.
func (p promAPI) query(q string) (int, error) {
	var data struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	}
	if err := p.get("/api/v1/query", url.Values{"query": {q}}, &data); err != nil {
		return 0, err
	}
	if data.ResultType != "vector" {
		return 1, nil // a scalar or a string: one value
	}
	return len(data.Result), nil
}

// series returns how many series match the selector with a sample
// between start and now. Unlike an instant query it also finds series
// whose target's last scrape failed: a failed scrape (on a starved
// machine a process misses the 1 s scrape timeout now and then) marks
// every series of the target stale, and an instant query skips those.
func (p promAPI) series(match string, start time.Time) (int, error) {
	var data []map[string]string
	q := url.Values{
		"match[]": {match},
		"start":   {strconv.FormatInt(start.Unix(), 10)},
		"end":     {strconv.FormatInt(time.Now().Unix()+1, 10)},
	}
	if err := p.get("/api/v1/series", q, &data); err != nil {
		return 0, err
	}
	return len(data), nil
}

// targets returns the health of each active target by scrape URL, and
// the targets API's whole answer for a failure message.
func (p promAPI) targets() (map[string]string, string, error) {
	var data struct {
		ActiveTargets []struct {
			ScrapeURL string `json:"scrapeUrl"`
			Health    string `json:"health"`
			LastError string `json:"lastError"`
		} `json:"activeTargets"`
	}
	if err := p.get("/api/v1/targets", nil, &data); err != nil {
		return nil, "", err
	}
	health := map[string]string{}
	for _, tg := range data.ActiveTargets {
		health[tg.ScrapeURL] = tg.Health
	}
	return health, fmt.Sprintf("%+v", data.ActiveTargets), nil
}

// promRule is a rule as the rules API shows it.
type promRule struct {
	Name           string    `json:"name"`
	Query          string    `json:"query"`
	Health         string    `json:"health"`
	LastError      string    `json:"lastError"`
	LastEvaluation time.Time `json:"lastEvaluation"`
}

// The alert rules load into Prometheus (and pass promtool), every one of
// them evaluates without error against a real cluster's metrics, every
// query of the Grafana dashboard runs, and every metric either names is
// in METRICS.md and has series: a renamed metric fails here. `/` on a
// metrics port shows an index that links /metrics.
func TestPrometheusRulesAndDashboard(t *testing.T) {
	t.Parallel()
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not installed (make deps installs Debian's prometheus package)")
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (make deps installs Debian's prometheus package)")
	}
	rules, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}

	// The cluster, each process with a metrics port, with TLS as in
	// production (its certificates' expiry is exported).
	ports := freeLoopbackPorts(t, 5)
	addr := func(i int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i])) }
	p := newClusterPKI(t)
	c := newLoopbackCluster(t, 3)
	for i, n := range c.nodes {
		n.extra = []string{"--metrics-addr", addr(i)}
		p.cert("grantor", n.id, false)
		n.tlsDir, n.keyFile = p.dir, p.key
	}
	c.startAll()
	c.waitOffice(c.marks0())
	s := startSidecar(t, "sidecar", nil, append(p.cert("sidecar", "s1", false), "--grantors", c.rpcAddrs(), "--metrics-addr", addr(3))...)
	ev := s.events.mark()
	acquireCLI(t, s, "jobs/monitored", "--ttl", "3s", "--detached")
	s.waitEvent(t, ev, ipc.EventRenewed, "jobs/monitored") // a renewal margin to record

	checkMetricsIndex(t, "http://"+addr(0)+"/")

	// Prometheus, scraping all four every second and evaluating the rules
	// every second.
	dir := t.TempDir()
	conf := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: leaseside-grantors
    static_configs:
      - targets: [%q, %q, %q]
  - job_name: leaseside-sidecars
    static_configs:
      - targets: [%q]
`, rules, addr(0), addr(1), addr(2), addr(3))), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "config", conf).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	started := time.Now()
	startProcess(t, "prometheus", exec.Command(prom, "--config.file="+conf, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr(4), "--log.level=warn"))
	api := promAPI{t: t, base: "http://" + addr(4)}

	// Every target scraped successfully at least once (all four at the
	// same moment is not needed: on a starved machine a scrape misses its
	// 1 s timeout now and then, and the next one succeeds). The sidecar's
	// first successful scrape is after the lease was acquired and renewed.
	var up time.Time
	scraped := map[string]bool{}
	poll(t, "every target scraped", func() (bool, string) {
		health, all, err := api.targets()
		if err != nil {
			return false, err.Error()
		}
		for u, h := range health {
			if h == "up" {
				scraped[u] = true
			}
		}
		up = time.Now()
		return len(scraped) == 4, all
	})
	// Then the sidecar misses its scrapes, as a starved one does, until
	// the checks are done: every series of a target whose last scrape
	// failed is stale, and the checks must still find them.
	sidecarURL := "http://" + addr(3) + "/metrics"
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.cmd.Process.Signal(syscall.SIGCONT) })
	poll(t, "a failed scrape of the stopped sidecar", func() (bool, string) {
		health, all, err := api.targets()
		if err != nil {
			return false, err.Error()
		}
		return health[sidecarURL] == "down", all
	})

	// Every rule evaluated twice after all targets were up, without error.
	want := countRules(t, rules)
	var got []promRule
	poll(t, "every rule evaluated with the targets' data", func() (bool, string) {
		var data struct {
			Groups []struct {
				Rules []promRule `json:"rules"`
			} `json:"groups"`
		}
		if err := api.get("/api/v1/rules", nil, &data); err != nil {
			return false, err.Error()
		}
		got = got[:0]
		for _, g := range data.Groups {
			got = append(got, g.Rules...)
		}
		for _, r := range got {
			if r.LastEvaluation.Before(up.Add(2 * time.Second)) {
				return false, r.Name + " not evaluated since"
			}
		}
		return len(got) == want, fmt.Sprintf("%d rules loaded, want %d", len(got), want)
	})
	for _, r := range got {
		if r.Health != "ok" || r.LastError != "" {
			t.Errorf("rule %s: health %q, error %q\n%s", r.Name, r.Health, r.LastError, r.Query)
		}
	}

	// Every dashboard query runs, with Grafana's variables filled in.
	exprs := dashboardQueries(t)
	vars := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "15s", "$__range", "5m", "$job", ".*", "$instance", ".*")
	for _, e := range exprs {
		if _, err := api.query(vars.Replace(e)); err != nil {
			t.Errorf("dashboard query %s: %v", e, err)
		}
	}

	// Every metric named is documented and has series.
	documented := documentedFamilies(t)
	var queries []string
	for _, r := range got {
		queries = append(queries, r.Query)
	}
	var named []string
	for _, name := range metricNames(append(queries, exprs...), documented) {
		if !documented[name] {
			t.Errorf("%s is named in the rules or the dashboard but is no metric family of METRICS.md", name)
			continue
		}
		if _, ok := later[name]; !ok {
			named = append(named, name)
		}
	}
	poll(t, "every metric named has series in Prometheus", func() (bool, string) {
		var missing []string
		for _, name := range named {
			if n, err := api.series(fmt.Sprintf("{__name__=~%q}", name+"(_bucket)?"), started); err != nil || n == 0 {
				missing = append(missing, fmt.Sprintf("%s (%v)", name, err))
			}
		}
		return len(missing) == 0, "no series: " + strings.Join(missing, ", ")
	})
	t.Logf("%d rules evaluated, %d dashboard queries run, %d metric families named", len(got), len(exprs), len(metricNames(append(queries, exprs...), documented)))
}

// checkMetricsIndex checks what / on a metrics port shows.
func checkMetricsIndex(t *testing.T, u string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `href="/metrics"`) || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET %s: %s %q\n%s", u, resp.Status, resp.Header.Get("Content-Type"), body)
	}
	if resp, err := http.Get(u + "nothing"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET %snothing: %v %v, want 404", u, resp, err)
	}
}

// countRules counts the alert and recording rules of a rules file.
func countRules(t *testing.T, path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return len(regexp.MustCompile(`(?m)^\s*- (alert|record):`).FindAll(b, -1))
}

// dashboardQueries returns every PromQL expression of the dashboard's
// panels.
func dashboardQueries(t *testing.T) []string {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var exprs []string
	for _, p := range d.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	if len(exprs) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	return exprs
}

// documentedFamilies are the metric families METRICS.md lists.
func documentedFamilies(t *testing.T) map[string]bool {
	b, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	fams := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_:]+)` \\|").FindAllSubmatch(b, -1) {
		fams[string(m[1])] = true
	}
	return fams
}

// metricNames returns the leaseside metric families the expressions
// name; a histogram's _bucket, _count and _sum series count as their
// family.
func metricNames(exprs []string, families map[string]bool) []string {
	var names []string
	for _, e := range exprs {
		for _, n := range regexp.MustCompile(`\bleaseside_[a-z_]+`).FindAllString(e, -1) {
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if base := strings.TrimSuffix(n, suffix); base != n && families[base] {
					n = base
				}
			}
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}
